"""Reader for the SEAHORSE release (`train.tsv`, `validation.tsv`, `test.tsv`).

The release files are tab-separated with a header row::

    gem_id  worker_lang  summary  model  question1 ... question6

Fields are not quoted: a row is split on tabs only. Ratings are `Yes`, `No`,
`Unsure` or empty; `question2`-`question6` are empty when `question1` is `No`.
`Yes` becomes True, `No` False, and `Unsure` or empty None (not a judgment).

Quirks handled here:
  * `worker_lang` `en-US` / `es-ES` are normalised to ISO 639-1 (`en`, `es`).
  * The source dataset comes from the gem_id prefix (`xsum-...`,
    `mlsum_de-...`, `xlsum_english-...`, `wiki_lingua_spanish_es-...`).
  * Early downloads of the release carry unicode-escaped text (`\\u00e9`);
    such escapes are decoded.
  * Malformed rows (wrong column count, unknown rating value, bad UTF-8, a
    truncated last line, ...) raise `ReleaseFormatError` naming file and line
    in strict mode, or are counted by reason and skipped in lenient mode.

This module also reads the self-contained JSONL that `seahorse-metrics
prepare` writes (`iter_prepared`, `prepared_pairs`).
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import os
import re
from typing import Iterator, Optional

from seahorse_metrics.data.records import QUESTIONS, RatedPair
from seahorse_metrics.data.tables import text_lines
from seahorse_metrics.io.json_files import json_object
from seahorse_metrics.option_names import option

logger = logging.getLogger(__name__)

SPLITS = ("train", "validation", "test")
SOURCE_DATASETS = ("xsum", "xlsum", "mlsum", "wiki_lingua")
SEAHORSE_LANGS = ("de", "en", "es", "ru", "tr", "vi")
RELEASE_HEADER = ("gem_id", "worker_lang", "summary", "model") + tuple(
    f"question{q}" for q in QUESTIONS
)
# Fields of one line of a prepared JSONL split.
PREPARED_FIELDS = ("gem_id", "lang", "source", "system", "article", "summary") + tuple(
    f"q{q}" for q in QUESTIONS
)

_RATING_VALUES = {"yes": True, "no": False, "unsure": None, "": None}
_UNICODE_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")


def _lenient_hint() -> str:
    return (
        f"Fix the file, or read it in lenient mode ({option('strict=False', '--lenient')}) "
        "to skip and count malformed rows."
    )


class ReleaseFormatError(ValueError):
    """A SEAHORSE release file (or prepared JSONL) does not match its format."""


@dataclasses.dataclass(frozen=True)
class SeahorseRow:
    """One rated summary of the SEAHORSE release.

    Attributes:
      gem_id: GEM id of the article the summary was written for.
      lang: ISO 639-1 language code (`en-US` -> `en`, `es-ES` -> `es`).
      summary: The summary text.
      system: The system that wrote the summary (`model` column; `reference`
        for the human-written reference).
      source: The GEM dataset of the article: xsum, xlsum, mlsum or
        wiki_lingua.
      ratings: Answers to question1..question6: True (Yes), False (No) or
        None (Unsure, or empty).
      line: 1-based line number in the release file (the header is line 1).
    """

    gem_id: str
    lang: str
    summary: str
    system: str
    source: str
    ratings: tuple[Optional[bool], ...]
    line: int


class _MalformedRow(Exception):
    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def gem_config(gem_id: str) -> str:
    """The GEM config a gem_id belongs to: the part before the first `-`.

    Args:
      gem_id: e.g. `xlsum_english-validation-6416`.

    Returns:
      e.g. `xlsum_english`.
    """
    return gem_id.split("-", 1)[0]


def gem_split(gem_id: str) -> Optional[str]:
    """The GEM split named inside a gem_id (`validation`, `val`, `test`, ...).

    Returns None when the gem_id has no split part.
    """
    parts = gem_id.split("-")
    return parts[1] if len(parts) >= 3 else None


def source_of_gem_id(gem_id: str) -> Optional[str]:
    """The SEAHORSE source dataset of a gem_id, or None if the prefix is unknown."""
    config = gem_config(gem_id)
    if config == "xsum":
        return "xsum"
    for dataset in ("xlsum", "mlsum", "wiki_lingua"):
        if config.startswith(dataset + "_"):
            return dataset
    return None


def normalise_language(worker_lang: str) -> str:
    """ISO 639-1 code for a `worker_lang` value (`en-US` -> `en`, `es-ES` -> `es`)."""
    return re.split(r"[-_]", worker_lang.strip(), maxsplit=1)[0].lower()


def decode_unicode_escapes(text: str) -> str:
    """Decode literal `\\uXXXX` escapes (and escaped surrogate pairs) in `text`.

    Raises:
      UnicodeDecodeError: when the escapes form an unpaired surrogate.
    """
    if "\\u" not in text:
        return text
    decoded = _UNICODE_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text)
    # Characters outside the BMP arrive as two escaped surrogates: join them.
    return decoded.encode("utf-16", "surrogatepass").decode("utf-16")


def _parse_rating(value: str, question: int) -> Optional[bool]:
    try:
        return _RATING_VALUES[value.strip().lower()]
    except KeyError:
        raise _MalformedRow(
            "unknown_rating",
            f"question{question} has the value {value!r}; expected Yes, No, "
            "Unsure or an empty cell",
        ) from None


def _parse_fields(fields: list[str]) -> tuple[SeahorseRow, bool]:
    """Turns the 10 cells of a data line into a row; True if escapes were decoded."""
    try:
        decoded = [decode_unicode_escapes(f) for f in fields]
    except UnicodeDecodeError:
        raise _MalformedRow(
            "bad_unicode_escape", "the row holds an invalid \\u escape sequence"
        ) from None
    was_escaped = decoded != fields
    gem_id, worker_lang, summary, system = (f.strip() for f in decoded[:4])
    if not gem_id:
        raise _MalformedRow("empty_gem_id", "the gem_id cell is empty")
    source = source_of_gem_id(gem_id)
    if source is None:
        raise _MalformedRow(
            "unknown_source",
            f"gem_id {gem_id!r} has no known GEM prefix "
            "(xsum-, xlsum_<lang>-, mlsum_<lang>-, wiki_lingua_<lang>-)",
        )
    if not worker_lang:
        raise _MalformedRow("empty_language", "the worker_lang cell is empty")
    if not summary:
        raise _MalformedRow("empty_summary", "the summary cell is empty")
    ratings = tuple(_parse_rating(v, q) for q, v in zip(QUESTIONS, decoded[4:]))
    row = SeahorseRow(
        gem_id=gem_id,
        lang=normalise_language(worker_lang),
        summary=summary,
        system=system,
        source=source,
        ratings=ratings,
        line=0,
    )
    return row, was_escaped


def _check_header(path: str, raw_header: bytes) -> None:
    try:
        header = raw_header.decode("utf-8-sig").rstrip("\r")
    except UnicodeDecodeError:
        raise ReleaseFormatError(f"{path}:1: the header is not valid UTF-8") from None
    columns = tuple(c.strip() for c in header.split("\t"))
    if columns != RELEASE_HEADER:
        raise ReleaseFormatError(
            f"{path}:1: unexpected header {columns!r}; a SEAHORSE release file "
            f"starts with the tab-separated header {RELEASE_HEADER!r}"
        )


def _parse_line(raw: bytes, is_unterminated_last: bool) -> tuple[SeahorseRow, bool]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        if is_unterminated_last:
            raise _MalformedRow(
                "truncated_last_line",
                "the last line has no newline and ends inside a UTF-8 character; "
                "the file looks truncated (download it again)",
            ) from None
        raise _MalformedRow("bad_utf8", f"the line is not valid UTF-8 (byte {err.start})") from None
    fields = text.split("\t")
    if len(fields) != len(RELEASE_HEADER):
        if is_unterminated_last:
            raise _MalformedRow(
                "truncated_last_line",
                f"the last line has {len(fields)} of {len(RELEASE_HEADER)} columns "
                "and no newline; the file looks truncated (download it again)",
            )
        raise _MalformedRow(
            "wrong_column_count",
            f"{len(fields)} tab-separated columns, expected {len(RELEASE_HEADER)}",
        )
    try:
        return _parse_fields(fields)
    except _MalformedRow as err:
        if is_unterminated_last:
            raise _MalformedRow(
                "truncated_last_line",
                f"{err.detail}; the line has no newline, the file looks truncated",
            ) from None
        raise


def read_release_split(
    path: str | os.PathLike, strict: bool = True
) -> tuple[list[SeahorseRow], collections.Counter]:
    """Reads one SEAHORSE release file.

    Args:
      path: `train.tsv`, `validation.tsv` or `test.tsv` of the release.
      strict: If True (the default, for training) a malformed row raises. If
        False it is skipped and counted under its reason.

    Returns:
      The rows in file order, and a Counter of dropped rows by reason
      (`wrong_column_count`, `unknown_rating`, `bad_utf8`,
      `truncated_last_line`, `unknown_source`, `empty_gem_id`,
      `empty_language`, `empty_summary`, `bad_unicode_escape`); empty in strict
      mode.

    Raises:
      FileNotFoundError: if `path` does not exist.
      ReleaseFormatError: on a bad header, or on a malformed row in strict
        mode; the message names the file and line.
    """
    path = os.fspath(path)
    lines, terminated = _release_lines(path)
    rows: list[SeahorseRow] = []
    dropped: collections.Counter = collections.Counter()
    escaped_rows = 0
    for index in range(1, len(lines)):
        raw = lines[index].rstrip(b"\r")
        if not raw.strip():
            continue
        is_unterminated_last = index == len(lines) - 1 and not terminated
        try:
            row, was_escaped = _parse_line(raw, is_unterminated_last)
        except _MalformedRow as err:
            if strict:
                raise ReleaseFormatError(
                    f"{path}:{index + 1}: {err.detail} [{err.reason}]. {_lenient_hint()}"
                ) from None
            dropped[err.reason] += 1
            logger.debug("%s:%d: skipped (%s): %s", path, index + 1, err.reason, err.detail)
            continue
        escaped_rows += was_escaped
        rows.append(dataclasses.replace(row, line=index + 1))
    _log_split(path, rows, dropped, escaped_rows)
    return rows, dropped


def _release_lines(path: str) -> tuple[list[bytes], bool]:
    """The file's lines (header first, without `\\n`) and whether the last
    one ended with a newline; the header is checked."""
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"{path}: SEAHORSE release file not found (expected train.tsv, "
            "validation.tsv and test.tsv from seahorse_data.zip)"
        )
    with open(path, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    terminated = data.endswith(b"\n")
    if terminated:
        lines.pop()
    if not lines or not lines[0].strip():
        raise ReleaseFormatError(f"{path}:1: the file is empty; expected a header row")
    _check_header(path, lines[0])
    return lines, terminated


def _log_split(
    path: str, rows: list[SeahorseRow], dropped: collections.Counter, escaped_rows: int
) -> None:
    if escaped_rows:
        logger.info(
            "%s: decoded unicode escapes (\\uXXXX) in %d rows (early release download)",
            path,
            escaped_rows,
        )
    if dropped:
        logger.warning(
            "%s: kept %d rows, skipped %d malformed rows: %s",
            path,
            len(rows),
            sum(dropped.values()),
            dict(sorted(dropped.items())),
        )
    else:
        logger.info("%s: read %d rows", path, len(rows))


def iter_prepared(path: str | os.PathLike) -> Iterator[dict]:
    """Yields the records of a prepared JSONL split (see `seahorse-metrics prepare`).

    Each record has at least `gem_id, lang, source, system, article, summary,
    q1..q6` (ratings as true/false/null); `prepare` also writes `split` and
    `line` (the line in the release file).

    Raises:
      FileNotFoundError: if `path` does not exist.
      ReleaseFormatError: on a line that is not a JSON object with those
        fields; the message names file and line.
      TableFormatError: on a line that is not valid UTF-8.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"{path}: prepared split not found; run `seahorse-metrics prepare` first"
        )
    # Lines decoded one by one: a BOM is accepted, bad UTF-8 names its line.
    for line_number, line in text_lines(path):
        if not line.strip():
            continue
        record, error = json_object(line)
        if error is not None:
            raise ReleaseFormatError(f"{path}:{line_number}: {error}")
        missing = [k for k in PREPARED_FIELDS if k not in record]
        if missing:
            raise ReleaseFormatError(
                f"{path}:{line_number}: missing fields {missing}; re-run `seahorse-metrics prepare`"
            )
        yield record


