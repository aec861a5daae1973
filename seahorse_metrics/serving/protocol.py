"""The JSON of `POST /v1/score`: checking a request, writing the response rows.

A request:

    {"pairs": [{"article": "...", "summary": "...", "question": "...", "id": 7}],
     "metrics": ["q4"], "long_inputs": "chunk", "per_sentence": true}

`pairs` is required (a non-empty list of objects); `question`, `id` and
`lang` of a pair are optional, as are `metrics` (default: every metric the
server has), `long_inputs` (`truncate`|`chunk`) and `per_sentence` (a bool)
(default: the server's settings). A request whose shape is wrong (not JSON,
a field of the wrong type, an unknown field, an unknown metric) is refused
whole with a `RequestError` naming the field, e.g. `pairs[3].summary`, as
is an `id` the response could not send back as it came (NaN, Infinity,
1e400, an integer beyond 64 bits, a string with a lone surrogate). A pair
whose texts are missing or blank is what `score` calls a bad row: the
scoring core gives it an `error` (the message `score` writes) and the other
pairs are scored; so is a text with a lone surrogate, which no tokenizer
reads. When any pair of a request has a question, the request is
scored as `score --question_field question` scores a file: every pair needs
one (send generic summaries in another request).

Each pair's response row holds the fields `score` writes for it (a score
per metric, `<metric>_decision` with a threshold, `<metric>_sentences` and
`sentences` per sentence, or `error`), from the core's entry and output
record (`serving.core`), so the numbers are the float32 values `score`
writes; plus its `id` when it had one, and `truncated`/`chunked`.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any, Mapping, Optional, Sequence

from seahorse_metrics.scoring.records import unencodable
from seahorse_metrics.scoring.units import LONG_INPUT_MODES
from seahorse_metrics.serving.core import ERROR_FIELD, response_fields

PREMISE_FIELD = "article"
HYPOTHESIS_FIELD = "summary"
QUESTION_FIELD = "question"
PAIR_FIELDS = (PREMISE_FIELD, HYPOTHESIS_FIELD, QUESTION_FIELD, "id", "lang")
REQUEST_FIELDS = ("pairs", "metrics", "long_inputs", "per_sentence")


class RequestError(ValueError):
    """A request the server refuses whole (HTTP 400).

    Attributes:
      field: The JSON path of the offending field, e.g. `pairs[3].summary`.
      pair: The index of the pair it belongs to, or None.
    """

    def __init__(self, field: str, message: str, pair: Optional[int] = None):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.pair = pair

    def to_json(self) -> dict:
        """The body of the 400 response."""
        body = {"error": str(self), "field": self.field}
        if self.pair is not None:
            body["pair"] = self.pair
        return body


@dataclasses.dataclass(frozen=True)
class Mode:
    """What a request asks the scorer for; requests of one mode share windows.

    Attributes:
      metrics: The metrics scored, in the server's order.
      long_inputs: `truncate` or `chunk`.
      per_sentence: Whether summaries are scored sentence by sentence.
      question: Whether pairs are read with their question (then every
        pair needs one, as rows do with `score --question_field`).
    """

    metrics: tuple[str, ...]
    long_inputs: str
    per_sentence: bool
    question: bool = False

    def fields(self) -> dict[str, Optional[str]]:
        """The record fields the scoring core reads, as `score`'s options name them."""
        return {
            "premise": PREMISE_FIELD,
            "hypothesis": HYPOTHESIS_FIELD,
            "lang": "lang",
            "question": QUESTION_FIELD if self.question else None,
        }


@dataclasses.dataclass
class ScoreRequest:
    """A checked request.

    Attributes:
      mode: The metrics and modes asked for.
      pairs: The pairs as sent (objects of the right shape).
    """

    mode: Mode
    pairs: list[Mapping[str, Any]]


# An integer `id` is sent back as it came; beyond 64 bits it must be a string
# (Python could not even write back one of 5,000 digits).
MAX_ID_BITS = 64
# Integers of more digits than this are not converted while the body is decoded.
_MAX_INT_DIGITS = 40


class LongInteger:
    """An integer of the body too long to be converted (its digits are counted)."""

    def __init__(self, text: str):
        self.digits = len(text.lstrip("-"))

    def __repr__(self) -> str:
        return f"<an integer of {self.digits} digits>"


def _integer(text: str) -> Any:
    return int(text) if len(text) <= _MAX_INT_DIGITS else LongInteger(text)


def decode_body(raw: bytes) -> Any:
    """The JSON of a request body (integers too long to convert kept as
    `LongInteger`, refused where they appear).

    Raises:
      RequestError: for a body that is not JSON, or nested too deeply.
    """
    try:
        return json.loads(raw, parse_int=_integer)
    except RecursionError:
        raise RequestError("body", "JSON nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as error:  # JSONDecodeError is a ValueError
        raise RequestError("body", f"not JSON ({error})") from None


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float, LongInteger)):
        return "number"
    return {str: "string", list: "array", dict: "object"}.get(type(value), type(value).__name__)


def _check_pair(index: int, pair: Any) -> None:
    """Refuses a pair of the wrong shape; blank or missing texts are left to
    the scoring core (a per-pair error, as in `score`)."""
    where = f"pairs[{index}]"
    if not isinstance(pair, Mapping):
        raise RequestError(where, f"expected an object, got {_json_kind(pair)}", index)
    unknown = [key for key in pair if key not in PAIR_FIELDS]
    if unknown:
        raise RequestError(
            f"{where}.{unknown[0]}", f"unknown field (a pair has {', '.join(PAIR_FIELDS)})", index
        )
    for field in (PREMISE_FIELD, HYPOTHESIS_FIELD, QUESTION_FIELD, "lang"):
        value = pair.get(field)
        if value is not None and not isinstance(value, str):
            raise RequestError(
                f"{where}.{field}", f"expected a string, got {_json_kind(value)}", index
            )
    _check_id(index, pair.get("id"))


