"""Periodic validation: score the validation split as the metric will be used.

The model of the current step scores every validation pair with
`first_token_probs` (P("1") at the first decoder step, softmax over the full
vocabulary, as the released SEAHORSE metrics are read) and is compared with
the human labels by ROC-AUC and Pearson from `seahorse_metrics.evaluation.stats`.
The paper selects the checkpoint with the best validation ROC-AUC.
"""
from __future__ import annotations

import functools
import logging
import math
from typing import Any, Optional, Sequence

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from seahorse_metrics.evaluation import stats
from seahorse_metrics.training import sharding as sharding_lib
from seahorse_metrics.training.data import ExampleSet

logger = logging.getLogger(__name__)

MIN_BUCKET = 64


def bucket_length(length: int, max_length: int) -> int:
    """Smallest power of two >= `length` (at least MIN_BUCKET), capped at max_length."""
    bucket = MIN_BUCKET
    while bucket < length:
        bucket *= 2
    return min(bucket, max_length)


@functools.lru_cache(maxsize=16)
def _compiled_probs(model, token_ids: tuple[int, ...], mesh: Mesh):
    # One jitted function per (model config, ids, mesh), reused by later runs
    # in the same process; the output is replicated so every process can read it.
    replicated = NamedSharding(mesh, PartitionSpec())
    return jax.jit(
        lambda params, tokens: model.first_token_probs(params, tokens, token_ids),
        out_shardings=replicated,
    )


def first_token_probabilities(
    model,
    params,
    examples: ExampleSet,
    token_ids: Sequence[int],
    batch_size: int,
    max_length: int,
    mesh: Mesh,
) -> np.ndarray:
    """P(token) at the first decoder step for every example of `examples`.

    Examples are visited in order of length and padded to a power-of-two
    bucket, so each batch shape compiles once.

    Args:
      model: The `EncoderDecoderModel`.
      params: Parameters (sharded on `mesh`).
      examples: The examples to score.
      token_ids: Vocabulary ids to read (id of "1" first).
      batch_size: Rows per batch; must divide over the `data` mesh axis.
      max_length: Encoder length cap.
      mesh: The device mesh.

    Returns:
      float32 [len(examples), len(token_ids)] in the examples' order.
    """
    probs_fn = _compiled_probs(model, tuple(int(t) for t in token_ids), mesh)
    batch_sharding = sharding_lib.batch_sharding(mesh)
    lengths = np.minimum(examples.input_lengths, max_length)
    order = np.argsort(lengths, kind="stable")
    out = np.zeros((len(examples), len(token_ids)), np.float32)
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        width = bucket_length(int(lengths[chunk].max()), max_length)
        tokens = np.zeros((batch_size, width), np.int32)
        for row, index in enumerate(chunk):
            inputs = examples.inputs(index)[:width]
            tokens[row, : len(inputs)] = inputs
        placed = sharding_lib.global_batch({"tokens": tokens}, batch_sharding)["tokens"]
        out[chunk] = np.asarray(probs_fn(params, placed))[: len(chunk)]
    return out


def _statistic(fn, *args) -> Optional[float]:
    try:
        return float(fn(*args))
    except stats.UndefinedStatistic as undefined:
        logger.warning("Validation %s is undefined: %s", fn.__name__, undefined.reason)
        return None


def validation_metrics(labels: np.ndarray, p_yes: np.ndarray) -> dict[str, Any]:
    """ROC-AUC and Pearson of P("1") against the binary labels.

    Examples without a label (NaN) are left out. A statistic that is
    undefined on these inputs (one class only; constant scores for Pearson)
    is None.
    """
    known = ~np.isnan(labels)
    y, p = labels[known].astype(np.float64), p_yes[known].astype(np.float64)
    return {
        "roc_auc": _statistic(stats.roc_auc, y, p),
        "pearson": _statistic(stats.pearson, p, y),
        "num_examples": int(known.sum()),
        "mean_p_yes": float(p.mean()) if len(p) else math.nan,
    }


def validate(model, params, examples: ExampleSet, token_ids: Sequence[int], batch_size: int,
             max_length: int, mesh: Mesh) -> dict[str, Any]:
    """Scores `examples` with `params` and returns `validation_metrics`."""
    probs = first_token_probabilities(model, params, examples, token_ids, batch_size, max_length, mesh)
    return validation_metrics(examples.labels, probs[:, 0])
