#!/usr/bin/env python3
"""Pretrains the demo's tiny backbone on the sample's text, without labels.

The released SEAHORSE metrics are mT5 checkpoints fine-tuned on the ratings;
mT5 itself learnt the languages by span corruption on unlabelled web text.
The demo follows the same recipe at toy scale: this script trains a tiny
mT5-shaped model with T5's span-corruption objective on the text of the
bundled sample's *train* split only (articles and summaries, written as the
metric's inputs `premise: <article> hypothesis: <summary>`); no rating is
read. The result is written as a Hugging Face `MT5ForConditionalGeneration`
directory (`config.json`, `model.safetensors`, `spiece.model`) in
`seahorse_metrics/data/backbone/`, and `gin/runs/demo.gin` fine-tunes
from it, exactly as a real run fine-tunes from `google/mt5-large`.

Two label-free objectives, both sequence-to-sequence on the same inputs:
* span corruption as in T5: about 15% of the tokens, in spans of mean
  length 3, are replaced by sentinels (the highest ids of the embedding, as
  mT5's `extra_ids`), and the target spells out the dropped spans after
  their sentinels;
* grounded-token replacement (`--replace_rate`): some hypothesis tokens that
  the premise contains are replaced by such tokens of another pair, and the
  target is the original hypothesis (BART's token-replacement noise, aimed
  at the tokens a summary takes from its article, as FactCC's swaps are).
The run is deterministic for a given seed on one machine.

The shipped backbone was made in two runs (about 40 + 12 minutes on 2 CPU
cores; `pretraining.json` in the output records the second):
  python scripts/pretrain_backbone.py --steps 1500 --output /tmp/backbone_span
  python scripts/pretrain_backbone.py --init /tmp/backbone_span --steps 600 \
      --replace_rate 0.5 --target_length 64 --learning_rate 2e-3

Smoke run:
  python scripts/pretrain_backbone.py --steps 20 --output /tmp/backbone
"""
from __future__ import annotations

import argparse
import csv
import json
import logging
import os
import sys
import time
from typing import Sequence

import numpy as np

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

SAMPLE_DIR = os.path.join(REPO_ROOT, "seahorse_metrics", "data", "sample")
DEFAULT_OUTPUT = os.path.join(os.path.dirname(SAMPLE_DIR), "backbone")
# Sentinels and padding room above the vocabulary's pieces, as mT5 keeps 100
# extra ids after its 250k pieces; the embedding is a multiple of 128 rows.
EXTRA_IDS = 100

logger = logging.getLogger("pretrain_backbone")


