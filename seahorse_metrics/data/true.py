"""Reader for the TRUE factual-consistency benchmark (Honovich et al., 2022).

TRUE's download script (google-research/true, `download_datasets.py`)
writes one CSV per dataset with the columns `grounding`, `generated_text`
and `label` (1 = consistent), plus a leading pandas index column and, for
some sets, extra columns (`model`, `id`, ...). Its file names map to the
short names used in reports:

    frank_valid_download.csv -> frank      summeval_download.csv -> summeval
    mnbm_download.csv        -> mnbm       qags_cnndm_download.csv -> qags_c
    qags_xsum_download.csv   -> qags_x     begin_dev_download.csv -> begin
    q2_download.csv          -> q2         dialfact_valid_download.csv -> dialfact
    fever_dev_download.csv   -> fever      vitc_dev_download.csv -> vitaminc
    paws_download.csv        -> paws

A file already named by its short name (`frank.csv`) keeps it; any other
CSV keeps its stem. An optional `question` column holds the question of a
query-focused summary.
"""

from __future__ import annotations

import logging
import os

from seahorse_metrics.data.ratings import (
    TableFormatError,
    cell_text,
    optional_text,
    parse_binary,
    read_table,
)
from seahorse_metrics.data.records import RatedPair

logger = logging.getLogger(__name__)

TRUE_NAMES = (
    "frank",
    "summeval",
    "mnbm",
    "qags_c",
    "qags_x",
    "begin",
    "q2",
    "dialfact",
    "fever",
    "vitaminc",
    "paws",
)
TRUE_FILE_NAMES = {
    "frank_valid_download": "frank",
    "frank_test_download": "frank_test",
    "summeval_download": "summeval",
    "mnbm_download": "mnbm",
    "qags_cnndm_download": "qags_c",
    "qags_xsum_download": "qags_x",
    "begin_dev_download": "begin",
    "begin_test_download": "begin_test",
    "q2_download": "q2",
    "dialfact_valid_download": "dialfact",
    "dialfact_test_download": "dialfact_test",
    "fever_dev_download": "fever",
    "vitc_dev_download": "vitaminc",
    "paws_download": "paws",
}
# The TRUE sets that are summarization benchmarks (the others are dialogue,
# fact verification and paraphrase).
TRUE_SUMMARIZATION = ("frank", "summeval", "mnbm", "qags_c", "qags_x")


def true_name(path: str | os.PathLike) -> str:
    """The short name of a TRUE CSV (see the module docstring)."""
    stem = os.path.splitext(os.path.basename(os.fspath(path)))[0]
    return TRUE_FILE_NAMES.get(stem.lower(), stem)


def read_true_file(
    path: str | os.PathLike, name: str | None = None, encoding: str = "utf-8"
) -> list[RatedPair]:
    """Reads one TRUE CSV.

    Args:
      path: The CSV.
      name: Short name (default: `true_name(path)`); it is the pairs' source
        and the prefix of their ids.
      encoding: Text encoding of the CSV (default UTF-8).

    Returns:
      RatedPairs in file order: id `"{name}-{line}"` (TRUE's own ids repeat,
      e.g. one SummEval article per system), premise = grounding, hypothesis
      = generated_text, label = label == 1, rating 1.0/0.0, system from a
      `model` column when there is one, meta with the line and the file's
      own id.

    Raises:
      TableFormatError: for missing columns or a label other than 0/1.
    """
    path = os.fspath(path)
    name = name or true_name(path)
    pairs = []
    for line, row in read_table(path, encoding=encoding):
        for column in ("grounding", "generated_text", "label"):
            if column not in row:
                raise TableFormatError(
                    f"{path}:{line}: missing column {column!r} (columns: {sorted(row)}); TRUE "
                    "CSVs have grounding, generated_text and label"
                )
        label = parse_binary(row["label"])
        if label is None:
            raise TableFormatError(
                f"{path}:{line}: column 'label' is {row['label']!r}; TRUE labels are 1 "
                "(consistent) or 0"
            )
        pairs.append(
            RatedPair(
                id=f"{name}-{line}",
                premise=cell_text(row["grounding"]),
                hypothesis=cell_text(row["generated_text"]),
                label=label,
                rating=1.0 if label else 0.0,
                source=name,
                system=optional_text(row, "model"),
                meta={"line": line, "original_id": optional_text(row, "id")},
                question=optional_text(row, "question"),
            )
        )
    logger.info("%s: %d TRUE pairs (%s)", path, len(pairs), name)
    return pairs


def list_true_files(path_or_dir: str | os.PathLike) -> dict[str, str]:
    """The TRUE CSVs of a file or directory, by short name, without reading them.

    Raises:
      FileNotFoundError: if the path does not exist or the directory holds no
        CSV.
      ValueError: if two files map to the same short name.
    """
    path = os.fspath(path_or_dir)
    if os.path.isdir(path):
        files = sorted(
            os.path.join(path, f) for f in os.listdir(path) if f.lower().endswith(".csv")
        )
        if not files:
            raise FileNotFoundError(f"{path}: no TRUE CSV files in this directory")
    elif os.path.isfile(path):
        files = [path]
    else:
        raise FileNotFoundError(f"{path}: no such TRUE file or directory")
    by_name: dict[str, str] = {}
    for file in files:
        name = true_name(file)
        if name in by_name:
            raise ValueError(
                f"{file} and {by_name[name]} both map to the TRUE set {name!r}; keep one"
            )
        by_name[name] = file
    return by_name


def read_true(
    path_or_dir: str | os.PathLike, encoding: str = "utf-8"
) -> dict[str, list[RatedPair]]:
    """Reads a TRUE CSV, or every `*.csv` of a directory, by short name.

    Raises:
      FileNotFoundError: if the path does not exist or the directory holds no
        CSV.
      ValueError: if two files map to the same short name.
      TableFormatError: for a malformed file (see `read_true_file`).
    """
    return {
        name: read_true_file(file, name, encoding)
        for name, file in list_true_files(path_or_dir).items()
    }
