"""An encoder-only pretraining stage: a per-piece logit from a head on the
encoder's outputs, trained with AdamW and dropped afterwards. The matching,
word-noise, grammar and alignment stages are this with their own batches."""

from __future__ import annotations

import logging
import time
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax
from sklearn.metrics import roc_auc_score
from tqdm import tqdm

logger = logging.getLogger("demo_data.backbone")

HELD_OUT_EXAMPLES = 200


def train_piece_stage(
    model,
    params,
    name: str,
    steps: int,
    learning_rate: float,
    batch_of: Callable,
    batch_size: int,
    seed: int,
):
    """`steps` AdamW steps (constant rate) of a per-piece logit from a head on
    the encoder's outputs (dropped afterwards), on batches of `batch_size`
    that `batch_of(rng, size)` draws (tokens, and labels in [0, 1], soft or
    0/1, with -1 where no label, e.g. padding; a last axis of labels gives
    one logit per column). ROC-AUC reads a soft label as positive when above 0.

    Returns:
      (params, record): the updated backbone, and the stage's final loss and
      ROC-AUC on `HELD_OUT_EXAMPLES` held-out examples.
    """
    rng = np.random.default_rng(seed)
    optimizer = optax.adamw(learning_rate)
    held_out = batch_of(rng, HELD_OUT_EXAMPLES)
    # One logit per piece, or one per piece and column when the labels have columns.
    heads = held_out[1].shape[2:]
    trained = {
        "backbone": params,
        "head": {"w": jnp.zeros((model.config.d_model,) + heads), "b": jnp.zeros(heads)},
    }
    opt_state = optimizer.init(trained)
    step = _step(model, optimizer)
    start, history = time.time(), []
    for index in tqdm(range(steps), desc=name, mininterval=10):
        trained, opt_state, loss = step(trained, opt_state, *batch_of(rng, batch_size))
        history.append(float(loss))
        if (index + 1) % 100 == 0:
            logger.info(
                "%s step %d loss %.3f (%.0f s)",
                name,
                index + 1,
                np.mean(history[-100:]),
                time.time() - start,
            )
    auc, per_column = _held_out_roc_auc(model, trained, held_out, name)
    record = _record(steps, learning_rate, history, start, auc, per_column)
    return trained["backbone"], record


def _record(steps, learning_rate, history, start, auc, per_column) -> dict:
    """The stage's record: its settings, final loss (mean of the last 100
    steps), held-out ROC-AUC (per column too, when the labels have columns)
    and seconds since `start`."""
    record = {
        "steps": steps,
        "learning_rate": learning_rate,
        "final_loss": round(float(np.mean(history[-100:])), 4),
        "held_out_roc_auc": auc,
        "seconds": round(time.time() - start),
    }
    if per_column is not None:
        record["held_out_roc_auc_per_column"] = per_column
    return record


def _logits(model) -> Callable:
    """logits_of(trained, tokens): the head on the encoder's outputs."""

    def logits_of(trained, tokens):
        encoded = model.encode(trained["backbone"], tokens)
        return encoded @ trained["head"]["w"] + trained["head"]["b"]

    return logits_of


def _step(model, optimizer) -> Callable:
    """The jitted step(trained, opt_state, tokens, labels): masked sigmoid
    cross-entropy over the labelled pieces."""
    logits_of = _logits(model)

    def objective(trained, tokens, labels):
        mask = (labels >= 0).astype(jnp.float32)
        loss = optax.sigmoid_binary_cross_entropy(
            logits_of(trained, tokens), jnp.maximum(labels, 0).astype(jnp.float32)
        )
        return (loss * mask).sum() / jnp.maximum(mask.sum(), 1.0)

    @jax.jit
    def step(trained, opt_state, tokens, labels):
        loss, grads = jax.value_and_grad(objective)(trained, tokens, labels)
        updates, opt_state = optimizer.update(grads, opt_state, trained)
        return optax.apply_updates(trained, updates), opt_state, loss

    return step


def _held_out_roc_auc(model, trained, held_out, name: str) -> tuple[float, list | None]:
    """ROC-AUC of the head on the held-out batch, over all labelled pieces,
    and per column when the labels have columns (None for a column with one
    class; None for all when there are no columns)."""
    labelled, positive = held_out[1] >= 0, held_out[1] > 0
    logits = np.asarray(jax.jit(_logits(model))(trained, held_out[0]))
    auc = round(float(roc_auc_score(positive[labelled], logits[labelled])), 4)
    logger.info("%s stage: held-out ROC-AUC %.4f", name, auc)
    if held_out[1].ndim == 2:
        return auc, None
    columns = [positive[..., k][labelled[..., k]] for k in range(held_out[1].shape[2])]
    per_column = [
        round(float(roc_auc_score(column, logits[..., k][labelled[..., k]])), 4)
        if len(set(column.tolist())) == 2
        else None
        for k, column in enumerate(columns)
    ]
    logger.info("%s stage: held-out ROC-AUC per column %s", name, per_column)
    return auc, per_column
