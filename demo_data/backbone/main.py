"""`python -m demo_data.backbone`: reads the sample's text, runs the encoder
stages that have steps (matching, word noise, grammar, alignment, in this
order), then the text objectives, and exports the backbone with its record."""

from __future__ import annotations

import argparse
import functools
import logging
import os
import time
from typing import Sequence

import jax
import sentencepiece as spm

from demo_data.backbone import alignment, grammar, matching, word_noise
from demo_data.backbone.config import backbone_config
from demo_data.backbone.options import parse_args
from demo_data.backbone.piece_stage import train_piece_stage
from demo_data.backbone.record import write_record
from demo_data.backbone.text_training import train_text
from demo_data.backbone.texts import Texts, encode, read_corpus, read_train_text
from demo_data.backbone.vocabulary import Vocabulary, vocabulary
from seahorse_metrics.checkpoints import export_hf, load_checkpoint
from seahorse_metrics.model.model import EncoderDecoderModel

logger = logging.getLogger("demo_data.backbone")


def main(argv: Sequence[str] | None = None) -> None:
    """Pretrains the backbone as the options (`options.parse_args`) say and
    writes it, with its `pretraining.json`, to `--output`."""
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    vocab_path = os.path.join(args.sample_dir, "spiece.model")
    tokenizer = spm.SentencePieceProcessor(model_file=vocab_path)
    config = backbone_config(tokenizer.get_piece_size())
    vocab = vocabulary(tokenizer, config.vocab_size)
    split_texts = encode(tokenizer, read_train_text(args.sample_dir), args.input_length)
    logger.info(
        "%d train-split texts, %d-%d tokens; model %s",
        len(split_texts.whole),
        min(map(len, split_texts.whole)),
        max(map(len, split_texts.whole)),
        config,
    )
    corpus_texts, bigrams = _corpus(args, tokenizer, vocab)
    model = EncoderDecoderModel(config)
    params = _initial_params(model, args)
    params, stages = _encoder_stages(model, params, args, vocab, split_texts, corpus_texts, bigrams)
    export = functools.partial(export_hf, args.output, config, vocab_path=vocab_path)
    start = time.time()
    params, history = train_text(model, params, args, split_texts, vocab, export)
    export(jax.device_get(params))
    write_record(args, stages, history, bool(corpus_texts.pairs), start)
    logger.info("wrote %s", args.output)


def _initial_params(model: EncoderDecoderModel, args: argparse.Namespace):
    """The `--init` backbone's parameters, or fresh ones from the seed."""
    if not args.init:
        return model.init_params(jax.random.PRNGKey(args.seed))
    init_config, params = load_checkpoint(args.init)
    if init_config != model.config:
        raise ValueError(f"{args.init} is not a backbone of this shape: {init_config}")
    return params


def _corpus(
    args: argparse.Namespace, tokenizer, vocab: Vocabulary
) -> tuple[Texts, tuple[grammar.WordPairs, dict] | None]:
    """The corpus' pairs and word pairs, when a stage reads them (else none)."""
    if not (args.grammar_steps or args.alignment_corpus or args.alignment_grammar):
        return Texts([], []), None
    corpus = read_corpus(args.sample_dir)
    corpus_texts = encode(tokenizer, corpus, args.input_length)
    return corpus_texts, grammar.corpus_word_pairs(tokenizer, corpus, corpus_texts, vocab)


def _encoder_stages(
    model: EncoderDecoderModel,
    params,
    args: argparse.Namespace,
    vocab: Vocabulary,
    split_texts: Texts,
    corpus_texts: Texts,
    bigrams: tuple[grammar.WordPairs, dict] | None,
) -> tuple[dict, dict]:
    """Each encoder stage with steps, in order (`piece_stage`).

    Returns:
      (params, stages): the backbone after them, and each stage's record by
      name (empty for a stage without steps).
    """
    batches = {
        "matching": lambda: matching.batches(len(vocab.pieces)),
        "word_noise": lambda: word_noise.batches(args, split_texts.whole, vocab),
        "grammar": lambda: grammar.batches(args, corpus_texts, split_texts, vocab, bigrams),
        "alignment": lambda: alignment.batches(
            args, split_texts, corpus_texts, vocab, bigrams if args.alignment_grammar else None
        ),
    }
    stages: dict[str, dict] = {}
    for name, batches_of in batches.items():
        stages[name] = {}
        steps = getattr(args, f"{name}_steps")
        if steps:
            params, stages[name] = train_piece_stage(
                model,
                params,
                name,
                steps,
                getattr(args, f"{name}_learning_rate"),
                batches_of(),
                args.batch_size,
                args.seed,
            )
    return params, stages
