"""Trains the small multilingual SentencePiece model shipped with the sample.

`seahorse_metrics/data/sample/spiece.model` is the vocabulary of the tests and
of `make demo`. It is trained on the text of the bundled synthetic sample (the
SEAHORSE-format articles and summaries, the mFACE, TRUE and ratings samples)
plus the strings the metric's inputs and targets add: `premise:`,
`hypothesis:`, `1` and `0`.

It follows the T5/mT5 conventions for special ids: pad_id=0, eos_id=1,
unk_id=2 and no BOS; character_coverage=1.0 so every character of the sample
(Vietnamese diacritics, Cyrillic, Turkish dotted/dotless i) has a piece.
Unlike mT5 it is a BPE model: on this small, template-made corpus SentencePiece's
unigram trainer stops at ~2.5k pieces and still splits frequent words into
letters (names, Vietnamese syllables), which makes the demo's inputs ~45%
longer and token comparisons harder. SentencePiece encodes and decodes both
model types the same way, so nothing downstream depends on the choice. Training is
single-threaded on a fixed sentence order, so re-running reproduces the same model bytes.

Usage, from the repository root:
  python -m demo_data.sample               # first: the sample text
  python -m demo_data.vocab [--vocab_size 6000]
"""

from __future__ import annotations

import argparse
import csv
import glob
import io
import json
import os
import sys
from typing import Iterator, Optional, Sequence

import sentencepiece as spm

from demo_data.paths import SAMPLE_DIR
from demo_data.sample.writers import write_atomic

# Large enough that every person, company and (non-Vietnamese) place name of the
# sample is one piece; the embedding costs the tiny demo model little compute,
# and shorter inputs save attention time.
DEFAULT_VOCAB_SIZE = 6000
# The target strings of the yes/no task and the input prefixes, each seen once
# per SEAHORSE-format row as the fine-tuning inputs show them, so that each
# gets its own pieces.
TASK_STRINGS = ("premise:", "hypothesis:", "1", "0")


def _tsv_column(path: str, column: str) -> Iterator[str]:
    with open(path, encoding="utf-8", newline="") as f:
        header = f.readline().rstrip("\n").split("\t")
        index = header.index(column)
        for line in f:
            yield line.rstrip("\n").split("\t")[index]


def _csv_columns(path: str, columns: Sequence[str]) -> Iterator[str]:
    with open(path, encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            for column in columns:
                yield row[column]


def _jsonl_fields(path: str, fields: Sequence[str]) -> Iterator[str]:
    with open(path, encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            for field in fields:
                yield record[field]


def sample_sentences(sample_dir: str) -> list[str]:
    """The training text, in a fixed order (files sorted, rows as stored)."""
    paths = {
        "articles": os.path.join(sample_dir, "seahorse", "articles.jsonl"),
        "mface": os.path.join(sample_dir, "mface", "mface_sample.csv"),
        "ratings": os.path.join(sample_dir, "ratings", "squality_style.jsonl"),
    }
    for path in paths.values():
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path} is missing: run `python -m demo_data.sample` first.")
    texts: list[str] = list(_jsonl_fields(paths["articles"], ["text"]))
    for split in ("train", "validation", "test"):
        texts.extend(_tsv_column(os.path.join(sample_dir, "seahorse", f"{split}.tsv"), "summary"))
    texts.extend(_csv_columns(paths["mface"], ["input", "summary"]))
    for path in sorted(glob.glob(os.path.join(sample_dir, "true", "*.csv"))):
        texts.extend(_csv_columns(path, ["grounding", "generated_text"]))
    texts.extend(_jsonl_fields(paths["ratings"], ["premise", "hypothesis"]))
    n_rows = len(texts)
    for text in TASK_STRINGS:
        texts.extend([text] * n_rows)
    return [t for t in texts if t.strip()]


def train(sentences: Sequence[str], vocab_size: int) -> bytes:
    """Trains the BPE model and returns its serialised bytes."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences),
        model_writer=model,
        model_type="bpe",
        vocab_size=vocab_size,
        character_coverage=1.0,
        pad_id=0,
        eos_id=1,
        unk_id=2,
        bos_id=-1,
        pad_piece="<pad>",
        eos_piece="</s>",
        unk_piece="<unk>",
        input_sentence_size=0,
        shuffle_input_sentence=False,
        num_threads=1,
        max_sentence_length=16384,
        minloglevel=2,
    )
    return model.getvalue()


def check_vocab(model_bytes: bytes) -> None:
    """Raises ValueError unless `1` and `0` encode to distinct, non-bare first pieces."""
    processor = spm.SentencePieceProcessor(model_proto=model_bytes)
    if (processor.pad_id(), processor.eos_id(), processor.unk_id(), processor.bos_id()) != (
        0,
        1,
        2,
        -1,
    ):
        raise ValueError("special ids are not the T5 ones (pad 0, eos 1, unk 2, no bos)")
    firsts = []
    for target in ("1", "0"):
        pieces = processor.encode(target, out_type=str)
        if not pieces or pieces[0] == "\u2581":
            raise ValueError(
                f"{target!r} encodes as {pieces}: its first piece is a bare "
                "word boundary, so P(first piece) cannot tell 1 from 0"
            )
        firsts.append(pieces[0])
    if firsts[0] == firsts[1]:
        raise ValueError(f"'1' and '0' share the first piece {firsts[0]!r}")


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m demo_data.vocab", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--sample_dir", default=SAMPLE_DIR)
    parser.add_argument(
        "--output",
        default=None,
        help="where to write the model (default: <sample_dir>/spiece.model)",
    )
    parser.add_argument("--vocab_size", type=int, default=DEFAULT_VOCAB_SIZE)
    args = parser.parse_args(argv)
    model_bytes = train(sample_sentences(args.sample_dir), args.vocab_size)
    check_vocab(model_bytes)
    output = args.output or os.path.join(args.sample_dir, "spiece.model")
    write_atomic(output, model_bytes)
    print(f"wrote {output} ({args.vocab_size} pieces, {len(model_bytes)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
