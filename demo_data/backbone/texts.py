"""The text the backbone learns from: the sample's train split and its
unlabelled corpus, read, cut into pieces, and padded into batches."""

from __future__ import annotations

import csv
import dataclasses
import gzip
import json
import os
from typing import Sequence

import numpy as np

# Room for the sentinels and EOS within the input length.
RESERVED_PIECES = 12


def read_train_text(sample_dir: str) -> list[tuple[str, str]]:
    """(article, summary) pairs of the train split, ratings ignored."""
    articles = {}
    with open(os.path.join(sample_dir, "seahorse", "articles.jsonl"), encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            articles[record["gem_id"]] = record["text"]
    pairs = []
    with open(
        os.path.join(sample_dir, "seahorse", "train.tsv"), encoding="utf-8", newline=""
    ) as handle:
        for row in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE):
            pairs.append((articles[row["gem_id"]], row["summary"]))
    return pairs


def read_corpus(sample_dir: str) -> list[tuple[str, str]]:
    """(article, summary) pairs of the sample's unlabelled corpus
    (`corpus/train.jsonl.gz`, the summarisation datasets' train split)."""
    path = os.path.join(sample_dir, "corpus", "train.jsonl.gz")
    pairs, number = [], 0
    try:
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                try:
                    record = json.loads(line)
                    pairs.append((record["text"], record["summary"]))
                except (json.JSONDecodeError, KeyError, TypeError) as error:
                    raise ValueError(f"{path}:{number}: not a corpus record ({error!r})") from error
    except (OSError, EOFError, UnicodeDecodeError) as error:
        raise ValueError(
            f"{path}: unreadable after line {number} ({error!r}); regenerate it with "
            "python -m demo_data.sample"
        ) from error
    return pairs


@dataclasses.dataclass(frozen=True)
class Texts:
    """Article-summary pairs as pieces, each fitting the input length less
    `RESERVED_PIECES`."""

    # `premise: <article> hypothesis: <summary>` whole, its last pieces kept.
    whole: list[list[int]]
    # (premise, hypothesis) pieces, each with its prefix; the premise is cut.
    pairs: list[tuple[list[int], list[int]]]


def encode(tokenizer, article_summary_pairs: Sequence[tuple[str, str]], input_length: int) -> Texts:
    """The pairs' pieces, whole and in two parts (`Texts`)."""
    budget = input_length - RESERVED_PIECES
    whole = [
        tokenizer.encode(f"premise: {article} hypothesis: {summary}")[-budget:]
        for article, summary in article_summary_pairs
    ]
    parts = [
        (tokenizer.encode(f"premise: {article}"), tokenizer.encode(f"hypothesis: {summary}"))
        for article, summary in article_summary_pairs
    ]
    pairs = [(premise[: budget - len(hypothesis)], hypothesis) for premise, hypothesis in parts]
    return Texts(whole, pairs)


def pad(rows: Sequence[Sequence[int]], length: int, fill: int = 0) -> np.ndarray:
    """Rows cut or padded with `fill` to `length`, as one int32 array."""
    out = np.full((len(rows), length), fill, np.int32)
    for i, row in enumerate(rows):
        row = row[:length]
        out[i, : len(row)] = row
    return out


def column_batch(
    examples: Sequence[tuple[Sequence[int], np.ndarray]], length: int
) -> tuple[np.ndarray, np.ndarray]:
    """Examples with labels in columns ([pieces, columns]) as one batch:
    tokens padded to `length`, and labels [batch, length, columns] with -1
    where there is no piece."""
    labels = np.full((len(examples), length, examples[0][1].shape[1]), -1, np.float32)
    for row, (_, columns) in enumerate(examples):
        labels[row, : len(columns)] = columns[:length]
    return pad([inputs for inputs, _ in examples], length), labels
