"""Checking input records (dicts) before they are scored.

A record is scorable when its premise and hypothesis fields hold non-empty
text (and, when a question field is named, so does that). Anything else is a
bad row: it is reported and returned with an `error` field, never dropped
silently (`seahorse_metrics.scoring.output` writes it).
"""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple, Optional, Sequence


class BadRecord(ValueError):
    """A record that cannot be scored; the message says which field and why."""


def unencodable(text: str) -> Optional[str]:
    """Why `text` cannot be written as UTF-8 (nor tokenised), or None.

    JSON may carry a lone surrogate (`"\\ud800"`), which no UTF-8 text, and
    so no tokenizer, can hold.
    """
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return (
            f"holds a lone surrogate U+{ord(text[error.start]):04X} at character "
            f"{error.start}, which is no Unicode text"
        )
    return None


def _text(record: Mapping[str, Any], field: str) -> str:
    if field not in record:
        raise BadRecord(f"missing field {field!r}")
    value = record[field]
    if not isinstance(value, str):
        kind = "null" if value is None else type(value).__name__
        raise BadRecord(f"field {field!r} is not text (got {kind})")
    if not value.strip():
        raise BadRecord(f"field {field!r} is empty")
    reason = unencodable(value)
    if reason is not None:
        raise BadRecord(f"field {field!r} {reason}")
    return value


class RecordFields(NamedTuple):
    """The fields of a record that scoring reads."""

    premise: str
    hypothesis: str
    lang: Optional[str]
    question: Optional[str]


def record_fields(
    record: Any,
    premise_field: str,
    hypothesis_field: str,
    lang_field: Optional[str] = None,
    question_field: Optional[str] = None,
) -> RecordFields:
    """(premise, hypothesis, lang, question) of a record.

    Args:
      record: A mapping (one JSONL object or CSV row).
      premise_field, hypothesis_field: Names of the text fields.
      lang_field: Optional field with a language code (absent or non-text
        values are ignored).
      question_field: Field with the question of a query-focused summary;
        None when the records have none. When named, every record must
        hold non-empty text there.

    Raises:
      BadRecord: when the record is not a mapping, or a text field is
        missing, not a string, blank, or holds what UTF-8 cannot (a lone
        surrogate).
    """
    if not isinstance(record, Mapping):
        raise BadRecord(f"expected an object with fields, got {type(record).__name__}")
    premise = _text(record, premise_field)
    hypothesis = _text(record, hypothesis_field)
    question = _text(record, question_field) if question_field else None
    lang = record.get(lang_field) if lang_field else None
    if not isinstance(lang, str) or not lang or unencodable(lang) is not None:
        lang = None  # A language code only labels the counts.
    return RecordFields(premise, hypothesis, lang, question)


def record_texts(
    record: Any, premise_field: str, hypothesis_field: str, lang_field: Optional[str] = None
) -> tuple[str, str, Optional[str]]:
    """(premise, hypothesis, lang) of a record (`record_fields` without a question).

    Raises:
      BadRecord: when the record is not a mapping, or a text field is
        missing, not a string, or blank.
    """
    return tuple(record_fields(record, premise_field, hypothesis_field, lang_field)[:3])


def check_pairs(
    premises: Sequence[Any], hypotheses: Sequence[Any], questions: Optional[Sequence[Any]] = None
) -> list[Optional[str]]:
    """Checks the pairs given to `score`; returns the questions as a list (all None
    when not given).

    Raises:
      ValueError: for lists of different lengths, texts that are not strings,
        or texts holding a lone surrogate (no tokenizer can read them).
    """
    if len(premises) != len(hypotheses):
        raise ValueError(
            f"got {len(premises)} premises but {len(hypotheses)} hypotheses; they must pair up"
        )
    for index, (premise, hypothesis) in enumerate(zip(premises, hypotheses)):
        if not isinstance(premise, str) or not isinstance(hypothesis, str):
            raise ValueError(
                f"pair {index}: premise and hypothesis must be strings, got "
                f"{type(premise).__name__} and {type(hypothesis).__name__}"
            )
        for what, text in (("premise", premise), ("hypothesis", hypothesis)):
            reason = unencodable(text)
            if reason is not None:
                raise ValueError(f"pair {index}: the {what} {reason}")
    if questions is None:
        return [None] * len(premises)
    questions = list(questions)
    if len(questions) != len(premises):
        raise ValueError(
            f"got {len(questions)} questions for {len(premises)} pairs; give one "
            "per pair (None for a summary without a question)"
        )
    for index, question in enumerate(questions):
        if question is not None and not isinstance(question, str):
            raise ValueError(
                f"pair {index}: the question must be a string or None, got "
                f"{type(question).__name__}"
            )
        if question is not None and unencodable(question) is not None:
            raise ValueError(f"pair {index}: the question {unencodable(question)}")
    return questions
