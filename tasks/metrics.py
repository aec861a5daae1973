"""seqio score metrics: ROC-AUC and Pearson of P("1"), as T5X's evaluator reports them.

Tasks registered with `eval_targets="positive"` (what `seahorse_metrics.tasks.t5x`
does) give every evaluation example the target `1` (the single piece `▁1`,
no EOS) and keep its label and rating in the `label` and `rating` features.
T5X's score mode (`EncoderDecoderModel.score_batch`, ours too) then returns
each example's log P("1") at the first decoder step, and seqio's `Evaluator`
calls

    postprocess_fn(target_text, example=..., is_target=True)   # -> the judgment
    metric_fn(targets=[judgments], scores=[log P("1")])

so `roc_auc` and `pearson` compute, from P("1") = exp(score), the same figures
`seahorse-metrics evaluate` reports: ROC-AUC against the binary label, Pearson
against the rating (mFACE's rater average; the 0/1 label elsewhere).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from seahorse_metrics import stats


def judgment(
    target: Any, example: Optional[Mapping[str, Any]] = None, is_target: bool = False
) -> Any:
    """seqio postprocessor: a target becomes the example's `{"label", "rating"}`.

    Model outputs (`is_target=False`) pass through unchanged: score metrics
    never decode any.
    """
    if not is_target:
        return target
    if example is None or "label" not in example:
        raise ValueError(
            "the SEAHORSE score metrics need the example's `label` feature; "
            "evaluate the task's own dataset (seqio.Evaluator does)"
        )
    rating = float(example["rating"]) if "rating" in example else math.nan
    label = int(example["label"])
    return {"label": label, "rating": rating if math.isfinite(rating) else float(label)}


def _probabilities(scores: Sequence[float]) -> np.ndarray:
    return np.exp(np.asarray(scores, dtype=np.float64).reshape(-1))


def _defined(compute, *args) -> float:
    try:
        return float(compute(*args))
    except stats.UndefinedStatistic:  # one class only, constant scores, too few items
        return math.nan


def roc_auc(targets: Sequence[Mapping[str, Any]], scores: Sequence[float]) -> dict[str, float]:
    """ROC-AUC of P("1") = exp(score) against the binary labels (NaN if undefined)."""
    labels = [target["label"] for target in targets]
    return {"roc_auc": _defined(stats.roc_auc, labels, _probabilities(scores))}


def pearson(targets: Sequence[Mapping[str, Any]], scores: Sequence[float]) -> dict[str, float]:
    """Pearson of P("1") = exp(score) against the ratings (NaN if undefined)."""
    ratings = [target["rating"] for target in targets]
    return {"pearson": _defined(stats.pearson, _probabilities(scores), ratings)}


SCORE_METRICS = (roc_auc, pearson)
