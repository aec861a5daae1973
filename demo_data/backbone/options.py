"""The command line of `python -m demo_data.backbone`: the options, and the
refusals of values that make no sense, each naming its option."""

from __future__ import annotations

import argparse
from typing import Sequence

from demo_data.backbone.noise_detection import NOISE_KINDS
from demo_data.paths import BACKBONE_DIR, SAMPLE_DIR


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The options, checked; `noise_kinds` comes back as a tuple of kinds.
    A refused value exits with status 2 and names its option."""
    parser = argparse.ArgumentParser(
        prog="python -m demo_data.backbone",
        description="Pretrains the demo's tiny backbone on the sample's text, without labels.",
    )
    for add_options in (
        _run_options,
        _text_options,
        _matching_and_word_noise_options,
        _grammar_options,
        _alignment_options,
        _alignment_word_noise_options,
    ):
        add_options(parser)
    args = parser.parse_args(argv)
    args.noise_kinds = _noise_kinds(parser, args)
    _check_shares(parser, args)
    return args


def _run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sample_dir", default=SAMPLE_DIR)
    parser.add_argument("--output", default=BACKBONE_DIR)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--input_length", type=int, default=128)
    parser.add_argument("--target_length", type=int, default=40)
    parser.add_argument("--learning_rate", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--init", default=None, help="Continue from this backbone (a Hugging Face directory)."
    )
    parser.add_argument(
        "--export_every",
        type=int,
        default=0,
        help="Also export the backbone every this many steps (0: only at the end).",
    )


def _text_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--replace_rate",
        type=float,
        default=0.0,
        help="Share of examples trained with grounded-token replacement in "
        "the hypothesis instead of span corruption.",
    )
    parser.add_argument(
        "--detect_rate",
        type=float,
        default=0.0,
        help="Share of examples trained with noise detection (see detect_noise) "
        "instead of span corruption.",
    )
    parser.add_argument(
        "--noise_strength",
        type=float,
        nargs=2,
        default=(0.0, 0.0),
        metavar=("START", "END"),
        help="Noise detection's strength, decayed linearly over the run.",
    )
    parser.add_argument(
        "--noise_kinds",
        default=",".join(NOISE_KINDS),
        help="Comma-separated noise kinds for noise detection.",
    )
    parser.add_argument(
        "--rtd_weight",
        type=float,
        default=0.0,
        help="Weight of the per-piece discriminator loss on the encoder's outputs "
        "for noise-detection examples (ELECTRA); its head is not exported.",
    )


def _matching_and_word_noise_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--matching_steps",
        type=int,
        default=0,
        help="Steps of the matching stage (see matching_example) before the "
        "text objectives: the encoder learns to find equal pieces.",
    )
    parser.add_argument("--matching_learning_rate", type=float, default=1e-3)
    parser.add_argument(
        "--word_noise_steps",
        type=int,
        default=0,
        help="Steps of the word-noise stage (see word_noise_example), after the "
        "matching stage and before the text objectives: the encoder learns "
        "to spot swapped words and wrong inflections.",
    )
    parser.add_argument(
        "--word_noise_rates",
        type=float,
        nargs=2,
        default=(0.3, 0.1),
        metavar=("REPLACE", "SWAP"),
        help="Per word: the chance of another inflection, and of trading places "
        "with the next word.",
    )
    parser.add_argument("--word_noise_learning_rate", type=float, default=1e-3)


def _grammar_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--grammar_steps",
        type=int,
        default=0,
        help="Steps of the grammar stage (see grammar_example), after the "
        "word-noise stage and before the alignment stage: on the sample's "
        "unlabelled corpus, the encoder learns which words make a word pair "
        "that grammatical text never has.",
    )
    parser.add_argument("--grammar_learning_rate", type=float, default=1e-3)
    parser.add_argument(
        "--grammar_rates",
        type=float,
        nargs=2,
        default=(0.1, 0.05),
        metavar=("REPLACE", "SWAP"),
        help="The grammar stage's noise per hypothesis word: the chance of a "
        "substitute, and of trading places with the next word.",
    )
    parser.add_argument(
        "--grammar_noise",
        type=float,
        default=0.5,
        help="Share of the grammar stage's hypotheses that get noise.",
    )
    parser.add_argument(
        "--grammar_split",
        type=float,
        default=0.3,
        help="Share of the grammar stage's pairs taken from the train split "
        "(the rest from the corpus).",
    )


def _alignment_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--alignment_steps",
        type=int,
        default=0,
        help="Steps of the alignment stage (see alignment_example), after the "
        "grammar stage and before the text objectives: the encoder "
        "learns which summary pieces its article (and its lead) contains, "
        "and which pieces repeat.",
    )
    parser.add_argument("--alignment_learning_rate", type=float, default=1e-3)
    parser.add_argument(
        "--alignment_noise",
        type=float,
        default=0.5,
        help="Share of the alignment stage's hypotheses that get word noise.",
    )
    parser.add_argument(
        "--alignment_shuffle",
        type=float,
        default=0.5,
        help="Share of the alignment stage's premises whose sentences are shuffled.",
    )
    parser.add_argument(
        "--alignment_swap",
        type=float,
        default=0.3,
        help="Share of the alignment stage's hypotheses given names and numbers "
        "of another hypothesis.",
    )
    parser.add_argument(
        "--alignment_corpus",
        type=float,
        default=0.0,
        help="Share of the alignment stage's pairs taken from the sample's "
        "unlabelled corpus (the rest from the train split).",
    )


def _alignment_word_noise_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--alignment_grammar",
        action="store_true",
        help="The alignment stage's hypothesis noise is the grammar stage's, and "
        "its noisy_word column marks the words of word pairs the corpus "
        "never has (see grammar_example), noise or not.",
    )
    parser.add_argument(
        "--alignment_noise_rates",
        type=float,
        nargs=2,
        default=(0.15, 0.05),
        metavar=("REPLACE", "SWAP"),
        help="The alignment stage's word noise, as --word_noise_rates.",
    )


def _noise_kinds(parser: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[str, ...]:
    noise_kinds = tuple(kind for kind in args.noise_kinds.split(",") if kind)
    unknown = sorted(set(noise_kinds) - set(NOISE_KINDS))
    if unknown or not noise_kinds:
        parser.error(
            f"--noise_kinds: unknown {unknown or args.noise_kinds!r}; "
            f"choose from {list(NOISE_KINDS)}"
        )
    return noise_kinds


def _check_shares(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if not all(0.0 <= value <= 1.0 for value in args.noise_strength):
        parser.error(f"--noise_strength: {list(args.noise_strength)} must lie in [0, 1]")
    if not (
        0.0 <= args.detect_rate
        and 0.0 <= args.replace_rate
        and args.detect_rate + args.replace_rate <= 1.0
    ):
        parser.error(
            f"--detect_rate {args.detect_rate} and --replace_rate {args.replace_rate} "
            "must be shares that add up to at most 1"
        )
    stages = {
        "--steps": args.steps,
        "--matching_steps": args.matching_steps,
        "--word_noise_steps": args.word_noise_steps,
        "--grammar_steps": args.grammar_steps,
        "--alignment_steps": args.alignment_steps,
    }
    if min(stages.values()) < 0 or sum(stages.values()) == 0:
        parser.error(
            ", ".join(f"{name} {value}" for name, value in stages.items())
            + ": each must be >= 0 and not all 0"
        )
    for name, (replace_rate, swap_rate) in (
        ("--word_noise_rates", args.word_noise_rates),
        ("--alignment_noise_rates", args.alignment_noise_rates),
        ("--grammar_rates", args.grammar_rates),
    ):
        if min(replace_rate, swap_rate) < 0 or replace_rate + swap_rate > 1:
            parser.error(
                f"{name} {replace_rate} {swap_rate} must be shares that add up to at most 1"
            )
    for name in (
        "alignment_noise",
        "alignment_shuffle",
        "alignment_swap",
        "alignment_corpus",
        "grammar_noise",
        "grammar_split",
    ):
        if not 0.0 <= getattr(args, name) <= 1.0:
            parser.error(f"--{name} {getattr(args, name)} must lie in [0, 1]")
