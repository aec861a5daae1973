"""Soft targets: what a distillation run feeds the trainer (`distill.py`).

A `SoftExampleSet` is an `ExampleSet` whose examples also carry a target
distribution over the answers "1" and "0" (the teacher's, tempered and
optionally mixed with the human label), the temperature and the two token
ids. `SoftTargetStream` adds them to each training batch as three fields,
and `train_step` then minimises `distillation_loss` instead of the token
cross-entropy:

    loss = T^2 * mean_rows -[t * log p_T("1") + (1 - t) * log p_T("0")]

where `p_T = softmax(logits / T)` over the full vocabulary at the first
decoder step (so the student also learns to put no mass elsewhere, as a
metric read with `normalize="full"` needs) and `t` the row's target P("1").
The T^2 factor keeps the gradient's scale independent of T (Hinton et al.
2015). Validation on a `SoftExampleSet` adds the Spearman correlation of the
student's P("1") with the teacher's, which then picks the best checkpoint.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from seahorse_metrics import stats
from seahorse_metrics.training.batches import BatchStream
from seahorse_metrics.training.data import ExampleSet

# Batch fields of a distillation batch (all split over the batch axis).
SOFT_TARGETS = "soft_targets"
TEMPERATURE = "soft_target_temperature"
TOKEN_IDS = "soft_target_ids"
# A summary that crowds out its article (`data.inputs`) is cut so that the
# article keeps its minimum share, for the teacher's scores, the student's
# inputs and the report alike: every pair gets a target, and the student
# learns from the very input the teacher scored.
LONG_SUMMARIES = "cut"
# The validation statistic that selects a student's best checkpoint.
AGREEMENT = "teacher_spearman"


def soft_target_cross_entropy(
    logits_BxV: jax.Array,
    targets_B: jax.Array,
    token_ids_Bx2: jax.Array,
    temperature_B: jax.Array,
    weights_B: jax.Array,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Soft-label cross-entropy of first-step logits against target P("1").

    Args:
      logits_BxV: First decoder step logits (float32).
      targets_B: Target probability of the first token id, in [0, 1].
      token_ids_Bx2: Ids of "1" and "0" per row.
      temperature_B: Softmax temperature per row (> 0).
      weights_B: 1 for a real row, 0 for padding.

    Returns:
      (loss, aux) as `EncoderDecoderModel.loss` returns them: the weighted
      mean of T^2 x cross-entropy, and cross_entropy, z_loss (0), accuracy
      (the student's argmax of the two agrees with the target's) and
      num_tokens (real rows).
    """
    logits_BxV = logits_BxV.astype(jnp.float32)
    log_p_BxV = jax.nn.log_softmax(logits_BxV / temperature_B[:, None], axis=-1)
    log_p_Bx2 = jnp.take_along_axis(log_p_BxV, token_ids_Bx2, axis=-1)
    targets_Bx2 = jnp.stack([targets_B, 1.0 - targets_B], axis=-1)
    cross_entropy_B = -jnp.sum(targets_Bx2 * log_p_Bx2, axis=-1) * jnp.square(temperature_B)
    rows = jnp.sum(weights_B)
    loss = jnp.sum(cross_entropy_B * weights_B) / jnp.maximum(rows, 1.0)
    agrees_B = (log_p_Bx2[:, 0] > log_p_Bx2[:, 1]) == (targets_B > 0.5)
    aux = {
        "cross_entropy": loss,
        "z_loss": jnp.zeros((), jnp.float32),
        "num_tokens": rows,
        "accuracy": jnp.sum(agrees_B * weights_B) / jnp.maximum(rows, 1.0),
    }
    return loss, aux


