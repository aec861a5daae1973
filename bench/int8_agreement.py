"""Do int8 scores rank as float32 ones do? Trained metrics, real inputs.

    python -m seahorse_metrics.demo                  # trains demo_output/metrics/q1..q6
    python bench/int8_agreement.py                   # their test split, float32 vs int8
    python bench/int8_agreement.py --engine ctranslate2   # the same on CTranslate2
    python bench/int8_agreement.py --engine ctranslate2 --int8_smoothing 0   # unsmoothed

Scores every pair of --input with every metric of --metrics twice, float32
and `quantize="int8"` (with --packing, both packed), and prints per metric
the Spearman rank correlation of the two, the largest and mean score difference,
the ROC-AUC of each against the human labels where the input has them
(boolean `q1`..`q6` fields, as `seahorse-metrics prepare` writes), and each
mode's examples/s (busy machines make those noisy). Ends with
`min spearman: N.NNNNN`; the issue's bar is 0.999.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import add_results_argument, machine_line, make_record, write_record  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--metrics",
        default="demo_output/metrics",
        help="A folder of metric checkpoints (one subfolder each; default the "
        "demo's), one checkpoint, or a comma-separated list of [NAME=]DIR "
        "(named by the directory, or its parent for a best/).",
    )
    parser.add_argument(
        "--input",
        default="demo_output/prepared/test.jsonl",
        help="JSONL with article and summary fields (default the demo's test split).",
    )
    parser.add_argument("--packing", action="store_true", help="Pack inputs in both modes.")
    parser.add_argument(
        "--engine",
        choices=("jax", "ctranslate2"),
        default="jax",
        help="The model call of both modes (ctranslate2: `pip install -e '.[cpu]'`).",
    )
    parser.add_argument("--limit", type=int, default=None, help="Score only the first N pairs.")
    parser.add_argument(
        "--int8_smoothing",
        type=float,
        default=None,
        help="ctranslate2 engine: SmoothQuant's alpha before int8 conversion "
        "(default the engine's, 0.5; 0 converts unsmoothed).",
    )
    parser.add_argument(
        "--smoothing_data",
        default=None,
        help="ctranslate2 engine: the smoothing's calibration pairs (JSON lines; "
        "default the bundled corpus).",
    )
    add_results_argument(parser)
    return parser.parse_args(argv)


def metric_paths(spec: str) -> dict[str, str]:
    """{name: checkpoint} from a folder of metrics (one subfolder each, its
    `best/` where there is one) or a comma-separated list of `[NAME=]DIR`
    (unnamed: the directory's name, its parent's for a `best/`).

    Raises:
      ValueError: for two metrics of one name (the second would replace the
        first in the table).
    """
    from seahorse_metrics.checkpoints import detect_format
    from seahorse_metrics.checkpoints.layout import checkpoint_names

    def is_checkpoint(path: str) -> bool:
        try:
            return bool(detect_format(path))
        except FileNotFoundError:
            return False

    if "," not in spec and os.path.isdir(spec) and not is_checkpoint(spec):
        names = sorted(n for n in os.listdir(spec) if os.path.isdir(os.path.join(spec, n)))
        return {
            n: os.path.join(spec, n, "best")
            if os.path.isdir(os.path.join(spec, n, "best"))
            else os.path.join(spec, n)
            for n in names
        }

    def named(path: str) -> str:
        if "=" in path and not os.path.exists(path):
            return path
        parts = os.path.normpath(path).split(os.sep)
        name = parts[-2] if parts[-1] == "best" and len(parts) > 1 else parts[-1]
        return f"{name}={path}"

    return checkpoint_names([named(p) for p in spec.split(",") if p])


def read_pairs(path: str, limit):
    with open(path, encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle if line.strip()]
    return records[:limit] if limit else records


def engine_options(args):
    """The ctranslate2 engine's smoothing options the command line sets."""
    if args.engine != "ctranslate2":
        return None
    options = {"int8_smoothing": args.int8_smoothing, "smoothing_data": args.smoothing_data}
    return {name: value for name, value in options.items() if value is not None}


