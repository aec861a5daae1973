"""Join the SEAHORSE release with its articles into self-contained JSONL splits.

`prepare(release_dir, article_source, output_dir)` reads `train.tsv`,
`validation.tsv` and `test.tsv` (never the `duplicates/` folder, whose items
overlap across splits), fetches every article from an `ArticleSource`, and
writes to `output_dir`:

* `<split>.jsonl`: one object per rated summary with an article:
  `gem_id, lang, source, system, article, summary, q1..q6` (true/false/null),
  plus `split` and `line` (the line in the release file).
* `missing_articles.jsonl`: every row whose article was not found, with its
  ratings, so nothing is lost silently.
* `prepare_report.json`: rows read, dropped rows by reason, articles joined,
  missing articles by source dataset, rows written, and Yes/No counts per
  question, per split and in total.
"""

from __future__ import annotations

import collections
import json
import logging
import os
from typing import Any, Sequence

from seahorse_metrics.data.articles import ArticleSource
from seahorse_metrics.data.records import QUESTIONS
from seahorse_metrics.data.seahorse import SPLITS, SeahorseRow, read_release_split
from seahorse_metrics.io.atomic import write_lines_atomically

logger = logging.getLogger(__name__)

REPORT_NAME = "prepare_report.json"
MISSING_NAME = "missing_articles.jsonl"


def prepared_record(row: SeahorseRow, article: str, split: str) -> dict[str, Any]:
    """The JSON object `prepare` writes for one release row."""
    record: dict[str, Any] = {
        "gem_id": row.gem_id,
        "lang": row.lang,
        "source": row.source,
        "system": row.system,
        "article": article,
        "summary": row.summary,
    }
    record.update({f"q{q}": rating for q, rating in zip(QUESTIONS, row.ratings)})
    record.update({"split": split, "line": row.line})
    return record


def _missing_line(row: SeahorseRow, split: str) -> str:
    record = prepared_record(row, "", split)
    del record["article"]
    return json.dumps(record, ensure_ascii=False) + "\n"


def _rating_counts(rows: Sequence[SeahorseRow]) -> dict[str, dict[str, int]]:
    counts = {}
    for index, question in enumerate(QUESTIONS):
        values = collections.Counter(row.ratings[index] for row in rows)
        counts[f"q{question}"] = {"yes": values[True], "no": values[False], "unrated": values[None]}
    return counts


def _split_report(
    rows: Sequence[SeahorseRow], dropped: collections.Counter, articles: dict[str, str]
) -> tuple[dict[str, Any], list[SeahorseRow], list[SeahorseRow]]:
    joined = [row for row in rows if articles.get(row.gem_id)]
    missing = [row for row in rows if not articles.get(row.gem_id)]
    report = {
        "rows_read": len(rows) + sum(dropped.values()),
        "rows_dropped": dict(sorted(dropped.items())),
        "articles_joined": len(joined),
        "missing_articles": dict(sorted(collections.Counter(r.source for r in missing).items())),
        "rows_written": len(joined),
        "ratings_written": _rating_counts(joined),
    }
    return report, joined, missing


def _totals(split_reports: dict[str, dict[str, Any]]) -> dict[str, Any]:
    dropped: collections.Counter = collections.Counter()
    missing: collections.Counter = collections.Counter()
    for report in split_reports.values():
        dropped.update(report["rows_dropped"])
        missing.update(report["missing_articles"])
    return {
        "rows_read": sum(r["rows_read"] for r in split_reports.values()),
        "rows_dropped": dict(sorted(dropped.items())),
        "articles_joined": sum(r["articles_joined"] for r in split_reports.values()),
        "missing_articles": dict(sorted(missing.items())),
        "rows_written": sum(r["rows_written"] for r in split_reports.values()),
    }


def prepare(
    release_dir: str | os.PathLike,
    article_source: ArticleSource,
    output_dir: str | os.PathLike,
    strict: bool = True,
    splits: Sequence[str] = SPLITS,
) -> dict[str, Any]:
    """Joins a SEAHORSE release directory with articles and writes JSONL splits.

    Args:
      release_dir: Directory with `train.tsv`, `validation.tsv`, `test.tsv`.
      article_source: Where the articles come from (`LocalArticleSource`,
        `TfdsArticleSource`, `HfArticleSource`).
      output_dir: Where the JSONL splits, `missing_articles.jsonl` and
        `prepare_report.json` are written (atomically).
      strict: If True a malformed release row raises (naming file and line);
        if False it is skipped and counted in the report.
      splits: The splits to prepare.

    Returns:
      The report also written to `prepare_report.json`.

    Raises:
      FileNotFoundError: if a split file is missing.
      ReleaseFormatError: on a malformed row in strict mode.
    """
    release_dir, output_dir = os.fspath(release_dir), os.fspath(output_dir)
    read = _read_release(release_dir, splits, strict)
    wanted = sorted({row.gem_id for rows, _ in read.values() for row in rows})
    logger.info("fetching %d articles from %s", len(wanted), article_source.name)
    articles = article_source.fetch(wanted)
    split_reports = _write_splits(read, articles, output_dir)
    full_report = {
        "release_dir": os.path.abspath(release_dir),
        "output_dir": os.path.abspath(output_dir),
        "article_source": article_source.name,
        "strict": strict,
        "ignored": ["duplicates/"]
        if os.path.isdir(os.path.join(release_dir, "duplicates"))
        else [],
        "splits": split_reports,
        "totals": _totals(split_reports),
        "missing_articles_file": MISSING_NAME,
    }
    write_lines_atomically(
        os.path.join(output_dir, REPORT_NAME),
        [json.dumps(full_report, indent=2, ensure_ascii=False) + "\n"],
    )
    logger.info("prepared %s: %s", output_dir, full_report["totals"])
    return full_report


def _read_release(release_dir: str, splits: Sequence[str], strict: bool) -> dict:
    """split -> (rows, dropped counts); every split file must exist."""
    paths = {split: os.path.join(release_dir, f"{split}.tsv") for split in splits}
    for path in paths.values():
        if not os.path.isfile(path):
            raise FileNotFoundError(
                f"{path}: missing release split; --release_dir must hold "
                f"{', '.join(os.path.basename(p) for p in paths.values())}"
            )
    return {split: read_release_split(path, strict=strict) for split, path in paths.items()}


def _write_splits(read: dict, articles: dict[str, str], output_dir: str) -> dict[str, Any]:
    """Writes `<split>.jsonl` and `missing_articles.jsonl`; returns the split reports."""
    split_reports: dict[str, dict[str, Any]] = {}
    missing_lines: list[str] = []
    for split, (rows, dropped) in read.items():
        report, joined, missing = _split_report(rows, dropped, articles)
        split_reports[split] = report
        write_lines_atomically(
            os.path.join(output_dir, f"{split}.jsonl"),
            (
                json.dumps(prepared_record(r, articles[r.gem_id], split), ensure_ascii=False) + "\n"
                for r in joined
            ),
        )
        missing_lines.extend(_missing_line(r, split) for r in missing)
        if missing:
            logger.warning(
                "%s: %d of %d rows have no article (by source: %s); listed in %s",
                split,
                len(missing),
                len(rows),
                report["missing_articles"],
                MISSING_NAME,
            )
    write_lines_atomically(os.path.join(output_dir, MISSING_NAME), missing_lines)
    return split_reports
