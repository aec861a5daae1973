"""Real size: a random mT5-large (or XL) written by transformers as sharded
safetensors, loaded and scored by seahorse-metrics and by Hugging Face PyTorch.

    python bench/real_size.py                    # mT5-large, float32 (~10 GB free memory)
    python bench/real_size.py --size xl          # mT5-XL in bfloat16 (~20 GB free memory)
    python bench/real_size.py --quick            # the code path, quickly:
                                                 # --size small --pairs 2 --length 512

Steps, each in its own process so that each peak RSS (the kernel's VmHWM) is
that implementation's alone:

  write   MT5ForConditionalGeneration with random weights in the dtype,
          `save_pretrained(..., max_shard_size="1GB")` (sharded safetensors
          and an index), and the sample's vocabulary (its ids are a subset of
          the 250112 rows, so the compute is the real model's)
  ours    `Scorer.load(dir, dtype=...)` (tensor by tensor onto the device),
          compile, score the pairs; a fresh compilation cache
  ours    again with that cache warm: load and compile only (the start-up a
          second `score` run sees)
  ours_int8
          `Scorer.load(dir, quantize="int8")`: JAX with int8 kernels
          (float32 models only), load, quantize, compile, score
  hf      `from_pretrained(dir, torch_dtype=...)`, then one forward pass per
          pair with the decoder start token (the fastest HF variant at
          this length in bench/score.py)
  ct2_float32, ct2_int8
          raw CTranslate2: the directory converted by its converter
          (`TransformersConverter`, timed in a process of its own), then a
          `Translator` (float32, or int8 GEMMs) scoring the target `▁1` with
          `score_batch`, one pair per batch, pairs side by side on one core
          each (`--ct2_threads_per_batch`, as ours)
  ours_ct2_float32, ours_ct2_int8
          `Scorer.load(dir, engine="ctranslate2"[, quantize="int8"])`: our
          front end on CTranslate2; the first load converts (in the library's
          child process, into a fresh conversion cache), a second process
          loads the cached conversion (the start-up a second `score` run sees)
  rounds  our fastest variant and the fastest peer scored again, in turn,
          each in a fresh process (`--rounds`); the goal's ratio compares
          the best run of each, since this machine's speed drifts by up to
          1.5x between minutes

All read log P("1") from the full-vocabulary softmax at the first decoder
step, on the same token ids (`encode_pair`, 8 pairs of `--length` tokens by
default 2048). Prints one line per figure: load time, peak RSS while loading
(and its ratio to the weights' bytes: the goal is <= 1.3x), compile time,
examples/s, the largest |log P("1")| difference to ours (float32: must be
< 1e-3), and ends with `ratio: N.NNx` (our examples/s over HF's).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("USE_TF", "0")  # transformers must not import TensorFlow
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# Load times are the scorer's own: the int8 self-check (a one-time float32 probe) is off.
os.environ.setdefault("SEAHORSE_METRICS_INT8_CHECK", "off")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import (  # noqa: E402
    add_isa_argument,
    add_results_argument,
    apply_isa,
    isa_line,
    machine_line,
    make_record,
    write_record,
)

SAMPLE_DIR = os.path.join(REPO, "seahorse_metrics", "data", "sample")
PRESETS = {
    "small": "mt5_small",
    "base": "mt5_base",
    "large": "mt5_large",
    "xl": "mt5_xl",
    "xxl": "mt5_xxl",
}
DEFAULT_DTYPE = {"xl": "bfloat16", "xxl": "bfloat16"}
COMPLETE = "bench_complete.json"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", choices=sorted(PRESETS), default="large")
    parser.add_argument(
        "--dtype",
        choices=("float32", "bfloat16"),
        default=None,
        help="Weights and compute (default: float32; bfloat16 for xl, xxl).",
    )
    parser.add_argument("--pairs", type=int, default=8, help="Pairs scored (default 8).")
    parser.add_argument("--length", type=int, default=2048, help="Tokens per pair (default 2048).")
    parser.add_argument(
        "--model_dir",
        default=None,
        help="Where the random model is written (reused when complete); default "
        "a temporary directory removed at the end.",
    )
    parser.add_argument("--skip_hf", action="store_true", help="Skip Hugging Face PyTorch.")
    parser.add_argument(
        "--skip_ct2",
        action="store_true",
        help="Skip CTranslate2, raw and ours (`pip install -e '.[cpu]'`).",
    )
    parser.add_argument(
        "--ct2_threads_per_batch",
        type=int,
        default=1,
        help="CTranslate2's threads per pair, raw and ours (default 1: pairs "
        "side by side, one core each).",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=2,
        help="After the runs above, rounds of our fastest variant and the "
        "fastest peer, alternating, each in a fresh process (default 2; "
        "0: none). The goal's ratio compares their best runs: this "
        "machine's speed drifts between minutes.",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="The code path, quickly: --size small --pairs 2 --length 512 --rounds 1.",
    )
    parser.add_argument("--json", default=None, help="Also write the record here.")
    add_isa_argument(parser)
    add_results_argument(parser)
    parser.add_argument(
        "--role",
        choices=("write", "ours", "hf", "ct2_convert", "ct2", "ours_ct2"),
        default=None,
        help=argparse.SUPPRESS,
    )
    parser.add_argument("--compute_type", default="float32", help=argparse.SUPPRESS)
    parser.add_argument("--quantize", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--ct2_dir", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--inputs", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--cache_dir", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--compile_only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.size, args.pairs, args.length, args.rounds = "small", 2, 512, 1
    args.dtype = args.dtype or DEFAULT_DTYPE.get(args.size, "float32")
    return args


def peak_rss_bytes() -> int:
    """This process's resident-set high-water mark (VmHWM)."""
    with open("/proc/self/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


# --------------------------------------------------------------- children
def write_model(args) -> dict:
    """Writes a random MT5ForConditionalGeneration as sharded safetensors."""
    import torch
    import transformers

    from seahorse_metrics.checkpoints.hf import config_to_hf
    from seahorse_metrics.model.config import get_config

    config = get_config(PRESETS[args.size])
    hf_config = transformers.MT5Config(
        **{
            k: v
            for k, v in config_to_hf(config).items()
            if k not in ("architectures", "torch_dtype")
        }
    )
    start = time.perf_counter()
    torch.manual_seed(0)
    # Built in the dtype (no float32 copy of an XL), with T5-style scaled init.
    torch.set_default_dtype(getattr(torch, args.dtype))
    model = transformers.MT5ForConditionalGeneration(hf_config).eval()
    with torch.no_grad():
        # HF draws the head with std 1, which saturates the softmax; scale it as T5X does.
        model.lm_head.weight.mul_(config.d_model**-0.5)
    model.save_pretrained(args.model_dir, safe_serialization=True, max_shard_size="1GB")
    shutil.copyfile(
        os.path.join(SAMPLE_DIR, "spiece.model"), os.path.join(args.model_dir, "spiece.model")
    )
    parameters = sum(p.numel() for p in model.parameters())
    return {
        "write_s": time.perf_counter() - start,
        "parameters": parameters,
        "weight_bytes": parameters * torch.finfo(getattr(torch, args.dtype)).bits // 8,
    }


def run_ours(args) -> dict:
    import jax

    from seahorse_metrics import Scorer, compilation_cache

    compilation_cache.enable(args.cache_dir)
    with open(args.inputs, encoding="utf-8") as handle:
        premises, hypotheses = json.load(handle)
    baseline = peak_rss_bytes()
    start = time.perf_counter()
    scorer = Scorer.load(
        args.model_dir,
        dtype=args.dtype,
        quantize=args.quantize,
        max_input_length=args.length,
        bucket_lengths=(args.length,),
        batch_size=1,
    )
    jax.block_until_ready(scorer.params)
    result = {
        "load_s": time.perf_counter() - start,
        "rss_baseline": baseline,
        "rss_peak_loading": peak_rss_bytes(),
    }
    start = time.perf_counter()
    scorer.precompile()
    result["compile_s"] = time.perf_counter() - start
    if args.compile_only:
        return result
    return timed_scoring(scorer, premises, hypotheses, result)


def timed_scoring(scorer, premises, hypotheses, result: dict) -> dict:
    """`result` with the scoring time, rate, peak RSS and log P("1") of `scorer`."""
    import numpy as np

    start = time.perf_counter()
    scores = scorer.score(premises, hypotheses, show_progress=False)
    seconds = time.perf_counter() - start
    result.update(
        score_s=seconds,
        examples_per_s=len(premises) / seconds,
        rss_peak_scoring=peak_rss_bytes(),
        log_p=[float(v) for v in np.log(np.asarray(scores, np.float64))],
    )
    return result


def run_hf(args) -> dict:
    import torch
    import transformers

    from seahorse_metrics.data.inputs import encode_pair
    from seahorse_metrics.data.vocab import SentencePieceTokenizer, target_token_ids

    with open(args.inputs, encoding="utf-8") as handle:
        premises, hypotheses = json.load(handle)
    baseline = peak_rss_bytes()
    start = time.perf_counter()
    model = transformers.MT5ForConditionalGeneration.from_pretrained(
        args.model_dir, torch_dtype=getattr(torch, args.dtype)
    ).eval()
    result = {
        "load_s": time.perf_counter() - start,
        "rss_baseline": baseline,
        "rss_peak_loading": peak_rss_bytes(),
    }
    tokenizer = SentencePieceTokenizer(os.path.join(args.model_dir, "spiece.model"))
    one_id = target_token_ids(tokenizer)[0]
    log_p = []
    start = time.perf_counter()
    with torch.inference_mode():  # the first call pages the memory-mapped weights in
        model(
            input_ids=torch.ones((1, 16), dtype=torch.long),
            decoder_input_ids=torch.zeros((1, 1), dtype=torch.long),
        )
    result["first_call_s"] = time.perf_counter() - start
    start = time.perf_counter()
    with torch.inference_mode():
        for premise, hypothesis in zip(premises, hypotheses):
            ids = torch.tensor([encode_pair(tokenizer, premise, hypothesis, args.length).ids])
            logits = model(
                input_ids=ids, decoder_input_ids=torch.zeros((1, 1), dtype=torch.long)
            ).logits
            log_p.append(float(torch.log_softmax(logits[0, 0].float(), dim=-1)[one_id]))
    seconds = time.perf_counter() - start
    result.update(
        score_s=seconds,
        examples_per_s=len(premises) / seconds,
        rss_peak_scoring=peak_rss_bytes(),
        log_p=log_p,
    )
    return result


def convert_ct2(args) -> dict:
    """Raw CTranslate2: its converter on the written directory."""
    from ctranslate2.converters import TransformersConverter

    start = time.perf_counter()
    TransformersConverter(args.model_dir, low_cpu_mem_usage=True).convert(
        args.ct2_dir, quantization=args.compute_type, force=True
    )
    return {"convert_s": time.perf_counter() - start, "rss_peak_converting": peak_rss_bytes()}


def run_ct2(args) -> dict:
    """Raw CTranslate2: a Translator scoring the target `▁1`, one pair per
    batch, as many side by side as `--ct2_threads_per_batch` leaves cores for."""
    import ctranslate2

    from seahorse_metrics.data.inputs import encode_pair
    from seahorse_metrics.data.vocab import SentencePieceTokenizer, target_token_ids
    from seahorse_metrics.engines.ctranslate2 import thread_split

    with open(args.inputs, encoding="utf-8") as handle:
        premises, hypotheses = json.load(handle)
    baseline = peak_rss_bytes()
    start = time.perf_counter()
    inter_threads, intra_threads = thread_split(os.cpu_count(), args.ct2_threads_per_batch)
    translator = ctranslate2.Translator(
        args.ct2_dir,
        device="cpu",
        compute_type=args.compute_type,
        inter_threads=inter_threads,
        intra_threads=intra_threads,
    )
    result = {
        "load_s": time.perf_counter() - start,
        "rss_baseline": baseline,
        "rss_peak_loading": peak_rss_bytes(),
    }
    tokenizer = SentencePieceTokenizer(os.path.join(args.model_dir, "spiece.model"))
    one = [tokenizer.id_to_piece(target_token_ids(tokenizer)[0])]
    start = time.perf_counter()
    sources = [
        [tokenizer.id_to_piece(i) for i in encode_pair(tokenizer, p, h, args.length).ids]
        for p, h in zip(premises, hypotheses)
    ]
    scored = translator.score_batch(
        sources, [one] * len(sources), max_batch_size=1, max_input_length=0
    )
    log_p = [float(result.log_probs[0]) for result in scored]
    seconds = time.perf_counter() - start
    result.update(
        score_s=seconds,
        examples_per_s=len(premises) / seconds,
        rss_peak_scoring=peak_rss_bytes(),
        log_p=log_p,
    )
    return result


def run_ours_ct2(args) -> dict:
    """Ours on the ctranslate2 engine (converting into `--cache_dir` when it
    holds no conversion yet)."""

    from seahorse_metrics import Scorer

    with open(args.inputs, encoding="utf-8") as handle:
        premises, hypotheses = json.load(handle)
    baseline = peak_rss_bytes()
    start = time.perf_counter()
    scorer = Scorer.load(
        args.model_dir,
        engine="ctranslate2",
        quantize=None if args.compute_type == "float32" else args.compute_type,
        engine_options={
            "cache_dir": args.cache_dir,
            "threads_per_batch": args.ct2_threads_per_batch,
        },
        max_input_length=args.length,
        bucket_lengths=(args.length,),
        batch_size=1,
    )
    result = {
        "load_s": time.perf_counter() - start,
        "rss_baseline": baseline,
        "rss_peak_loading": peak_rss_bytes(),
    }
    if args.compile_only:
        return result
    return timed_scoring(scorer, premises, hypotheses, result)


ROLES = {
    "ours": run_ours,
    "hf": run_hf,
    "ct2_convert": convert_ct2,
    "ct2": run_ct2,
    "ours_ct2": run_ours_ct2,
}
CT2_TYPES = ("float32", "int8")


# ----------------------------------------------------------------- parent
def make_pairs(count: int, length: int) -> tuple[list[str], list[str]]:
    """`count` pairs whose inputs fill `length` tokens (articles of the
    sample run together; summaries from its validation split)."""
    from seahorse_metrics.data.vocab import SentencePieceTokenizer

    tokenizer = SentencePieceTokenizer(os.path.join(SAMPLE_DIR, "spiece.model"))
    with open(os.path.join(SAMPLE_DIR, "seahorse", "articles.jsonl"), encoding="utf-8") as handle:
        articles = [json.loads(line)["text"] for line in handle]
    with open(os.path.join(SAMPLE_DIR, "seahorse", "validation.tsv"), encoding="utf-8") as handle:
        summaries = [line.split("\t")[2] for line in list(handle)[1:]]
    premises = []
    for index in range(count):
        parts, tokens = [], 0
        while tokens < length + 64:  # a little over: encode_pair cuts the article
            article = articles[(index * 37 + len(parts)) % len(articles)]
            parts.append(article)
            tokens += len(tokenizer.encode(article))
        premises.append(" ".join(parts))
    return premises, [summaries[index * 11 % len(summaries)] for index in range(count)]


def child(args, role: str, **extra) -> dict:
    """Runs this script as `role` in a fresh process; returns its JSON result."""
    command = [
        sys.executable,
        os.path.abspath(__file__),
        "--role",
        role,
        "--size",
        args.size,
        "--dtype",
        args.dtype,
        "--length",
        str(args.length),
        "--model_dir",
        args.model_dir,
        "--ct2_threads_per_batch",
        str(args.ct2_threads_per_batch),
    ]
    for name, value in extra.items():
        if value is True:
            command.append(f"--{name}")
        elif value is not None:
            command += [f"--{name}", str(value)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{role} failed:\n{done.stderr[-4000:]}")
    return json.loads([line for line in done.stdout.splitlines() if line.startswith("{")][-1])


def gb(size: float) -> str:
    return f"{size / 1e9:.2f} GB"


def report(figures: dict) -> list[str]:
    weights = figures["model"]["weight_bytes"]
    lines = [
        f"model: {figures['model']['name']}, {figures['model']['parameters'] / 1e9:.3f} B "
        f"parameters, {figures['dtype']}: {gb(weights)} of weights in "
        f"{figures['model']['shards']} safetensors shards",
        f"pairs: {figures['pairs']} of {figures['length']} tokens",
    ]
    for name in ("ours", "ours_int8", "hf") + tuple(
        f"{kind}_{t}" for kind in ("ct2", "ours_ct2") for t in CT2_TYPES
    ):
        run = figures.get(name)
        if run is None:
            continue
        loading = (
            " (converting first: a fresh conversion cache)" if name.startswith("ours_ct2") else ""
        )
        lines += [
            f"{name} load{loading}: {run['load_s']:.1f} s",
            f"{name} peak RSS while loading: {gb(run['rss_peak_loading'])} "
            f"({run['rss_peak_loading'] / weights:.2f}x the weights; "
            f"{gb(run['rss_baseline'])} before loading)",
        ]
        if "convert_s" in run:
            lines.append(
                f"{name} conversion (its converter, own process): {run['convert_s']:.1f} s, "
                f"peak RSS {gb(run['rss_peak_converting'])}"
            )
        if "compile_s" in run:
            lines.append(f"{name} compile: {run['compile_s']:.1f} s (empty compilation cache)")
        if "first_call_s" in run:
            lines.append(
                f"{name} first call (16 tokens; pages the memory-mapped weights in): "
                f"{run['first_call_s']:.1f} s"
            )
        lines += [
            f"{name} scoring: {run['examples_per_s']:.4f} examples/s ({run['score_s']:.1f} s)",
            f"{name} peak RSS while scoring: {gb(run['rss_peak_scoring'])}",
        ]
    warm = figures.get("ours_warm")
    if warm is not None:
        lines.append(
            f"ours second start-up: load {warm['load_s']:.1f} s + compile "
            f"{warm['compile_s']:.1f} s (compilation cache warm)"
        )
    for compute_type in CT2_TYPES:
        warm = figures.get(f"ours_ct2_{compute_type}_warm")
        if warm is not None:
            lines.append(
                f"ours_ct2_{compute_type} second start-up: load {warm['load_s']:.1f} s "
                "(conversion cached)"
            )
    for name in ("hf", "ct2_float32", "ours_ct2_float32", "ours_int8", "ct2_int8", "ours_ct2_int8"):
        if name in figures:
            gap = max(abs(a - b) for a, b in zip(figures["ours"]["log_p"], figures[name]["log_p"]))
            lines.append(f'max |log P("1") difference|, {name} vs ours: {gap:.2e}')
    contenders = fastest_pair(figures)
    if contenders is not None:
        best_ours, best_peer = contenders
        speeds = {name: figures[name]["examples_per_s"] for name in contenders}
        lines.append(
            f"our fastest ({best_ours}) vs the fastest peer ({best_peer}), the runs "
            f"above: {speeds[best_ours] / speeds[best_peer]:.2f}x"
        )
        rounds = figures.get("rounds")
        if rounds:
            best = {name: max([speeds[name]] + rounds[name]) for name in contenders}
            plural = "s" if len(rounds[best_ours]) != 1 else ""
            lines += [
                f"{name} in {len(rounds[name])} alternating round{plural}: "
                + ", ".join(f"{speed:.4f}" for speed in rounds[name])
                + " examples/s"
                for name in contenders
            ]
            lines.append(
                f"goal, our fastest ({best_ours}) >= the fastest peer ({best_peer}), "
                f"best run of each: {best[best_ours] / best[best_peer]:.2f}x"
            )
    if "hf" in figures:
        lines.append(
            f"ratio: {figures['ours']['examples_per_s'] / figures['hf']['examples_per_s']:.2f}x"
        )
    return lines


def fastest_pair(figures: dict):
    """(our fastest variant, the fastest peer) by examples/s, or None without a peer."""
    speeds = {
        name: run["examples_per_s"]
        for name, run in figures.items()
        if isinstance(run, dict) and "examples_per_s" in run
    }
    ours = [n for n in speeds if n.startswith("ours")]
    peers = [n for n in speeds if not n.startswith("ours")]
    if not ours or not peers:
        return None
    return max(ours, key=speeds.get), max(peers, key=speeds.get)


# Figures of each run kept in the record's variants (bytes become GB).
RUN_FIGURES = (
    "examples_per_s",
    "score_s",
    "load_s",
    "compile_s",
    "convert_s",
    "first_call_s",
    "rss_peak_loading",
    "rss_peak_scoring",
    "rss_peak_converting",
)


def real_size_variants(figures: dict) -> dict:
    """{run: {figure: value}} of every run in `figures`, with its largest
    |log P("1")| difference to ours."""
    variants = {}
    for name, run in figures.items():
        if not isinstance(run, dict) or "load_s" not in run:
            continue
        variant = {
            key: (run[key] / 1e9 if key.startswith("rss") else run[key])
            for key in RUN_FIGURES
            if key in run
        }
        variant = {
            (f"{key}_gb" if key.startswith("rss") else key): value for key, value in variant.items()
        }
        if "log_p" in run and name != "ours" and "log_p" in figures.get("ours", {}):
            variant["max_abs_log_p_diff_vs_ours"] = max(
                abs(a - b) for a, b in zip(figures["ours"]["log_p"], run["log_p"])
            )
        variants[name] = variant
    return variants


def real_size_ratios(figures: dict) -> dict:
    """The comparisons `report` prints: ours over Hugging Face and CTranslate2
    float32, and our fastest over the fastest peer (runs, and best of rounds)."""
    speed = {
        name: run["examples_per_s"]
        for name, run in figures.items()
        if isinstance(run, dict) and "examples_per_s" in run
    }
    ratios = {
        f"ours / {peer}": speed["ours"] / speed[peer]
        for peer in ("hf", "ct2_float32")
        if peer in speed and "ours" in speed
    }
    contenders = fastest_pair(figures)
    if contenders is not None:
        best_ours, best_peer = contenders
        ratios[f"{best_ours} / {best_peer} (fastest ours / fastest peer)"] = (
            speed[best_ours] / speed[best_peer]
        )
        rounds = figures.get("rounds") or {}
        if rounds.get(best_ours) and rounds.get(best_peer):
            ratios[f"{best_ours} / {best_peer}, best of runs and alternating rounds"] = max(
                [speed[best_ours]] + rounds[best_ours]
            ) / max([speed[best_peer]] + rounds[best_peer])
    return ratios


def real_size_record(args, figures: dict, isa: dict) -> dict:
    """This run as a benchmark record (bench/results/README.md)."""
    model = figures["model"]
    return make_record(
        "real_size",
        f"Loading and scoring a random {model['name']} ({figures['dtype']}, "
        f"{model['shards']} safetensors shards), {figures['pairs']} pairs of "
        f"{figures['length']} tokens: ours against Hugging Face PyTorch and CTranslate2",
        unit="examples/s",
        primary="examples_per_s",
        variants=real_size_variants(figures),
        ratios=real_size_ratios(figures),
        args=vars(args),
        isa=isa,
        details=figures,
    )


def scoring_run(args, name: str, inputs: str, work: str) -> dict:
    """Scores the pairs again as variant `name` in a fresh process (its
    conversion or compilation cache from the runs above)."""
    if name in ("ours", "ours_int8"):
        return child(
            args,
            "ours",
            inputs=inputs,
            cache_dir=os.path.join(work, "jax_cache"),
            quantize="int8" if name == "ours_int8" else None,
        )
    if name == "hf":
        return child(args, "hf", inputs=inputs)
    compute_type = name.rsplit("_", 1)[1]
    if name.startswith("ours_ct2"):
        return child(
            args,
            "ours_ct2",
            inputs=inputs,
            compute_type=compute_type,
            cache_dir=os.path.join(work, "ours_ct2_cache"),
        )
    return child(
        args, "ct2", inputs=inputs, compute_type=compute_type, ct2_dir=os.path.join(work, name)
    )


def alternating_rounds(args, figures: dict, inputs: str, work: str) -> dict:
    """{variant: [examples/s per round]} of our fastest and the fastest peer,
    run in turn (peer first in even rounds, ours first in odd ones)."""
    contenders = fastest_pair(figures)
    if contenders is None or args.rounds < 1:
        return {}
    rounds = {name: [] for name in contenders}
    for number in range(args.rounds):
        order = contenders[::-1] if number % 2 == 0 else contenders
        for name in order:
            print(f"round {number + 1}/{args.rounds}: {name}", flush=True)
            rounds[name].append(scoring_run(args, name, inputs, work)["examples_per_s"])
    return rounds


def ct2_figures(args, inputs: str, work: str) -> dict:
    """Raw CTranslate2 and ours on it, float32 and int8, each in its own processes."""
    figures = {}
    for compute_type in CT2_TYPES:
        ct2_dir = os.path.join(work, f"ct2_{compute_type}")
        print(f"ct2_{compute_type}: convert, load, score", flush=True)
        converted = child(args, "ct2_convert", compute_type=compute_type, ct2_dir=ct2_dir)
        figures[f"ct2_{compute_type}"] = dict(
            child(args, "ct2", inputs=inputs, compute_type=compute_type, ct2_dir=ct2_dir),
            **converted,
        )
        cache = os.path.join(work, "ours_ct2_cache")
        print(f"ours_ct2_{compute_type}: convert (first load), score; load again", flush=True)
        figures[f"ours_ct2_{compute_type}"] = child(
            args, "ours_ct2", inputs=inputs, compute_type=compute_type, cache_dir=cache
        )
        figures[f"ours_ct2_{compute_type}_warm"] = child(
            args,
            "ours_ct2",
            inputs=inputs,
            compute_type=compute_type,
            cache_dir=cache,
            compile_only=True,
        )
    return figures


def parent(args) -> int:
    temporary = args.model_dir is None
    args.model_dir = args.model_dir or tempfile.mkdtemp(prefix=f"mt5-{args.size}-")
    work = tempfile.mkdtemp(prefix="real-size-")
    print(machine_line(), flush=True)
    print(isa_line(), flush=True)
    try:
        complete = os.path.join(args.model_dir, COMPLETE)
        if not os.path.isfile(complete):
            print(
                f"writing a random {PRESETS[args.size]} ({args.dtype}) to {args.model_dir}",
                flush=True,
            )
            written = child(args, "write")
            with open(complete, "w", encoding="utf-8") as handle:
                json.dump(dict(written, dtype=args.dtype), handle)
        with open(complete, encoding="utf-8") as handle:
            model = json.load(handle)
        shards = len([n for n in os.listdir(args.model_dir) if n.endswith(".safetensors")])
        inputs = os.path.join(work, "pairs.json")
        with open(inputs, "w", encoding="utf-8") as handle:
            json.dump(make_pairs(args.pairs, args.length), handle)
        figures = {
            "model": dict(model, name=PRESETS[args.size], shards=shards),
            "dtype": args.dtype,
            "pairs": args.pairs,
            "length": args.length,
        }
        cache = os.path.join(work, "jax_cache")
        print("ours: load, compile, score", flush=True)
        figures["ours"] = child(args, "ours", inputs=inputs, cache_dir=cache)
        print("ours again: load, compile from the cache", flush=True)
        figures["ours_warm"] = child(
            args, "ours", inputs=inputs, cache_dir=cache, compile_only=True
        )
        if args.dtype == "float32":
            print("ours_int8 (--quantize int8): load, quantize, compile, score", flush=True)
            figures["ours_int8"] = child(
                args, "ours", inputs=inputs, cache_dir=cache, quantize="int8"
            )
        if not args.skip_hf:
            print("hf: load, score", flush=True)
            figures["hf"] = child(args, "hf", inputs=inputs)
        if not args.skip_ct2:
            figures.update(ct2_figures(args, inputs, work))
        figures["rounds"] = alternating_rounds(args, figures, inputs, work)
        print("\n".join(report(figures)))
        from seahorse_metrics.engines.isa import describe
        from seahorse_metrics.io.atomic import write_json_atomically

        record = real_size_record(args, figures, describe())
        write_record(record, args.results_dir, tag=f"mt5-{args.size}-{args.isa}")
        if args.json:
            write_json_atomically(args.json, record)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if temporary:
            shutil.rmtree(args.model_dir, ignore_errors=True)
    return 0


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.role is None:
        apply_isa(args)
        return parent(args)
    if args.role == "write":
        os.makedirs(args.model_dir, exist_ok=True)
        result = write_model(args)
    else:
        result = ROLES[args.role](args)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
