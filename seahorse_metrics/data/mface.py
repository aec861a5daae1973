"""Reader for the mFACE human judgments (Aharoni et al., Findings of ACL 2023).

The release is one spreadsheet of XL-Sum articles and summaries in 45
languages with columns `id, doc_id, lang, split, input, summary, system`
(`human` = the reference) and, per question, the min/avg/max over raters:

* `q1_*` quality ("Is the summary comprehensible?") ~ SEAHORSE Q1
* `q2_*` attribution ("Is all the information in the summary fully
  attributable to the article?") ~ SEAHORSE Q4
* `q3_*` informativeness ("Is the summary a good summary of the article?")
  ~ SEAHORSE Q6

It may be read as CSV, TSV or XLSX.

Binarisation: each rater answers yes (1) or no (0), so `q*_avg` is the
fraction of raters saying yes. ROC-AUC needs a binary label: by default
`label = avg >= 0.5` (a majority of raters said yes; with an even number
of raters a tie counts as yes). Pearson uses the raw avg (`RatedPair.rating`).
For a sheet on another scale pass `threshold` on that scale; a threshold of
at most 1 on averages above 1 is refused rather than silently mislabelling.
"""

from __future__ import annotations

import logging
import os
from typing import Iterable, Optional

from seahorse_metrics.data.ratings import (
    TableFormatError,
    cell_text,
    is_blank,
    parse_float,
    read_table,
)
from seahorse_metrics.data.records import RatedPair

logger = logging.getLogger(__name__)

MFACE_QUESTIONS = ("quality", "attribution", "informativeness")
MFACE_COLUMNS = {"quality": "q1", "attribution": "q2", "informativeness": "q3"}
MFACE_TO_SEAHORSE = {"quality": 1, "attribution": 4, "informativeness": 6}
SEAHORSE_SHARED_LANGS = ("en", "es", "ru", "tr", "vi")
DEFAULT_THRESHOLD = 0.5

# XL-Sum's 45 languages, by the names its configs use, as ISO 639-1 codes.
# Where XL-Sum has two scripts of one language the code carries the ISO 15924
# script (zh-Hans/zh-Hant, sr-Cyrl/sr-Latn); Nigerian Pidgin has no ISO 639-1
# code and keeps its ISO 639-3 code `pcm`.
XLSUM_LANGUAGES = {
    "amharic": "am",
    "arabic": "ar",
    "azerbaijani": "az",
    "bengali": "bn",
    "burmese": "my",
    "chinese_simplified": "zh-Hans",
    "chinese_traditional": "zh-Hant",
    "english": "en",
    "french": "fr",
    "gujarati": "gu",
    "hausa": "ha",
    "hindi": "hi",
    "igbo": "ig",
    "indonesian": "id",
    "japanese": "ja",
    "kirundi": "rn",
    "korean": "ko",
    "kyrgyz": "ky",
    "marathi": "mr",
    "nepali": "ne",
    "oromo": "om",
    "pashto": "ps",
    "persian": "fa",
    "pidgin": "pcm",
    "portuguese": "pt",
    "punjabi": "pa",
    "russian": "ru",
    "scottish_gaelic": "gd",
    "serbian_cyrillic": "sr-Cyrl",
    "serbian_latin": "sr-Latn",
    "sinhala": "si",
    "somali": "so",
    "spanish": "es",
    "swahili": "sw",
    "tamil": "ta",
    "telugu": "te",
    "thai": "th",
    "tigrinya": "ti",
    "turkish": "tr",
    "ukrainian": "uk",
    "urdu": "ur",
    "uzbek": "uz",
    "vietnamese": "vi",
    "welsh": "cy",
    "yoruba": "yo",
}
_CODE_ALIASES = {
    "zh-cn": "zh-Hans",
    "zh-tw": "zh-Hant",
    "zh-hans": "zh-Hans",
    "zh-hant": "zh-Hant",
    "sr-cyrl": "sr-Cyrl",
    "sr-latn": "sr-Latn",
}
_KNOWN_CODES = {code.lower(): code for code in XLSUM_LANGUAGES.values()}


def normalise_mface_language(value: str) -> str:
    """An XL-Sum language name (`english`, `Chinese Simplified`) or code -> its code.

    Raises:
      ValueError: for a value that is neither a known name nor a known code.
    """
    text = value.strip()
    key = text.lower().replace(" ", "_").replace("-", "_")
    if key in XLSUM_LANGUAGES:
        return XLSUM_LANGUAGES[key]
    code = text.lower().replace("_", "-")
    if code in _CODE_ALIASES:
        return _CODE_ALIASES[code]
    if code in _KNOWN_CODES:
        return _KNOWN_CODES[code]
    raise ValueError(
        f"unknown mFACE language {value!r}; expected an XL-Sum language name "
        f"({', '.join(sorted(XLSUM_LANGUAGES)[:4])}, ...) or its code"
    )