def _check_id(index: int, value: Any) -> None:
    """Refuses an `id` the response could not send back as it came."""
    where = f"pairs[{index}].id"
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, str):
        reason = unencodable(value)
        if reason is not None:
            raise RequestError(where, f"the string {reason}", index)
        return
    if isinstance(value, LongInteger) or (
        isinstance(value, int) and abs(value).bit_length() > MAX_ID_BITS
    ):
        digits = value.digits if isinstance(value, LongInteger) else len(str(abs(value)))
        raise RequestError(
            where,
            f"an integer of {digits} digits; a number id must fit in "
            f"{MAX_ID_BITS} bits: send it as a string",
            index,
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise RequestError(
            where,
            f"{value} (NaN, Infinity and numbers as large as 1e400 are "
            "not finite) cannot be sent back in JSON: send the id as a string",
            index,
        )
    if not isinstance(value, (int, float)):
        raise RequestError(where, f"expected a string or a number, got {_json_kind(value)}", index)


def _mode(body: Mapping[str, Any], metrics: Sequence[str], default: Mode) -> Mode:
    chosen = body.get("metrics")
    if chosen is None:
        chosen = list(default.metrics)
    elif not isinstance(chosen, list) or not chosen or not all(isinstance(m, str) for m in chosen):
        raise RequestError("metrics", "expected a non-empty array of metric names")
    unknown = [name for name in chosen if name not in metrics]
    if unknown:
        raise RequestError(
            "metrics", f"unknown metric {unknown[0]!r} (this server scores {', '.join(metrics)})"
        )
    long_inputs = body.get("long_inputs", default.long_inputs)
    if long_inputs not in LONG_INPUT_MODES:
        raise RequestError(
            "long_inputs", f"expected one of {', '.join(LONG_INPUT_MODES)}, got {long_inputs!r}"
        )
    per_sentence = body.get("per_sentence", default.per_sentence)
    if not isinstance(per_sentence, bool):
        raise RequestError(
            "per_sentence", f"expected true or false, got {_json_kind(per_sentence)}"
        )
    return Mode(tuple(m for m in metrics if m in chosen), long_inputs, per_sentence)


def parse_request(
    body: Any, metrics: Sequence[str], default: Mode, max_pairs: Optional[int] = None
) -> ScoreRequest:
    """Checks a decoded request body.

    Args:
      body: The decoded JSON.
      metrics: The server's metric names.
      default: The server's mode (what a request that names none gets).
      max_pairs: Most pairs per request (None: no limit).

    Returns:
      The request.

    Raises:
      RequestError: for a body of the wrong shape (see the module docstring).
      TooManyPairs: for more than `max_pairs` pairs.
    """
    if not isinstance(body, Mapping):
        raise RequestError("body", f"expected a JSON object, got {_json_kind(body)}")
    unknown = [key for key in body if key not in REQUEST_FIELDS]
    if unknown:
        raise RequestError(unknown[0], f"unknown field (a request has {', '.join(REQUEST_FIELDS)})")
    pairs = body.get("pairs")
    if not isinstance(pairs, list) or not pairs:
        raise RequestError(
            "pairs",
            'expected a non-empty array of {"article", "summary"} '
            f"objects, got {_json_kind(pairs) if pairs != [] else 'an empty array'}",
        )
    if max_pairs is not None and len(pairs) > max_pairs:
        raise TooManyPairs(len(pairs), max_pairs)
    for index, pair in enumerate(pairs):
        _check_pair(index, pair)
    mode = _mode(body, metrics, default)
    with_question = any(pair.get(QUESTION_FIELD) is not None for pair in pairs)
    return ScoreRequest(dataclasses.replace(mode, question=with_question), list(pairs))


class TooManyPairs(ValueError):
    """More pairs than the server takes in one request (HTTP 413)."""

    def __init__(self, count: int, limit: int):
        super().__init__(
            f"pairs: {count} pairs, more than the {limit} this server takes per "
            "request; send them in several requests"
        )
        self.count = count
        self.limit = limit


def response_row(
    pair: Mapping[str, Any],
    entry: Mapping[str, Any],
    decisions: Mapping[str, float],
    calibration: Optional[Mapping[str, Any]] = None,
) -> dict:
    """The response row of one pair: its `id` (when sent), the fields `score`
    writes for its entry, and (when scored) whether its input was truncated
    or chunked.

    Args:
      pair: The pair as sent.
      entry: The scoring core's entry for it (scores, or an `error`).
      decisions: Metric -> threshold of its `_decision` field.
      calibration: Metric -> calibration map of its `_calibrated` field.
    """
    row = {"id": pair["id"]} if pair.get("id") is not None else {}
    scored = entry.get("scores", {})
    row.update(
        response_fields(
            entry,
            {name: threshold for name, threshold in decisions.items() if name in scored},
            {name: m for name, m in (calibration or {}).items() if name in scored},
        )
    )
    if ERROR_FIELD not in entry:
        row["truncated"] = bool(entry["truncated"])
        row["chunked"] = bool(entry["chunked"])
    return row
