"""Six questions, one encoder pass: a multi-question metric against single metrics (issue 49).

    python bench/multi_question.py --shapes mt5_small,mt5_large   # record in bench/results/

For each model shape (random weights: only the time is measured), side by side
on the same batch of `--rows` x `--length` tokens:

* one question, one metric: the scorer's first-step program (`JaxEngine`);
* six questions, one multi-question metric: every question's decoder prefix
  against one encoder pass (`JaxEngine(questions=...)`);
* six single metrics: six calls of the one-question program (six models of
  the same size cost the same as one model six times).

It prints the ratio of six questions with one metric to one question (goal:
at most 1.3x) and of six single metrics (about 6x), and writes a JSON record.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (
    add_results_argument,
    best_time,
    machine_line,
    make_record,  # noqa: E402
    write_record,
)

from seahorse_metrics.engines.jax_engine import JaxEngine  # noqa: E402
from seahorse_metrics.model.config import get_config  # noqa: E402
from seahorse_metrics.model.model import EncoderDecoderModel  # noqa: E402
from seahorse_metrics.model.questions import QuestionPrefixes  # noqa: E402

LABEL_IDS = (333, 259)  # Any two ids: the weights are random.


def question_prefixes(count: int, length: int, vocab_size: int, seed: int) -> QuestionPrefixes:
    """`count` prefixes of `length` random ids (mT5 cuts "attribution:" into about 3 pieces)."""
    rng = np.random.default_rng(seed)
    prefixes = [tuple(int(t) for t in rng.integers(3, vocab_size, length)) for _ in range(count)]
    return QuestionPrefixes(tuple(f"q{i + 1}" for i in range(count)), tuple(prefixes))


def measure_shape(shape: str, args) -> dict:
    """Times the three ways of scoring on one shape; returns its record."""
    model = EncoderDecoderModel(get_config(shape))
    params = model.init_params(jax.random.PRNGKey(args.seed))
    questions = question_prefixes(
        args.questions, args.prefix_length, model.config.vocab_size, args.seed
    )
    rng = np.random.default_rng(args.seed)
    tokens = rng.integers(3, model.config.vocab_size, (args.rows, args.length)).astype(np.int32)
    single = JaxEngine(model, params, LABEL_IDS)
    multi = JaxEngine(model, single.params, LABEL_IDS, questions=questions)
    placed = single.put(tokens)
    timed = {}
    for name, run in (
        ("one_question", lambda: single.read(single(placed))),
        ("multi_question", lambda: multi.read(multi(placed))),
        ("single_metrics", lambda: [single.read(single(placed)) for _ in range(args.questions)]),
    ):
        start = time.perf_counter()
        run()  # Compiles.
        compile_s = time.perf_counter() - start
        timed[name] = {"seconds": best_time(run, args.rounds), "first_call_s": compile_s}
    one = timed["one_question"]["seconds"]
    return {
        "shape": shape,
        "config": {"d_model": model.config.d_model, "layers": model.config.num_encoder_layers},
        "times": timed,
        "ratio_multi_question": timed["multi_question"]["seconds"] / one,
        "ratio_single_metrics": timed["single_metrics"]["seconds"] / one,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="mt5_small,mt5_large")
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--length", type=int, default=512)
    parser.add_argument("--questions", type=int, default=6)
    parser.add_argument("--prefix_length", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    add_results_argument(parser)
    args = parser.parse_args(argv)
    print(machine_line(), flush=True)
    print(
        f"{'shape':12} {'1 question':>11} {'6 q, 1 metric':>14} {'6 metrics':>10} "
        f"{'ratio':>6} {'6 metrics':>9}"
    )
    results = []
    for shape in args.shapes.split(","):
        result = measure_shape(shape, args)
        results.append(result)
        times = result["times"]
        print(
            f"{shape:12} {times['one_question']['seconds']:10.3f}s "
            f"{times['multi_question']['seconds']:13.3f}s "
            f"{times['single_metrics']['seconds']:9.3f}s "
            f"{result['ratio_multi_question']:5.2f}x {result['ratio_single_metrics']:8.2f}x",
            flush=True,
        )
    variants, ratios = {}, {}
    for result in results:
        shape, times = result["shape"], result["times"]
        for name, timed in times.items():
            variants[f"{shape}: {name.replace('_', ' ')}"] = {
                "seconds": timed["seconds"],
                "first_call_s": timed["first_call_s"],
            }
        ratios[f"{shape}: six questions, one metric / one question (goal <= 1.3)"] = result[
            "ratio_multi_question"
        ]
        ratios[f"{shape}: six single metrics / one question"] = result["ratio_single_metrics"]
    record = make_record(
        "multi_question",
        f"Six questions with one multi-question metric against one question "
        f"and six single metrics: {args.rows} x {args.length} tokens, random weights",
        unit="s",
        primary="seconds",
        variants=variants,
        ratios=ratios,
        args=vars(args),
        details={"results": results, "devices": [str(d) for d in jax.devices()]},
    )
    write_record(record, args.results_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
