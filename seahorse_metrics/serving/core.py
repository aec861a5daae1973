"""The service's one contact with the scoring core.

The service scores rows as `score` does: a merged window of request pairs
is a window of input rows, turned into entries (scores, truncation flags,
per-sentence scores, or the `error` of a row that cannot be scored) by the
core's row scoring, and each entry into the output row's fields by the
core's `output_record`. Nothing here computes a score.

`scorer_for_mode` gives the `MultiScorer` of a request's metrics and modes:
a shallow copy sharing the loaded models and compiled programs, with its
own `names`/`runners` subset and input settings.
"""
from __future__ import annotations

import copy
import dataclasses
from typing import Any, Iterator, Mapping, Optional, Sequence

from seahorse_metrics.data.tables import TableRow
from seahorse_metrics.scoring.files import output_record, result_entry, row_example
from seahorse_metrics.scoring.pipeline import ScoringStats
from seahorse_metrics.scoring.records import ERROR_FIELD

__all__ = ["ERROR_FIELD", "ScoringStats", "TableRow", "response_fields", "score_window",
           "scorer_for_mode"]


def score_window(scorer: Any, rows: Sequence[TableRow], fields: Mapping[str, Optional[str]],
                 *, batch_size: Optional[int] = None,
                 stats: Optional[ScoringStats] = None) -> Iterator[list[tuple[TableRow, dict]]]:
    """Scores `rows` as one window of the core's row scoring.

    Args:
      scorer: A `MultiScorer`.
      rows: The window's rows (`TableRow`s keyed 0..n-1).
      fields: {"premise", "hypothesis", "lang", "question"} -> field of a record.
      batch_size: Most rows of a batch (default: the scorer's).
      stats: Accumulates truncation and batching counts.

    Yields:
      (row, entry) lists: the rows that cannot be scored first, then after
      each batch the rows it finished.
    """
    examples, bad, held = [], [], {}
    for item in rows:
        example = row_example(item, fields["premise"], fields["hypothesis"], fields.get("lang"),
                              fields.get("question"))
        if example is None:
            bad.append((item, {"row": item.row, "line": item.line, ERROR_FIELD: item.error}))
        else:
            held[item.row] = item
            examples.append(example)
    if bad:
        yield bad
    columns = {name: name for name in scorer.names}
    for group in scorer.run([examples], batch_size, stats):
        yield [(held.pop(result.key), result_entry(result, scorer.names, columns))
               for result in group]


def response_fields(entry: Mapping[str, Any], decisions: Mapping[str, float]) -> dict:
    """The output fields `score` writes for an entry (no input fields): a
    score per metric, `<metric>_decision` per threshold, per-sentence
    columns, or `error`."""
    return output_record(TableRow(entry["row"], 0, 0, {}), dict(entry), None, decisions)


def scorer_for_mode(scorer: Any, metrics: Sequence[str], long_inputs: str,
                    per_sentence: bool) -> Any:
    """`scorer` (a `MultiScorer`) restricted to `metrics`, with these modes.

    The copy shares the loaded models and compiled programs.
    """
    settings = dataclasses.replace(scorer.settings, long_inputs=long_inputs,
                                   per_sentence=per_sentence)
    if settings == scorer.settings and list(metrics) == list(scorer.names):
        return scorer
    variant = copy.copy(scorer)
    variant.settings = settings
    positions = [scorer.names.index(name) for name in metrics]
    variant.names = [scorer.names[p] for p in positions]
    variant.runners = [scorer.runners[p] for p in positions]
    return variant