def distillation_loss(
    model, params: Any, batch: dict[str, jax.Array], dropout_rng: Optional[jax.Array]
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """`soft_target_cross_entropy` of the model's first decoder step on a
    distillation batch (the model's own forward path, dropout included)."""
    logits_BxV = model._logits(params, batch, dropout_rng)[:, 0, :]  # pylint: disable=protected-access
    weights_B = (batch["decoder_target_tokens"][:, 0] != 0).astype(jnp.float32)
    return soft_target_cross_entropy(
        logits_BxV, batch[SOFT_TARGETS], batch[TOKEN_IDS], batch[TEMPERATURE], weights_B
    )


def tempered(p_yes: np.ndarray, temperature: float) -> np.ndarray:
    """P("1") over {"1", "0"} with the log-odds divided by `temperature`."""
    p = np.clip(np.asarray(p_yes, np.float64), 1e-7, 1.0 - 1e-7)
    return 1.0 / (1.0 + np.exp(-(np.log(p) - np.log1p(-p)) / temperature))


def mixed_targets(
    teacher_p_yes: np.ndarray, labels: np.ndarray, temperature: float, label_weight: float
) -> np.ndarray:
    """The target P("1") of each example: the tempered teacher, mixed with
    weight `label_weight` with the human label where there is one (NaN = none)."""
    targets = tempered(teacher_p_yes, temperature)
    known = ~np.isnan(labels)
    targets[known] = (1.0 - label_weight) * targets[known] + label_weight * labels[known]
    return targets.astype(np.float32)


@dataclasses.dataclass(frozen=True)
class SoftExampleSet(ExampleSet):
    """Examples with the teacher's scores and their soft targets.

    Attributes:
      teacher_p_yes: The teacher's P("1") per example.
      soft_targets: Target P("1") per example (`mixed_targets`).
      temperature: Softmax temperature of the loss.
      token_ids: Ids of "1" and "0" in the student's vocabulary.
    """

    teacher_p_yes: Optional[np.ndarray] = None
    soft_targets: Optional[np.ndarray] = None
    temperature: float = 1.0
    token_ids: tuple[int, int] = (0, 0)

    @classmethod
    def build(
        cls,
        examples: ExampleSet,
        teacher_p_yes: np.ndarray,
        temperature: float,
        label_weight: float,
        token_ids: tuple[int, int],
    ) -> "SoftExampleSet":
        """`examples` with the teacher's scores (one per example).

        Raises:
          ValueError: for a score count that does not match, scores outside
            [0, 1], or a temperature that is not positive.
        """
        teacher = np.asarray(teacher_p_yes, np.float64)
        if teacher.shape != (len(examples),):
            raise ValueError(f"{teacher.shape} teacher scores for {len(examples)} examples")
        if not np.all((teacher >= 0.0) & (teacher <= 1.0)):
            raise ValueError("teacher scores must be probabilities in [0, 1]")
        if not temperature > 0 or not 0.0 <= label_weight <= 1.0:
            raise ValueError(
                f"temperature must be > 0 and label_weight in [0, 1], got "
                f"{temperature} and {label_weight}"
            )
        return cls(
            **{f.name: getattr(examples, f.name) for f in dataclasses.fields(ExampleSet)},
            teacher_p_yes=teacher.astype(np.float32),
            soft_targets=mixed_targets(
                teacher, examples.labels.astype(np.float64), temperature, label_weight
            ),
            temperature=float(temperature),
            token_ids=tuple(int(t) for t in token_ids),
        )


class SoftTargetStream(BatchStream):
    """A `BatchStream` whose batches also carry the rows' soft targets."""

    def __init__(self, examples: SoftExampleSet, *args, **kwargs):
        if kwargs.get("pack"):
            raise ValueError(
                "distillation trains one example per row: set TrainConfig.pack = False"
            )
        super().__init__(examples, *args, **kwargs)
        self._rows: list[list[int]] = []

    def _next_rows(self) -> list[list[int]]:
        self._rows = super()._next_rows()
        return self._rows

    def __next__(self) -> dict[str, np.ndarray]:
        batch = super().__next__()
        rows = [row[0] for row in self._rows]
        examples = self.examples
        batch[SOFT_TARGETS] = examples.soft_targets[rows].astype(np.float32)
        batch[TEMPERATURE] = np.full(len(rows), examples.temperature, np.float32)
        batch[TOKEN_IDS] = np.tile(np.asarray(examples.token_ids, np.int32), (len(rows), 1))
        return batch


def make_stream(examples: ExampleSet, *args, **kwargs) -> BatchStream:
    """The trainer's batch stream: soft targets for a `SoftExampleSet`,
    weighted question prefixes for a `multi_question.QuestionExampleSet`."""
    from seahorse_metrics.training.multi_question import QuestionExampleSet, QuestionStream

    if isinstance(examples, SoftExampleSet):
        return SoftTargetStream(examples, *args, **kwargs)
    if isinstance(examples, QuestionExampleSet):
        return QuestionStream(examples, *args, **kwargs)
    return BatchStream(examples, *args, **kwargs)


def selection_metric(validation_examples: Optional[ExampleSet]) -> str:
    """The validation statistic the best checkpoint maximises."""
    return AGREEMENT if isinstance(validation_examples, SoftExampleSet) else "roc_auc"


def agreement_metrics(examples: ExampleSet, probs_Nx2: np.ndarray) -> dict[str, Any]:
    """Spearman of the student's P("1") over {"0", "1"} (from its first-step
    probabilities of "1" and "0") with the teacher's, on a `SoftExampleSet`
    (None when undefined); nothing for other sets."""
    if not isinstance(examples, SoftExampleSet):
        return {}
    probs_Nx2 = np.asarray(probs_Nx2, np.float64)
    pair_p_yes = probs_Nx2[:, 0] / np.maximum(probs_Nx2.sum(axis=1), np.finfo(np.float64).tiny)
    try:
        value = float(stats.spearman(pair_p_yes, examples.teacher_p_yes))
    except stats.UndefinedStatistic:
        value = None
    return {AGREEMENT: None if value is None or math.isnan(value) else value}
