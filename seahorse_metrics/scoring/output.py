"""Output rows: their columns and their values, the same for every runner.

Every runner (in-process `score_file`, the Beam pipeline's shards and merge,
`MultiScorer.score_records`, the service) writes rows through `OutputFields`,
so a row looks the same whichever wrote it:

* an *entry* is what scoring found for one input row (`result_entry`: its
  scores, truncation flags, per-sentence scores; `error_entry`: why it
  cannot be scored);
* `OutputFields.record` turns an input row and its entry into the output
  row: the input's fields (those named like an output column kept as
  `input_<name>`, see `renamed_input_fields`), then the score columns, their
  `<column>_decision` (`yes` at or above the threshold), per-sentence
  columns, `summary_cut`, `<column>_calibrated` (the metric's calibration
  map applied to its score, `calibration.maps.calibrated_fields`), or `error`;
* `OutputFields.header` orders the columns of CSV/TSV outputs; `OutputWriter`
  writes JSONL, a JSON array, CSV or TSV (`seahorse_metrics.io.atomic`
  replaces a file whole or not at all).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Collection, Iterable, Mapping, Optional, Sequence

import numpy as np

from seahorse_metrics.calibration.maps import CALIBRATED_SUFFIX, CalibrationMap, calibrated_fields
from seahorse_metrics.data import tables
from seahorse_metrics.data.delimited import delimited_line

ERROR_FIELD = "error"
# With long_summaries="cut": whether the row's summary was cut to leave the article its share.
SUMMARY_CUT_COLUMN = "summary_cut"
SENTENCES_COLUMN = "sentences"
DECISION_SUFFIX = "_decision"
SENTENCE_SCORES_SUFFIX = "_sentences"


def float32_text(value: float) -> float:
    """The float32 score as its shortest decimal (what the model computes;
    more digits would be noise), e.g. 0.00056663575."""
    return float(str(np.float32(value)))


def result_entry(
    result, names: Sequence[str], columns: Mapping[str, str], shortest: bool = True
) -> dict:
    """The entry of a scored example (an `ExampleResult`; its row is `result.key`).

    Args:
      result: The example's `ExampleResult`.
      names: The metrics, in the order of `result.scores`.
      columns: Metric name -> output column.
      shortest: Scores as float32's shortest decimal (files); else every
        digit of the float (`score_records`, as it always returned them).
    """
    number = float32_text if shortest else float
    entry = {
        "row": result.key,
        "scores": {columns[n]: number(s) for n, s in zip(names, result.scores)},
        "truncated": bool(result.truncated),
        "chunked": bool(result.chunked),
    }
    if result.summary_cut is not None:
        entry[SUMMARY_CUT_COLUMN] = bool(result.summary_cut)
    if result.sentence_scores is not None:
        entry["sentence_scores"] = {
            columns[n]: [number(v) for v in values]
            for n, values in zip(names, result.sentence_scores)
        }
        entry[SENTENCES_COLUMN] = list(result.sentences)
    return entry


def error_entry(row: int, line: Optional[int], error: str) -> dict:
    """The entry of a row that cannot be scored."""
    return {"row": row, "line": line, ERROR_FIELD: error}


def renamed_input_fields(fields: Iterable[str], output_fields: Collection[str]) -> dict[str, str]:
    """Input field -> new name, for the input fields an output field would overwrite.

    Output fields (scores, `error`, ...) are always written fresh: an input
    that already has one (e.g. a file scored before) keeps its value under
    `input_<field>` (`input_<field>_2`, ... if that is taken too), so an old
    score never sits beside a new error, nor an old error beside a new score.
    """
    fields = list(fields)
    taken = set(fields) | set(output_fields)
    renamed = {}
    for field in fields:
        if field not in output_fields:
            continue
        new, number = f"input_{field}", 1
        while new in taken:
            number += 1
            new = f"input_{field}_{number}"
        renamed[field] = new
        taken.add(new)
    return renamed


def with_renamed_fields(record: Mapping[str, Any], renamed: Mapping[str, str]) -> dict:
    """A copy of `record` with the fields of `renamed_input_fields` renamed."""
    return {renamed.get(key, key): value for key, value in record.items()}


@dataclasses.dataclass(frozen=True)
class OutputFields:
    """The fields scoring adds to each row, and how a row gets them.

    Attributes:
      columns: Metric name -> score column.
      per_sentence: Whether rows carry per-sentence scores and sentences.
      decisions: Score column -> threshold of its `<column>_decision` field.
      calibration: Score column -> the map of its `<column>_calibrated` field.
      summary_cut: Whether rows carry a `summary_cut` flag (`long_summaries="cut"`).
    """

    columns: Mapping[str, str]
    per_sentence: bool = False
    decisions: Mapping[str, float] = dataclasses.field(default_factory=dict)
    calibration: Mapping[str, CalibrationMap] = dataclasses.field(default_factory=dict)
    summary_cut: bool = False

    def added(self) -> list[str]:
        """The fields scoring adds, in order: scores, their decisions,
        per-sentence ones, `summary_cut`, calibrated scores, `error`."""
        scores = list(self.columns.values())
        added = scores + [c + DECISION_SUFFIX for c in scores if c in self.decisions]
        if self.per_sentence:
            added += [c + SENTENCE_SCORES_SUFFIX for c in scores] + [SENTENCES_COLUMN]
        if self.summary_cut:
            added.append(SUMMARY_CUT_COLUMN)
        added += [c + CALIBRATED_SUFFIX for c in scores if c in self.calibration]
        return added + [ERROR_FIELD]

    def header(
        self, input_columns: Sequence[str], renamed: Optional[Mapping[str, str]] = None
    ) -> list[str]:
        """The output's columns: the input's (renamed where an output column
        has their name; see `renamed_input_fields`), then the added ones."""
        renamed = renamed or {}
        added = self.added()
        return [renamed.get(c, c) for c in input_columns if renamed.get(c, c) not in added] + added

    def renamed(self, fields: Iterable[str]) -> dict[str, str]:
        """`renamed_input_fields` of an input with these fields."""
        return renamed_input_fields(fields, self.added())

    def record(
        self,
        record: Optional[Mapping[str, Any]],
        entry: Mapping[str, Any],
        renamed: Optional[Mapping[str, str]] = None,
    ) -> dict:
        """The output row of an input record (None for an unreadable row) and its
        entry: the input's fields (renamed as `renamed` says) and fresh score
        fields (decisions, sentences, calibrated scores) or the error field."""
        output = with_renamed_fields(record, renamed or {}) if record is not None else {}
        if ERROR_FIELD in entry:
            output[ERROR_FIELD] = entry[ERROR_FIELD]
            return output
        output.update(entry["scores"])
        for column, threshold in self.decisions.items():
            output[column + DECISION_SUFFIX] = (
                "yes" if entry["scores"][column] >= threshold else "no"
            )
        for column, values in entry.get("sentence_scores", {}).items():
            output[column + SENTENCE_SCORES_SUFFIX] = values
        if SENTENCES_COLUMN in entry:
            output[SENTENCES_COLUMN] = entry[SENTENCES_COLUMN]
        if SUMMARY_CUT_COLUMN in entry:
            output[SUMMARY_CUT_COLUMN] = entry[SUMMARY_CUT_COLUMN]
        output.update(calibrated_fields(entry["scores"], self.calibration))
        return output


class OutputWriter:
    """Writes output rows to a text handle as JSONL, a JSON array, CSV or TSV.

    Args:
      handle: A text handle (opened with `newline=""` for CSV/TSV).
      kind: "jsonl", "json", "csv" or "tsv".
      columns: The CSV/TSV header (`output_columns`); JSON keeps each row's keys.
    """

    def __init__(self, handle, kind: str, columns: Sequence[str]):
        self.kind = kind
        self.handle = handle
        self.columns = list(columns)
        self._first = True
        if kind in tables.DELIMITERS:
            handle.write(delimited_line(self.columns, tables.DELIMITERS[kind]))
        elif kind == "json":
            handle.write("[")

    def write(self, record: Mapping[str, Any]) -> None:
        """Writes one row.

        A value UTF-8 cannot hold (a lone surrogate, which JSON input may
        carry) is written escaped: `\\ud800` in JSON, where it reads back as
        it was, and as that escape's text in a CSV/TSV cell.
        """
        if self.kind in ("jsonl", "json"):
            text = json_line(record)
            if self.kind == "json":
                text = ("\n" if self._first else ",\n") + text
            self.handle.write(text if self.kind == "json" else text + "\n")
            self._first = False
            return
        cells = [_cell(record.get(column)) for column in self.columns]
        line = delimited_line(cells, tables.DELIMITERS[self.kind])
        if not line.isascii():
            line = line.encode("utf-8", "backslashreplace").decode("utf-8")
        self.handle.write(line)

    def close(self) -> None:
        """Ends the output (the closing bracket of a JSON array)."""
        if self.kind == "json":
            self.handle.write("\n]\n")


def json_line(record: Any) -> str:
    """`record` as one line of JSON, non-ASCII text as it is, unless it holds
    what UTF-8 cannot (a lone surrogate): then escaped, as `\\ud800`."""
    text = json.dumps(record, ensure_ascii=False)
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(record)
    return text


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)
