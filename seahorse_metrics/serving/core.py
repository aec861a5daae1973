"""The service's one contact with the scoring core.

The service scores rows as `score` does: a merged window of request pairs
is a list of input rows (`rows.records_as_rows`), cut by the core's one
windowing rule (`rows.window_rows`) and turned into entries (scores,
truncation flags, per-sentence scores, or the `error` of a row that cannot
be scored) by `rows.score_windows`; each entry becomes the fields `score`
writes by `output.OutputFields.record`. Nothing here computes a score.

`scorer_for_mode` gives the `MultiScorer` of a request's metrics and modes:
a shallow copy sharing the loaded models and compiled programs, with its
own `names`/`engines` subset, input settings and options.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, Iterator, Mapping, Optional, Sequence

from seahorse_metrics.data.tables import TableRow
from seahorse_metrics.scoring.job import InputFields
from seahorse_metrics.scoring.options import ScoringOptions
from seahorse_metrics.scoring.output import ERROR_FIELD, OutputFields
from seahorse_metrics.scoring.rows import records_as_rows, score_windows, window_rows
from seahorse_metrics.scoring.window_scoring import ScoringStats

__all__ = [
    "ERROR_FIELD",
    "ScoringStats",
    "TableRow",
    "records_as_rows",
    "response_fields",
    "score_window",
    "scorer_for_mode",
]


def score_window(
    scorer: Any,
    rows: Sequence[TableRow],
    fields: Mapping[str, Optional[str]],
    *,
    batch_size: Optional[int] = None,
    stats: Optional[ScoringStats] = None,
) -> Iterator[list[tuple[TableRow, dict]]]:
    """Scores a merged window's rows with the core's row scoring.

    The rows (numbered 0..n-1) are cut by the core's one windowing rule
    (`rows.window_rows`: a single window unless they outnumber the
    scorer's `window_size`).

    Args:
      scorer: A `MultiScorer`.
      rows: The window's rows (`records_as_rows` of the requests' pairs).
      fields: {"premise", "hypothesis", "lang", "question"} -> field of a record.
      batch_size: Most rows of a batch (default: the scorer's).
      stats: Accumulates truncation and batching counts.

    Yields:
      (row, entry) lists: the rows that cannot be scored (with the `error`
      `score` writes), then after each batch the rows it finished.
    """
    return score_windows(
        scorer,
        window_rows(rows, scorer.window_size),
        InputFields.of(fields),
        batch_size=batch_size,
        stats=stats,
    )


def response_fields(
    entry: Mapping[str, Any],
    decisions: Mapping[str, float],
    calibration: Optional[Mapping[str, Any]] = None,
) -> dict:
    """The output fields `score` writes for an entry (no input fields): a
    score per metric, `<metric>_decision` per threshold, per-sentence
    columns, `<metric>_calibrated` per calibration map, or `error`."""
    columns = {name: name for name in entry.get("scores", {})}
    return OutputFields(columns, decisions=decisions, calibration=calibration or {}).record(
        None, entry
    )


def scorer_for_mode(
    scorer: Any, metrics: Sequence[str], long_inputs: str, per_sentence: bool
) -> Any:
    """`scorer` (a `MultiScorer`) restricted to `metrics`, with these modes.

    The copy shares the loaded models and compiled programs.
    """
    settings = dataclasses.replace(
        scorer.settings, long_inputs=long_inputs, per_sentence=per_sentence
    )
    if settings == scorer.settings and list(metrics) == list(scorer.names):
        return scorer
    variant = copy.copy(scorer)
    variant.settings = settings
    variant._signatures = None  # The settings are part of each signature.
    variant.options = ScoringOptions.of(
        scorer.options, long_inputs=long_inputs, per_sentence=per_sentence
    )
    positions = [scorer.names.index(name) for name in metrics]
    variant.names = [scorer.names[p] for p in positions]
    variant.engines = [scorer.engines[p] for p in positions]
    return variant
