"""Readers for the fact-checking leaderboards' layouts: LLM-AggreFact and SummaC.

LLM-AggreFact (Tang et al., 2024; the Hugging Face dataset
`lytang/LLM-AggreFact`) has a `dev` and a `test` split with the columns
`dataset, doc, claim, label` (label 1 = the document supports the claim; a
`contamination_identifier` column is ignored). Its datasets (AggreFact-CNN,
AggreFact-XSum, TofuEval-MediaS, ..., RAGTruth) are reported one by one and
as their mean balanced accuracy. `read_aggrefact` takes one split file
(CSV, TSV, JSONL or Parquet, as the hub's `data/dev-*.parquet` shards), or a
directory holding the split's files (`dev.csv`, `data/test-00000-of-00001.parquet`,
...: every file whose name starts with the split).

SummaC (Laban et al., 2022) standardises six summary-consistency sets into
`document, claim, label, cut` rows (cut `val` or `test`; label 1 =
consistent), with the set in `dataset` and the summarizer in `model_name`
when known. `read_summac` takes such a file (CSV, TSV or JSONL) exported from
SummaC's benchmark loader.

Both return one list of `RatedPair`s per dataset: premise = document,
hypothesis = claim, rating 1.0/0.0.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Iterator

from seahorse_metrics.data.ratings import (
    TABLE_EXTENSIONS,
    TableFormatError,
    cell_text,
    optional_text,
    parse_binary,
    read_table,
)
from seahorse_metrics.data.records import RatedPair

logger = logging.getLogger(__name__)

AGGREFACT_COLUMNS = ("dataset", "doc", "claim", "label")
AGGREFACT_SPLITS = ("dev", "test")
SUMMAC_COLUMNS = ("document", "claim", "label", "cut")
SUMMAC_CUTS = ("val", "test")
_EXTENSIONS = TABLE_EXTENSIONS + (".parquet",)


def _parquet_rows(path: str) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        import pyarrow.parquet  # Optional: only the hub's Parquet shards need it.
    except ImportError as err:
        raise ImportError(
            f"{path}: reading Parquet needs pyarrow: pip install "
            "'seahorse-metrics[parquet]' (or export the split as CSV/JSONL)"
        ) from err
    for number, row in enumerate(pyarrow.parquet.read_table(path).to_pylist(), start=1):
        yield number, row


def _rows(path: str, encoding: str = "utf-8") -> Iterator[tuple[int, dict[str, Any]]]:
    if path.lower().endswith(".parquet"):
        return _parquet_rows(path)
    return read_table(path, encoding=encoding)


def _check_columns(path: str, line: int, row: dict, columns: tuple[str, ...], layout: str) -> None:
    for column in columns:
        if column not in row:
            raise TableFormatError(
                f"{path}:{line}: missing column {column!r} (columns: {sorted(row)}); {layout} "
                f"files have {', '.join(columns)}"
            )


def _label(path: str, line: int, value: Any) -> bool:
    label = parse_binary(value)
    if label is None:
        raise TableFormatError(
            f"{path}:{line}: column 'label' is {value!r}; expected 1 (supported/consistent) or 0"
        )
    return label


def aggrefact_files(path: str, split: str) -> list[str]:
    """The files of one split: `path` itself, or the split's files in a directory
    (and its `data/` folder).

    Raises:
      FileNotFoundError: no such path, or no file of that split in the directory.
      ValueError: an unknown split.
    """
    if split not in AGGREFACT_SPLITS:
        raise ValueError(f"unknown LLM-AggreFact split {split!r}; choose {AGGREFACT_SPLITS}")
    if os.path.isfile(path):
        return [path]
    if not os.path.isdir(path):
        raise FileNotFoundError(f"LLM-AggreFact path {path} not found")
    files = sorted(
        os.path.join(folder, name)
        for folder in (path, os.path.join(path, "data"))
        if os.path.isdir(folder)
        for name in os.listdir(folder)
        if name.startswith(split) and name.lower().endswith(_EXTENSIONS)
    )
    if not files:
        raise FileNotFoundError(
            f"{path}: no {split} file (e.g. {split}.csv or data/{split}-00000-of-00001.parquet)"
        )
    return files


def read_aggrefact(
    path: str, split: str = "test", encoding: str = "utf-8"
) -> dict[str, list[RatedPair]]:
    """Reads an LLM-AggreFact split, by dataset.

    Args:
      path: A split file, or a directory holding the split's files.
      split: `dev` or `test` (used for a directory).
      encoding: Text encoding of CSV/TSV/JSONL files (default UTF-8).

    Returns:
      dataset name -> RatedPairs in file order (id `<file stem>-<row>`, source
      the dataset).

    Raises:
      TableFormatError: a missing column (naming the column and the file) or
        a label other than 0/1.
    """
    by_dataset: dict[str, list[RatedPair]] = {}
    for file in aggrefact_files(path, split):
        stem = os.path.splitext(os.path.basename(file))[0]
        for line, row in _rows(file, encoding):
            _check_columns(file, line, row, AGGREFACT_COLUMNS, "LLM-AggreFact")
            dataset = cell_text(row["dataset"]).strip()
            label = _label(file, line, row["label"])
            by_dataset.setdefault(dataset, []).append(
                RatedPair(
                    id=f"{stem}-{line}",
                    premise=cell_text(row["doc"]),
                    hypothesis=cell_text(row["claim"]),
                    label=label,
                    rating=1.0 if label else 0.0,
                    source=dataset,
                    meta={"line": line, "file": file},
                )
            )
    logger.info(
        "%s (%s): %d LLM-AggreFact claims in %d datasets",
        path,
        split,
        sum(map(len, by_dataset.values())),
        len(by_dataset),
    )
    return by_dataset


def read_summac(
    path: str, cut: str = "test", encoding: str = "utf-8"
) -> dict[str, list[RatedPair]]:
    """Reads the rows of one SummaC cut, by dataset.

    Args:
      path: A CSV, TSV or JSONL file with `document, claim, label, cut`
        (optionally `dataset`, `model_name`, `origin`).
      cut: `val` or `test`.
      encoding: Text encoding of the file (default UTF-8).

    Returns:
      dataset name (the `dataset` column, else the file stem) -> RatedPairs
      (id `<dataset>-<line>`, system the `model_name`).

    Raises:
      TableFormatError: a missing column or a bad label.
      ValueError: an unknown cut.
    """
    if cut not in SUMMAC_CUTS:
        raise ValueError(f"unknown SummaC cut {cut!r}; choose {SUMMAC_CUTS}")
    stem = os.path.splitext(os.path.basename(path))[0]
    by_dataset: dict[str, list[RatedPair]] = {}
    other_cut = 0
    for line, row in read_table(path, encoding=encoding):
        _check_columns(path, line, row, SUMMAC_COLUMNS, "SummaC")
        if cell_text(row["cut"]).strip() != cut:
            other_cut += 1
            continue
        dataset = optional_text(row, "dataset") or stem
        label = _label(path, line, row["label"])
        by_dataset.setdefault(dataset, []).append(
            RatedPair(
                id=f"{dataset}-{line}",
                premise=cell_text(row["document"]),
                hypothesis=cell_text(row["claim"]),
                label=label,
                rating=1.0 if label else 0.0,
                source=optional_text(row, "origin") or dataset,
                system=optional_text(row, "model_name"),
                meta={"line": line},
            )
        )
    logger.info(
        "%s: %d SummaC %s claims in %d datasets (%d rows of the other cut skipped)",
        path,
        sum(map(len, by_dataset.values())),
        cut,
        len(by_dataset),
        other_cut,
    )
    return by_dataset
