"""`pretraining.json`: what a run did, written beside the backbone it made."""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np


def objective(args: argparse.Namespace) -> str:
    """The stages and objectives that ran, joined by `+`, in their order."""
    return "+".join(
        name
        for name, used in (
            ("matching", args.matching_steps > 0),
            ("word_noise", args.word_noise_steps > 0),
            ("grammar", args.grammar_steps > 0),
            ("alignment", args.alignment_steps > 0),
            ("span_corruption", args.steps > 0 and args.detect_rate + args.replace_rate < 1),
            ("grounded_replacement", args.replace_rate > 0),
            ("noise_detection", args.detect_rate > 0),
        )
        if used
    )


def _rounded(value: float) -> float | None:
    return None if np.isnan(value) else round(float(value), 4)


def _text_fields(args: argparse.Namespace, history: list, used_corpus: bool) -> dict:
    """The run's and the text objectives' settings and final averages."""
    final = np.mean(history[-100:], axis=0) if history else np.full(3, np.nan)
    return {
        "init": args.init,
        "data": "sample train split text (articles + summaries)"
        + (" and corpus pairs" if used_corpus else "")
        + ", no ratings",
        "steps": args.steps,
        "batch_size": args.batch_size,
        "input_length": args.input_length,
        "target_length": args.target_length,
        "learning_rate": args.learning_rate,
        "seed": args.seed,
        "final_loss": _rounded(final[0]),
        "final_token_accuracy": _rounded(final[1]),
        "final_discriminator_loss": _rounded(final[2]),
    }


def _stage_fields(args: argparse.Namespace, stages: dict[str, dict]) -> dict:
    """The word-noise, grammar and alignment stages' settings and records."""
    return {
        "word_noise_steps": args.word_noise_steps,
        "word_noise_rates": list(args.word_noise_rates),
        "word_noise_learning_rate": args.word_noise_learning_rate,
        "word_noise": stages["word_noise"],
        "grammar_steps": args.grammar_steps,
        "grammar_learning_rate": args.grammar_learning_rate,
        "grammar_rates": list(args.grammar_rates),
        "grammar_split": args.grammar_split,
        "grammar_noise": args.grammar_noise,
        "grammar": stages["grammar"],
        "alignment_steps": args.alignment_steps,
        "alignment_learning_rate": args.alignment_learning_rate,
        "alignment_noise": args.alignment_noise,
        "alignment_noise_rates": list(args.alignment_noise_rates),
        "alignment_shuffle": args.alignment_shuffle,
        "alignment_swap": args.alignment_swap,
        "alignment_corpus": args.alignment_corpus,
        "alignment_grammar": args.alignment_grammar,
        "alignment": stages["alignment"],
    }


def write_record(
    args: argparse.Namespace,
    stages: dict[str, dict],
    history: list,
    used_corpus: bool,
    start: float,
) -> None:
    """Writes `pretraining.json` into `args.output`: the settings, each
    stage's record (`stages`, by name; empty when it did not run), the text
    objectives' final averages over `history`, the seconds since `start`,
    and a continued run's `init_record`, the record of the run it started
    from."""
    record = {
        "objective": objective(args),
        "noise_density": 0.15,
        "mean_span": 3.0,
        "replace_rate": args.replace_rate,
        "detect_rate": args.detect_rate,
        "noise_strength": list(args.noise_strength),
        "rtd_weight": args.rtd_weight,
        "matching_steps": args.matching_steps,
        "matching_learning_rate": args.matching_learning_rate,
        **_text_fields(args, history, used_corpus),
        "matching": stages["matching"],
        **_stage_fields(args, stages),
        "seconds": round(time.time() - start),
    }
    init_record = os.path.join(args.init, "pretraining.json") if args.init else ""
    if os.path.exists(init_record):
        with open(init_record, encoding="utf-8") as handle:
            record["init_record"] = json.load(handle)
    with open(os.path.join(args.output, "pretraining.json"), "w", encoding="utf-8") as handle:
        json.dump(record, handle, indent=2)
