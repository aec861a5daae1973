"""How far bfloat16 scores are from float32 ones, on trained metrics.

    make demo                      # trains the six tiny metrics into demo_output/
    python bench/bfloat16.py       # scores the demo's test split both ways

Each metric scores the split twice, with `Scorer.load(..., dtype="float32")`
and `dtype="bfloat16"` (weights and activations in bfloat16; norms, softmax
and logits in float32), and the script prints per metric the Spearman rank
correlation between the two score lists, the largest and the median
|log P("1") difference, and the ROC-AUC of both against the human labels.
It ends with `min_spearman: N.NNNNN` (the issue's bar: >= 0.999).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import add_results_argument, machine_line, make_record, write_record  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--demo_dir",
        default="demo_output",
        help="make demo's output (metrics/q1..q6/best, prepared/test.jsonl).",
    )
    parser.add_argument("--split", default="test", help="Prepared split to score (default test).")
    parser.add_argument("--questions", default="1,2,3,4,5,6")
    parser.add_argument(
        "--max_input_length",
        type=int,
        default=96,
        help="Input tokens, as the demo trains (default 96).",
    )
    add_results_argument(parser)
    return parser.parse_args(argv)


def compare(checkpoint: str, rows: list, question: int, max_input_length: int) -> dict:
    from scipy import stats as scipy_stats

    from seahorse_metrics import Scorer, stats

    pairs = ([r["article"] for r in rows], [r["summary"] for r in rows])
    options = dict(max_input_length=max_input_length, batch_size=64)
    scores = {
        dtype: Scorer.load(checkpoint, dtype=dtype, **options).score(*pairs, show_progress=False)
        for dtype in ("float32", "bfloat16")
    }
    labelled = [i for i, r in enumerate(rows) if r.get(f"q{question}") is not None]
    labels = [bool(rows[i][f"q{question}"]) for i in labelled]
    log_gap = np.abs(np.log(scores["bfloat16"]) - np.log(scores["float32"]))
    return {
        "pairs": len(rows),
        "spearman": float(scipy_stats.spearmanr(scores["float32"], scores["bfloat16"]).statistic),
        "max_log_p_diff": float(log_gap.max()),
        "median_log_p_diff": float(np.median(log_gap)),
        "roc_auc_float32": stats.roc_auc(labels, scores["float32"][labelled]),
        "roc_auc_bfloat16": stats.roc_auc(labels, scores["bfloat16"][labelled]),
    }


def main(argv=None) -> int:
    args = parse_args(argv)
    split_path = os.path.join(args.demo_dir, "prepared", f"{args.split}.jsonl")
    if not os.path.isfile(split_path):
        print(f"error: {split_path} is missing; run `make demo` first", file=sys.stderr)
        return 2
    with open(split_path, encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle]
    print(machine_line(), flush=True)
    results = {}
    for question in (int(q) for q in args.questions.split(",")):
        checkpoint = os.path.join(args.demo_dir, "metrics", f"q{question}", "best")
        results[question] = result = compare(checkpoint, rows, question, args.max_input_length)
        print(
            f"q{question}: {result['pairs']} pairs, Spearman {result['spearman']:.5f}, "
            f"|log P diff| max {result['max_log_p_diff']:.4f} median "
            f"{result['median_log_p_diff']:.4f}, ROC-AUC {result['roc_auc_float32']:.4f} "
            f"(float32) {result['roc_auc_bfloat16']:.4f} (bfloat16)",
            flush=True,
        )
    worst = min(r["spearman"] for r in results.values())
    write_record(
        make_record(
            "bfloat16",
            f"bfloat16 against float32 scores of the demo's metrics, {len(rows)} pairs "
            f"of the {args.split} split",
            unit="Spearman",
            primary="spearman",
            variants={f"q{question}": result for question, result in results.items()},
            ratios={"lowest Spearman, bfloat16 against float32": worst},
            args=vars(args),
        ),
        args.results_dir,
    )
    print(f"min_spearman: {worst:.5f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
