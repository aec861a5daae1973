"""Input rows -> entries through a `MultiScorer`, in windows cut by one rule.

    for item, entry in score_rows(multi_scorer, rows, InputFields()):
        print(OutputFields(columns).record(item.record, entry))  # seahorse_metrics.scoring.output

The one windowing rule of every runner: row `r` belongs to window
`r // window_size`, bad rows included (`window_rows`). So `score_file`,
a Beam worker, `score_records` and the service batch a file the same way,
and a resumed run can re-score a partly written window whole, reproducing
its batches (and so its float32 scores) bit for bit.

`score_windows` scores windows of rows and yields, after each batch, the
rows it finished (bad rows, with their error entry, as soon as their window
is read); `score_rows` restores input order.
"""

from __future__ import annotations

import collections
import itertools
from typing import Any, Callable, Hashable, Iterable, Iterator, Optional, Sequence

from seahorse_metrics.data.tables import TableRow
from seahorse_metrics.scoring.job import InputFields
from seahorse_metrics.scoring.output import error_entry, result_entry
from seahorse_metrics.scoring.records import BadRecord, record_fields
from seahorse_metrics.scoring.window_scoring import Example, ScoringStats

InputRow = TableRow
# (row, entry) pairs finished by one batch.
ScoredRows = list[tuple[InputRow, dict]]


def window_index(row: int, window_size: int) -> int:
    """The window of row `row` (0-based among the data rows)."""
    return row // window_size


def window_rows(
    rows: Iterable, window_size: int, key: Callable[[Any], int] = lambda item: item.row
) -> Iterator[list]:
    """Consecutive rows (bad ones included; or examples, by `key`) grouped by
    `window_index` of their row number."""
    for _, items in itertools.groupby(rows, key=lambda item: window_index(key(item), window_size)):
        yield list(items)


def records_as_rows(records: Iterable) -> Iterator[InputRow]:
    """Python records (mappings) as input rows numbered from 0 (line = row + 1)."""
    for index, record in enumerate(records):
        yield TableRow(index, index + 1, index + 1, record)


def row_example(item: InputRow, fields: InputFields) -> Optional[Example]:
    """The `Example` of a row (keyed by its row id), or None when the row
    cannot be scored; then `item.error` says why."""
    if item.error is not None:
        return None
    try:
        texts = record_fields(
            item.record, fields.premise, fields.hypothesis, fields.lang, fields.question
        )
    except BadRecord as error:
        item.error = str(error)
        return None
    return Example(item.row, *texts)


def score_windows(
    scorer,
    windows: Iterable[Sequence[InputRow]],
    fields: InputFields,
    columns: Optional[dict] = None,
    *,
    batch_size: Optional[int] = None,
    stats: Optional[ScoringStats] = None,
    check: Optional[Callable[[InputRow], Optional[str]]] = None,
    shortest: bool = True,
) -> Iterator[ScoredRows]:
    """Scores windows of rows with a `MultiScorer`.

    Args:
      scorer: A `MultiScorer`.
      windows: Groups of rows (see `window_rows`), each scored whole.
      fields: The input fields read.
      columns: Metric name -> output column (default: the names).
      batch_size: Most rows of a batch (default: the scorer's).
      stats: Accumulates truncation and batching counts.
      check: More checks of a readable row: returns why it cannot be scored, or None.
      shortest: Scores as float32's shortest decimal (see `result_entry`).

    Yields:
      Lists of (row, entry): a window's bad rows when it is read, then after
      each batch the rows it finished.
    """
    columns = dict(columns or {name: name for name in scorer.names})
    held: dict[Hashable, InputRow] = {}
    bad: ScoredRows = []

    def examples_of() -> Iterator[list[Example]]:
        for window in windows:
            examples = []
            for item in window:
                example = row_example(item, fields)
                if example is not None and check is not None:
                    item.error = check(item)
                    example = None if item.error else example
                if example is None:
                    bad.append((item, error_entry(item.row, item.line, item.error)))
                else:
                    held[example.key] = item
                    examples.append(example)
            yield examples

    for group in scorer.run(examples_of(), batch_size, stats):
        finished = [_finished(held.pop(r.key), r, scorer.names, columns, shortest) for r in group]
        yield _taken(bad) + finished
    if bad:
        yield _taken(bad)


def _finished(item: InputRow, result, names, columns: dict, shortest: bool) -> tuple:
    """(row, entry) of an example's result: its scores, or the error that
    kept it from being scored (noted on the row too)."""
    if result.error is None:
        return item, result_entry(result, names, columns, shortest)
    item.error = result.error
    return item, error_entry(item.row, item.line, result.error)


def _taken(items: list) -> list:
    taken = list(items)
    items.clear()
    return taken


def score_rows(
    scorer, rows: Iterable[InputRow], fields: InputFields, columns: Optional[dict] = None, **options
) -> Iterator[tuple[InputRow, dict]]:
    """(row, entry) of every row, in input order, windows cut by `window_rows`;
    `options` as `score_windows`. Holds about one window of rows at a time."""
    pending: collections.deque = collections.deque()

    def noted(items: Iterable[InputRow]) -> Iterator[InputRow]:
        for item in items:
            pending.append(item.row)
            yield item

    waiting: dict[int, tuple[InputRow, dict]] = {}
    for group in score_windows(
        scorer, window_rows(noted(rows), scorer.window_size), fields, columns, **options
    ):
        for item, entry in group:
            waiting[item.row] = (item, entry)
        while pending and pending[0] in waiting:
            yield waiting.pop(pending.popleft())
    if pending or waiting:
        raise RuntimeError(
            f"scoring ended with {len(pending)} rows unscored and "
            f"{len(waiting)} unexpected; this is a bug"
        )