def prepared_pairs(path: str | os.PathLike, question: int) -> list[RatedPair]:
    """The Yes/No-rated pairs of one question in a prepared JSONL split.

    Rows rated `Unsure` or left empty for `question` are left out (they are
    neither a positive nor a negative example).

    Args:
      path: A prepared split, e.g. `<output_dir>/validation.jsonl`.
      question: 1..6 (see `QUESTION_NAMES`).

    Returns:
      RatedPairs in file order: id `"{gem_id}|{system}|{line}"` (`line` is the
      release line when present, else the 1-based JSONL record number),
      premise = article, hypothesis = summary, label True for Yes, rating 1.0
      or 0.0, meta `{'question', 'line', 'split'}`, and the record's optional
      `question` text (of a query-focused summary) as `RatedPair.question`.

    Raises:
      ValueError: for a question outside 1..6, a rating that is not
        true/false/null, or duplicate ids.
    """
    if question not in QUESTIONS:
        raise ValueError(f"question must be one of {QUESTIONS}, got {question!r}")
    key = f"q{question}"
    pairs: list[RatedPair] = []
    seen: set[str] = set()
    for number, record in enumerate(iter_prepared(path), start=1):
        rating = record[key]
        if rating is None:
            continue
        if not isinstance(rating, bool):
            raise ReleaseFormatError(
                f"{os.fspath(path)}: record {number} ({record['gem_id']}): {key} is "
                f"{rating!r}; expected true, false or null"
            )
        line = record.get("line", number)
        pair_id = f"{record['gem_id']}|{record['system']}|{line}"
        if pair_id in seen:
            raise ReleaseFormatError(f"{os.fspath(path)}: duplicate example id {pair_id!r}")
        seen.add(pair_id)
        pairs.append(
            RatedPair(
                id=pair_id,
                premise=record["article"],
                hypothesis=record["summary"],
                label=rating,
                rating=1.0 if rating else 0.0,
                lang=record["lang"],
                source=record["source"],
                system=record["system"],
                meta={"question": question, "line": line, "split": record.get("split")},
                question=record.get("question") or None,
            )
        )
    return pairs