def main(argv=None) -> int:
    args = parse_args(argv)
    from scipy.stats import spearmanr
    from sklearn.metrics import roc_auc_score

    from seahorse_metrics import MultiScorer

    paths = metric_paths(args.metrics)
    for name, path in paths.items():
        if not os.path.exists(path):
            raise SystemExit(
                f"bench/int8_agreement.py: no checkpoint {path} (metric {name}); "
                "run `python -m seahorse_metrics.demo` first or pass --metrics"
            )
    print(machine_line(), flush=True)
    records = read_pairs(args.input, args.limit)
    premises = [r["article"] for r in records]
    hypotheses = [r["summary"] for r in records]
    scores, speed = {}, {}
    for mode in ("float32", "int8"):
        scorer = MultiScorer.load(
            paths,
            quantize=None if mode == "float32" else mode,
            packing=args.packing,
            engine=args.engine,
            engine_options=engine_options(args),
        )
        scorer.score(premises[:8], hypotheses[:8])  # compile the common shapes first
        start = time.perf_counter()
        scores[mode] = scorer.score(premises, hypotheses, show_progress=False)
        speed[mode] = len(records) / (time.perf_counter() - start)
    print(
        f"{len(records)} pairs from {args.input}; {len(paths)} metrics"
        f"{', packed' if args.packing else ''}; engine {args.engine} "
        f"{engine_options(args) or ''}; examples/s (all metrics): "
        f"float32 {speed['float32']:.1f}, int8 {speed['int8']:.1f}"
    )
    print(
        f"{'metric':<8} {'spearman':>9} {'max |diff|':>11} {'mean |diff|':>12} {'auc f32':>8} "
        f"{'auc int8':>9}"
    )
    worst, variants = 1.0, {}
    for name in paths:
        a, b = scores["float32"][name], scores["int8"][name]
        rho = float(spearmanr(a, b).statistic)
        worst = min(worst, rho)
        labels = [r.get(name) for r in records]
        auc = ["", ""]
        keep = [i for i, label in enumerate(labels) if isinstance(label, bool)]
        if keep and len({labels[i] for i in keep}) == 2:
            y = [labels[i] for i in keep]
            auc = [f"{roc_auc_score(y, s[keep]):.4f}" for s in (a, b)]
        print(
            f"{name:<8} {rho:9.5f} {np.abs(a - b).max():11.2e} {np.abs(a - b).mean():12.2e} "
            f"{auc[0]:>8} {auc[1]:>9}"
        )
        variants[name] = {
            "spearman": rho,
            "max_abs_diff": float(np.abs(a - b).max()),
            "mean_abs_diff": float(np.abs(a - b).mean()),
            "roc_auc_float32": float(auc[0]) if auc[0] else None,
            "roc_auc_int8": float(auc[1]) if auc[1] else None,
        }
    write_record(
        int8_record(args, len(records), variants, speed, worst), args.results_dir, tag=args.engine
    )
    print(f"min spearman: {worst:.5f}")
    return 0


def int8_record(args, pairs: int, variants: dict, speed: dict, worst: float) -> dict:
    """This run as a benchmark record (bench/results/README.md)."""
    from seahorse_metrics.engines.isa import describe

    return make_record(
        "int8_agreement",
        f"int8 against float32 scores on the {args.engine} engine, "
        f"{len(variants)} metrics, {pairs} pairs",
        unit="Spearman",
        primary="spearman",
        variants=variants,
        ratios={"lowest Spearman, int8 against float32": worst},
        args=vars(args),
        isa=describe(),
        details={"examples_per_s": speed, "engine_options": engine_options(args)},
    )


if __name__ == "__main__":
    sys.exit(main())