def backbone_config(vocab_pieces: int):
    """The backbone's architecture: mT5-shaped, 3 encoder layers, 1 decoder
    layer (the metric reads one decoder step), d_model 64."""
    from seahorse_metrics.model.config import T5Config

    vocab_size = -(-(vocab_pieces + EXTRA_IDS) // 128) * 128
    return T5Config(vocab_size=vocab_size, d_model=64, d_kv=16, num_heads=4, d_ff=192,
                    num_encoder_layers=3, num_decoder_layers=1, dropout_rate=0.0)


def read_train_text(sample_dir: str) -> list[tuple[str, str]]:
    """(article, summary) pairs of the train split, ratings ignored."""
    articles = {}
    with open(os.path.join(sample_dir, "seahorse", "articles.jsonl"), encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            articles[record["gem_id"]] = record["text"]
    pairs = []
    with open(os.path.join(sample_dir, "seahorse", "train.tsv"), encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE):
            pairs.append((articles[row["gem_id"]], row["summary"]))
    return pairs


def span_corrupt(ids: Sequence[int], rng: np.random.Generator, vocab_size: int,
                 noise_density: float = 0.15, mean_span: float = 3.0) -> tuple[list[int], list[int]]:
    """T5 span corruption of one token sequence (without EOS): returns
    (inputs, targets), both ending in EOS (id 1)."""
    length = len(ids)
    noise = max(1, int(round(length * noise_density)))
    num_spans = max(1, int(round(noise / mean_span)))
    # Random span lengths that sum to `noise`, and random gaps between them.
    cuts = np.sort(rng.choice(np.arange(1, noise), num_spans - 1, replace=False)) if num_spans > 1 else []
    span_lengths = np.diff(np.concatenate([[0], cuts, [noise]])).astype(int)
    keep = length - noise
    gaps = np.sort(rng.choice(np.arange(0, keep + 1), num_spans, replace=True))
    inputs, targets, position, kept = [], [], 0, 0
    for k, (gap, span) in enumerate(zip(gaps, span_lengths)):
        take = int(gap) - kept
        inputs += list(ids[position:position + take])
        position += take
        kept += take
        sentinel = vocab_size - 1 - k
        inputs.append(sentinel)
        targets += [sentinel] + list(ids[position:position + span])
        position += int(span)
    inputs += list(ids[position:])
    return inputs + [1], targets + [1]


def grounded_tokens(premise: Sequence[int], hypothesis: Sequence[int], prefix: int) -> list[int]:
    """Positions of hypothesis tokens (after its `prefix` pieces) that also
    occur in the premise: mostly the names, places and numbers it restates."""
    seen = set(premise)
    return [i for i in range(prefix, len(hypothesis)) if hypothesis[i] in seen]


def swap_grounded(example: tuple[Sequence[int], Sequence[int]],
                  donor: tuple[Sequence[int], Sequence[int]], prefix: int,
                  rng: np.random.Generator, rate: float = 0.15) -> tuple[list[int], list[int]]:
    """Grounded-token replacement: about `rate` of the hypothesis tokens that
    the premise supports are replaced by supported tokens of another (donor)
    pair, the premise does not contain; the target is the original
    hypothesis, so the model learns to check the hypothesis against the
    premise and restore it from there. A token-level, label-free noise in
    the spirit of BART's token replacement and FactCC's swaps.

    Returns:
      (inputs, targets), both ending in EOS.
    """
    premise, hypothesis = example
    positions = grounded_tokens(premise, hypothesis, prefix)
    seen = set(premise)
    replacements = sorted({donor[1][i] for i in grounded_tokens(*donor, prefix)} - seen)
    noisy = list(hypothesis)
    if positions and replacements:
        count = max(1, int(round((len(hypothesis) - prefix) * rate)))
        for position in rng.choice(positions, min(count, len(positions)), replace=False):
            noisy[position] = int(replacements[rng.integers(len(replacements))])
    return list(premise) + noisy + [1], list(hypothesis[prefix:]) + [1]


def pad(rows: Sequence[Sequence[int]], length: int) -> np.ndarray:
    out = np.zeros((len(rows), length), np.int32)
    for i, row in enumerate(rows):
        row = row[:length]
        out[i, :len(row)] = row
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sample_dir", default=SAMPLE_DIR)
    parser.add_argument("--output", default=DEFAULT_OUTPUT)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--input_length", type=int, default=128)
    parser.add_argument("--target_length", type=int, default=40)
    parser.add_argument("--learning_rate", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--replace_rate", type=float, default=0.0,
                        help="Share of examples trained with grounded-token replacement in "
                             "the hypothesis instead of span corruption.")
    parser.add_argument("--init", default=None,
                        help="Continue from this backbone (a Hugging Face directory).")
    parser.add_argument("--export_every", type=int, default=0,
                        help="Also export the backbone every this many steps (0: only at the end).")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")

    import jax
    import optax
    import sentencepiece as spm
    from tqdm import tqdm

    from seahorse_metrics.checkpoints import export_hf
    from seahorse_metrics.model.model import EncoderDecoderModel

    vocab_path = os.path.join(args.sample_dir, "spiece.model")
    tokenizer = spm.SentencePieceProcessor(model_file=vocab_path)
    config = backbone_config(tokenizer.get_piece_size())
    pairs = read_train_text(args.sample_dir)
    # Room for the sentinels and EOS within the input length.
    budget = args.input_length - 12
    texts = [tokenizer.encode(f"premise: {article} hypothesis: {summary}")[-budget:]
             for article, summary in pairs]
    # The same texts in two parts, for token-replacement denoising of the hypothesis.
    prefix = len(tokenizer.encode("hypothesis:"))
    split_texts = [(tokenizer.encode(f"premise: {article}"), tokenizer.encode(f"hypothesis: {summary}"))
                   for article, summary in pairs]
    split_texts = [(premise[:budget - len(hypothesis)], hypothesis) for premise, hypothesis in split_texts]
    logger.info("%d train-split texts, %d-%d tokens; model %s", len(texts),
                min(map(len, texts)), max(map(len, texts)), config)

    model = EncoderDecoderModel(config)
    if args.init:
        from seahorse_metrics.checkpoints import load_checkpoint

        init_config, params = load_checkpoint(args.init)
        if init_config != config:
            raise ValueError(f"{args.init} is not a backbone of this shape: {init_config}")
    else:
        params = model.init_params(jax.random.PRNGKey(args.seed))
    warmup = min(100, args.steps // 10)
    schedule = optax.warmup_cosine_decay_schedule(0.0, args.learning_rate, warmup, args.steps,
                                                  args.learning_rate * 0.1)
    optimizer = optax.adamw(schedule, weight_decay=1e-4)
    opt_state = optimizer.init(params)

    @jax.jit
    def train_step(params, opt_state, batch):
        (loss, aux), grads = jax.value_and_grad(model.loss, has_aux=True)(params, batch)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss, aux["accuracy"]

    rng = np.random.default_rng(args.seed)
    start, history = time.time(), []
    with tqdm(range(args.steps), desc="pretrain", mininterval=10) as bar:
        for step in bar:
            chosen = rng.integers(0, len(texts), args.batch_size)
            examples = [swap_grounded(split_texts[i], split_texts[rng.integers(len(texts))], prefix, rng)
                        if rng.random() < args.replace_rate
                        else span_corrupt(texts[i], rng, config.vocab_size) for i in chosen]
            targets = pad([t for _, t in examples], args.target_length)
            batch = {
                "encoder_input_tokens": pad([i for i, _ in examples], args.input_length),
                "decoder_target_tokens": targets,
                "decoder_input_tokens": np.concatenate(
                    [np.zeros((len(targets), 1), np.int32), targets[:, :-1]], axis=1),
            }
            params, opt_state, loss, accuracy = train_step(params, opt_state, batch)
            history.append((float(loss), float(accuracy)))
            if (step + 1) % 100 == 0:
                recent = np.mean(history[-100:], axis=0)
                bar.set_postfix(loss=f"{recent[0]:.3f}", acc=f"{recent[1]:.3f}")
                logger.info("step %d loss %.3f token accuracy %.3f (%.0f s)", step + 1,
                            recent[0], recent[1], time.time() - start)
            if args.export_every and (step + 1) % args.export_every == 0 and step + 1 < args.steps:
                export_hf(args.output, config, jax.device_get(params), vocab_path=vocab_path)
    export_hf(args.output, config, jax.device_get(params), vocab_path=vocab_path)
    final = np.mean(history[-100:], axis=0)
    with open(os.path.join(args.output, "pretraining.json"), "w", encoding="utf-8") as handle:
        objective = "span_corruption" + ("+grounded_replacement" if args.replace_rate else "")
        json.dump({"objective": objective, "noise_density": 0.15, "mean_span": 3.0,
                   "replace_rate": args.replace_rate, "init": args.init,
                   "data": "sample train split text (articles + summaries), no ratings",
                   "steps": args.steps, "batch_size": args.batch_size,
                   "input_length": args.input_length, "target_length": args.target_length,
                   "learning_rate": args.learning_rate, "seed": args.seed,
                   "final_loss": round(float(final[0]), 4),
                   "final_token_accuracy": round(float(final[1]), 4),
                   "seconds": round(time.time() - start)}, handle, indent=2)
    logger.info("wrote %s", args.output)


if __name__ == "__main__":
    main()
