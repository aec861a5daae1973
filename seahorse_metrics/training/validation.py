"""Periodic validation: score the validation split as the metric will be used.

The model of the current step scores every validation pair with the scorer's
own engine (`seahorse_metrics.engines.jax_engine.JaxEngine`, the program of
`model.first_step`): P("1") at the first decoder step, softmax over the full
vocabulary, as the released SEAHORSE metrics are read, in the scorer's length buckets and batches
(`seahorse_metrics.scoring.batching`) and with its compiled programs. So the
checkpoint kept as the best is chosen by the numbers users will score with.
The scores are compared with the human labels by ROC-AUC and Pearson from
`seahorse_metrics.stats`. The paper selects the checkpoint with
the best validation ROC-AUC.
"""

from __future__ import annotations

import logging
import math
from typing import Any, Optional, Sequence

import numpy as np
from jax.sharding import Mesh

from seahorse_metrics import stats
from seahorse_metrics.engines.jax_engine import JaxEngine
from seahorse_metrics.scoring.batching import BatchingConfig, batch_window, bucket_lengths
from seahorse_metrics.training.data import ExampleSet

logger = logging.getLogger(__name__)


def first_token_probabilities(
    model,
    params,
    examples: ExampleSet,
    token_ids: Sequence[int],
    batch_size: int,
    max_length: int,
    mesh: Mesh,
    questions: Optional[Any] = None,
) -> np.ndarray:
    """P(token) at the first decoder step for every example of `examples`
    (after each question's prefix, for a multi-question model).

    The examples form one window of the scorer: batched by length bucket
    (`scoring.batching`, buckets up to `max_length`), each batch shape
    compiled once and kept by the engine's program cache across validations.

    Args:
      model: The `EncoderDecoderModel`.
      params: Parameters (sharded on `mesh`).
      examples: The examples to score.
      token_ids: Vocabulary ids to read (id of "1" first).
      batch_size: Most rows per batch; rows split over the `data` mesh axis.
      max_length: Encoder length cap.
      mesh: The device mesh.
      questions: A multi-question model's `QuestionPrefixes`, or None.

    Returns:
      float32 [len(examples), len(token_ids)] in the examples' order (with
      `questions`, [len(examples), questions, len(token_ids)]).
    """
    engine = JaxEngine(model, params, token_ids, mesh, questions=questions)
    config = BatchingConfig(
        buckets=bucket_lengths(max_length),
        batch_size=batch_size,
        row_multiple=engine.data_parallel,
        window_size=max(1, len(examples)),
    )
    units = [(index, examples.inputs(index)[:max_length]) for index in range(len(examples))]
    per_question = (len(questions),) if questions is not None else ()
    out = np.zeros((len(examples),) + per_question + (len(engine.token_ids),), np.float32)
    for batch in batch_window(units, config, model.config.pad_id):
        log_probs = engine.log_probs(batch.tokens)
        for row, key in enumerate(batch.keys):
            if key is not None:
                # As `units.unit_scores` reads them: exp in float64, kept as float32.
                out[key] = np.exp(log_probs[row].astype(np.float64))
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


def validate(
    model,
    params,
    examples: ExampleSet,
    token_ids: Sequence[int],
    batch_size: int,
    max_length: int,
    mesh: Mesh,
) -> dict[str, Any]:
    """Scores `examples` with `params` and returns `validation_metrics`."""
    probs = first_token_probabilities(
        model, params, examples, token_ids, batch_size, max_length, mesh
    )
    return validation_metrics(examples.labels, probs[:, 0])