def read_mface(
    path: str | os.PathLike,
    question: str,
    threshold: float = DEFAULT_THRESHOLD,
    languages: Optional[Iterable[str]] = None,
    encoding: str = "utf-8",
) -> list[RatedPair]:
    """Reads one mFACE question as rated pairs.

    Args:
      path: The mFACE sheet (.csv, .tsv or .xlsx).
      question: `quality`, `attribution` or `informativeness`.
      threshold: label = `q*_avg >= threshold` (see the module docstring for
        the scale assumed by the default 0.5).
      languages: Keep only these languages (codes or XL-Sum names), e.g.
        `SEAHORSE_SHARED_LANGS`; None keeps all.
      encoding: Text encoding of a CSV/TSV sheet (default UTF-8).

    Returns:
      RatedPairs in sheet order: id from the `id` column, premise = input,
      hypothesis = summary, rating = the raw avg, lang = ISO code, source
      `xlsum`, system, meta with the question, min/max, doc_id and split.
      Rows with an empty avg for the question are skipped and counted in the
      log.

    Raises:
      ValueError: for an unknown question or language, or a default threshold
        on a sheet whose averages exceed 1.
      TableFormatError: for missing columns, non-numeric ratings or duplicate
        ids, naming file and row.
    """
    if question not in MFACE_COLUMNS:
        raise ValueError(f"unknown mFACE question {question!r}; choose one of {MFACE_QUESTIONS}")
    path = os.fspath(path)
    avg_column = f"{MFACE_COLUMNS[question]}_avg"
    keep = (
        {normalise_mface_language(language) for language in languages}
        if languages is not None
        else None
    )
    pairs, unrated = _rated_pairs(path, encoding, question, avg_column, keep, threshold)
    _check_scale(path, pairs, threshold)
    if unrated:
        logger.warning(
            "%s: %d rows have no %s rating (%s) and are skipped",
            path,
            unrated,
            question,
            avg_column,
        )
    logger.info("%s: %d mFACE %s ratings", path, len(pairs), question)
    return pairs


def _rated_pairs(
    path: str,
    encoding: str,
    question: str,
    avg_column: str,
    keep: Optional[set[str]],
    threshold: float,
) -> tuple[list[RatedPair], int]:
    """The sheet's rated pairs in `keep`'s languages (all when None), and the
    count of rows skipped for an empty `avg_column`."""
    pairs, seen, unrated = [], set(), 0
    for row_number, row in read_table(path, encoding=encoding):
        where = f"{path}:{row_number}"
        lang = _row_language(row, where, avg_column)
        if keep is not None and lang not in keep:
            continue
        if is_blank(row[avg_column]):
            unrated += 1
            continue
        pair = _pair(row, row_number, where, question, lang, threshold)
        if pair.id in seen:
            raise TableFormatError(f"{where}: duplicate id {pair.id!r}")
        seen.add(pair.id)
        pairs.append(pair)
    return pairs, unrated


def _row_language(row: dict, where: str, avg_column: str) -> str:
    """Checks the row's columns; returns its language code."""
    for column in ("lang", "input", "summary", "system", avg_column):
        if column not in row:
            raise TableFormatError(f"{where}: missing column {column!r} (columns: {sorted(row)})")
    try:
        return normalise_mface_language(cell_text(row["lang"]))
    except ValueError as err:
        raise TableFormatError(f"{where}: {err}") from None


def _pair(
    row: dict, row_number: int, where: str, question: str, lang: str, threshold: float
) -> RatedPair:
    prefix = MFACE_COLUMNS[question]
    average = parse_float(row[f"{prefix}_avg"], f"{where}: column {prefix + '_avg'!r}")
    return RatedPair(
        id=cell_text(row["id"]) if not is_blank(row.get("id")) else f"mface-{row_number}",
        premise=cell_text(row["input"]),
        hypothesis=cell_text(row["summary"]),
        label=average >= threshold,
        rating=average,
        lang=lang,
        source="xlsum",
        system=cell_text(row["system"]).strip(),
        meta={
            "question": question,
            "min": _optional_float(row, f"{prefix}_min", where),
            "max": _optional_float(row, f"{prefix}_max", where),
            "doc_id": cell_text(row.get("doc_id")),
            "split": cell_text(row.get("split")),
        },
    )


def _optional_float(row: dict, column: str, where: str) -> Optional[float]:
    value = row.get(column)
    return None if is_blank(value) else parse_float(value, f"{where}: column {column!r}")


def _check_scale(path: str, pairs: list[RatedPair], threshold: float) -> None:
    highest = max((p.rating for p in pairs), default=0.0)
    if highest > 1.0 and threshold <= 1.0:
        raise ValueError(
            f"{path}: averages go up to {highest}, but the threshold {threshold} "
            "assumes yes/no (0/1) ratings and would call every summary good; pass "
            "a threshold on this sheet's scale"
        )
