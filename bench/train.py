"""Training throughput: seahorse-metrics' train step vs Hugging Face PyTorch, mT5-small shape.

    python bench/train.py            # input lengths 512 and 2048, packing at 2048
    python bench/train.py --quick    # a smoke run in about a minute (2+2 layers, length 256)

One run, one process. Both sides train the same mT5-small-shaped network
(8+8 layers, d_model 512, 6 heads of 64, gated-GELU d_ff 1024, the real
250112-row vocabulary, float32, dropout 0.1) from the same weights on the
same batch of random token ids with targets of 4 tokens, with the same
optimizer family: ours is the trainer's jitted step (`compiled_step`:
optax Adafactor, T5X settings, constant learning rate 1e-3, z-loss 1e-4),
the reference is `MT5ForConditionalGeneration` in train mode with
`transformers.optimization.Adafactor` (lr 1e-3, parameter scaling, update
clipping 1.0, decay -0.8, no momentum), forward + backward + update. PyTorch
uses as many threads as JAX has CPUs. Each side runs one warm-up step (our
compile), then the best of --repeats timed steps counts.

FLOPs of one step (matmuls only, padding included, 3x forward for forward +
backward): with d = d_model, I = heads * d_kv, F = d_ff, L input and T target
tokens per row, per row and layer
  encoder:  2L(4dI + 3dF) + 4L^2 I              (q,k,v,o, gated MLP; scores + mix)
  decoder:  2T(4dI + 2dI + 3dF) + 4dI L + 4T^2 I + 4TLI
            (self q,k,v,o, cross q,o, MLP; cross k,v over the L inputs;
             self and cross attention scores + mix)
  logits:   2T d V over the full vocabulary V
Embedding gathers, norms, softmax and the optimizer update are not counted.
Achieved FLOP/s are set against a float32 matmul peak (2048^3 products, best
of JAX and PyTorch) measured in the same run, before and after.

Packing: examples with log-normal lengths (median L/4 tokens, clipped to
L/20..L; at L = 2048 a median of 512 and a minimum of ~100, like SEAHORSE's
articles) are batched one per row (padded to L) or packed several per row
by the trainer's `BatchStream`; the line reports real (non-padding) tokens
trained per second either way.

Training at size (remat, scanned layers): at --variant_length (2048) the
step runs again with `remat` 'minimal' and 'full' and with scanned layers
(`scan_layers`, remat 'none' and 'full'), each from the same weights on the
same batch; each line gives tokens/s, the ratio to Hugging Face at the same
length and batch, the share of the peak (model FLOPs: recomputation is
not counted, so remat's cost shows as a lower share) and the cost against
remat 'none' unrolled.

--quick keeps the widths and the vocabulary but only 2+2 layers (compiling
the full 8+8-layer step alone takes most of a minute on two cores), and runs
the variants at length 256.

Prints one line per length with tokens/s for both, their ratio and our
fraction of the peak, the packing line, and ends with `ratio: N.NNx` (ours
over PyTorch, the geometric mean over lengths).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

os.environ.setdefault("USE_TF", "0")  # transformers must not import TensorFlow
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import (  # noqa: E402
    add_results_argument,
    machine_line,
    make_record,
    measure_matmul_peak,
    write_record,
)
from score import random_params  # noqa: E402  (T5-style random weights, numpy)

TARGET_LENGTH = 4


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lengths", default="512,2048", help="Input lengths, comma-separated.")
    parser.add_argument(
        "--tokens_per_batch",
        type=int,
        default=4096,
        help="Input tokens per batch: rows = this / length (default 4096).",
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="Timed steps per side (best counts)."
    )
    parser.add_argument(
        "--pack_length",
        type=int,
        default=2048,
        help="Input length of the packing comparison (0 skips it).",
    )
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument(
        "--layers", type=int, default=8, help="Encoder and decoder layers (default 8)."
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="2+2 layers, length 256, 2 rows, one timed step, packing at 256: under a minute.",
    )
    parser.add_argument(
        "--variants",
        default="minimal,full,scan,scan-full",
        help="Step variants timed at --variant_length besides remat 'none': remat "
        "'minimal'/'full', 'scan' (scanned layers), 'scan-full' (both); "
        "empty skips them.",
    )
    parser.add_argument(
        "--variant_length",
        type=int,
        default=2048,
        help="Input length of the variants (default 2048).",
    )
    parser.add_argument("--json", default=None, help="Also write the record here.")
    add_results_argument(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.lengths, args.tokens_per_batch, args.repeats, args.pack_length = "256", 512, 1, 256
        args.layers, args.variant_length = 2, 256
    return args


def step_flops(config, rows: int, length: int, target: int) -> float:
    """Matmul FLOPs of one train step (see the module docstring)."""
    d, inner, ff, vocab = config.d_model, config.inner_dim, config.d_ff, config.vocab_size
    encoder = 2 * length * (4 * d * inner + 3 * d * ff) + 4 * length * length * inner
    decoder = (
        2 * target * (6 * d * inner + 3 * d * ff)
        + 4 * d * inner * length
        + 4 * target * target * inner
        + 4 * target * length * inner
    )
    forward = (
        config.num_encoder_layers * encoder
        + config.num_decoder_layers * decoder
        + 2 * target * d * vocab
    )
    return 3.0 * rows * forward


# ------------------------------------------------------------------ batches
def random_batch(
    rows: int, length: int, vocab: int, seed: int, target_length: int = TARGET_LENGTH
) -> dict[str, np.ndarray]:
    """A full batch of random tokens (every position real), T5X features."""
    rng = np.random.default_rng(seed)
    targets = rng.integers(2, vocab, (rows, target_length)).astype(np.int32)
    targets[:, -1] = 1  # EOS
    decoder_inputs = np.zeros_like(targets)
    decoder_inputs[:, 1:] = targets[:, :-1]
    return {
        "encoder_input_tokens": rng.integers(2, vocab, (rows, length)).astype(np.int32),
        "decoder_input_tokens": decoder_inputs,
        "decoder_target_tokens": targets,
        "decoder_loss_weights": np.ones_like(targets),
    }


def mixed_examples(count: int, max_length: int, vocab: int, seed: int):
    """Examples with log-normal input lengths (median max/4, clipped to max/20..max)."""
    from seahorse_metrics.training.data import ExampleSet

    rng = np.random.default_rng(seed)
    lengths = np.clip(
        np.exp(rng.normal(math.log(max_length / 4), 0.7, count)), max_length // 20, max_length
    ).astype(int)
    inputs = [rng.integers(2, vocab, n).astype(np.int32) for n in lengths]
    targets = [[int(rng.integers(2, vocab)), 1] for _ in lengths]
    return ExampleSet.from_examples(inputs, targets)


# ------------------------------------------------------------------ ours
class Ours:
    """The trainer's compiled step on all local devices."""

    def __init__(self, config, params):
        import jax

        from seahorse_metrics.model import partitioning, stacks
        from seahorse_metrics.training import sharding, step
        from seahorse_metrics.training.optimizers import OptimizerConfig

        self.jax = jax
        self.sharding, self.step_lib = sharding, step
        self.mesh = partitioning.make_mesh(1)
        self.sharding_context = partitioning.sharding_context
        self.plan = step.compiled_step(config, OptimizerConfig(), 0, 1e-4, None, self.mesh)
        if config.scan_layers:  # host numpy arrays: stacked on the host
            params = stacks.stack_layers(params)
        self.state = self.plan.init_state(seed=0, host_params=params)
        self.lengths_seen: set[int] = set()

    def time_step(self, batch, repeats: int, warm_up: bool = True) -> tuple[float, float, float]:
        """(warm-up step seconds, best timed step seconds, first loss); the
        warm-up step compiles a new batch shape."""
        self.lengths_seen.add(batch["encoder_input_tokens"].shape[1])
        placed = self.sharding.global_batch(batch, self.plan.batch_sharding)
        first, first_loss, best = math.nan, math.nan, math.inf
        with self.sharding_context(self.mesh):
            if warm_up:
                start = time.perf_counter()
                self.state, metrics = self.plan.step_fn(self.state, placed)
                first_loss = float(metrics["cross_entropy"])
                first = time.perf_counter() - start
            for _ in range(repeats):
                start = time.perf_counter()
                self.state, metrics = self.plan.step_fn(self.state, placed)
                self.jax.block_until_ready(metrics)
                best = min(best, time.perf_counter() - start)
        return first, best, first_loss


# ------------------------------------------------------------------ Hugging Face
class HuggingFace:
    """`MT5ForConditionalGeneration` (train mode) with HF's Adafactor."""

    def __init__(self, config, params, threads: int):
        import torch
        import transformers
        from transformers.modeling_utils import no_init_weights
        from transformers.optimization import Adafactor

        from seahorse_metrics.checkpoints.hf import config_to_hf, hf_tensors_from_params

        torch.set_num_threads(threads)
        self.torch = torch
        hf_config = transformers.MT5Config(
            **{
                k: v
                for k, v in config_to_hf(config).items()
                if k not in ("architectures", "torch_dtype")
            }
        )
        with no_init_weights():
            self.model = transformers.MT5ForConditionalGeneration(hf_config)
        tensors = {
            name: torch.from_numpy(np.ascontiguousarray(value))
            for name, value in hf_tensors_from_params(config, params).items()
        }
        missing, unexpected = self.model.load_state_dict(tensors, strict=False)
        tied = {"encoder.embed_tokens.weight", "decoder.embed_tokens.weight"}
        if set(missing) - tied or unexpected:
            raise RuntimeError(f"weights do not map: missing {missing}, unexpected {unexpected}")
        self.model.train()
        self.optimizer = Adafactor(
            self.model.parameters(),
            lr=1e-3,
            scale_parameter=True,
            relative_step=False,
            warmup_init=False,
            clip_threshold=1.0,
            decay_rate=-0.8,
            beta1=None,
        )

    def _step(self, inputs, mask, labels) -> float:
        loss = self.model(input_ids=inputs, attention_mask=mask, labels=labels).loss
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return float(loss.detach())

    def time_step(self, batch, repeats: int, warm_up: bool = True) -> tuple[float, float, float]:
        torch = self.torch
        inputs = torch.from_numpy(batch["encoder_input_tokens"].astype(np.int64))
        mask = (inputs != 0).long()
        labels = torch.from_numpy(batch["decoder_target_tokens"].astype(np.int64))
        first, first_loss, best = math.nan, math.nan, math.inf
        if warm_up:
            start = time.perf_counter()
            first_loss = self._step(inputs, mask, labels)
            first = time.perf_counter() - start
        for _ in range(repeats):
            start = time.perf_counter()
            self._step(inputs, mask, labels)
            best = min(best, time.perf_counter() - start)
        return first, best, first_loss


# ------------------------------------------------------------------ packing
def packing_comparison(ours: Ours, config, length: int, rows: int, repeats: int) -> dict:
    """Real tokens/s of the same examples, one per row vs packed (the unpacked
    shape is compiled already by the length comparison when `length` is one
    of its lengths)."""
    from seahorse_metrics.training.batches import BatchStream, batch_stats

    examples = mixed_examples(max(64, rows * 16), length, config.vocab_size, seed=1)
    result = {"lengths_median": int(np.median(examples.input_lengths))}
    for pack in (False, True):
        target = TARGET_LENGTH * length // 128 if pack else TARGET_LENGTH
        stream = BatchStream(
            examples, rows, length, target, config.decoder_start_id, seed=0, pack=pack
        )
        batch = next(stream)
        real_tokens = batch_stats(batch)["tokens"]
        _, seconds, _ = ours.time_step(
            batch, repeats, warm_up=pack or length not in ours.lengths_seen
        )
        result["packed" if pack else "unpacked"] = {
            "examples": batch_stats(batch)["examples"],
            "real_tokens": real_tokens,
            "seconds": seconds,
            "real_tokens_per_s": real_tokens / seconds,
        }
    result["gain"] = result["packed"]["real_tokens_per_s"] / result["unpacked"]["real_tokens_per_s"]
    return result


def time_lengths(ours, hf, config, args) -> list[dict]:
    """One training step per --lengths entry, ours and HF's, at about
    --tokens_per_batch input tokens per batch."""
    results = []
    for length in [int(x) for x in args.lengths.split(",")]:
        rows = max(1, args.tokens_per_batch // length)
        batch = random_batch(rows, length, config.vocab_size, seed=length)
        ours_first, ours_best, ours_loss = ours.time_step(batch, args.repeats)
        # PyTorch compiles nothing: in --quick its first step is the timed one.
        hf_first, hf_best, hf_loss = hf.time_step(batch, args.repeats, warm_up=not args.quick)
        tokens = rows * (length + TARGET_LENGTH)
        results.append(
            {
                "length": length,
                "rows": rows,
                "flops": step_flops(config, rows, length, TARGET_LENGTH),
                "ours_s": ours_best,
                "ours_first_s": ours_first,
                "ours_loss": ours_loss,
                "hf_s": hf_best,
                "hf_first_s": hf_first,
                "hf_loss": hf_loss,
                "ours_tokens_per_s": tokens / ours_best,
                "hf_tokens_per_s": tokens / hf_best,
            }
        )
    return results


VARIANTS = {
    "minimal": dict(remat="minimal"),
    "full": dict(remat="full"),
    "scan": dict(scan_layers=True),
    "scan-full": dict(scan_layers=True, remat="full"),
}


def time_variants(ours, hf, config, params, results: list[dict], args) -> list[dict]:
    """The step at --variant_length with each of --variants (plus remat
    'none', reused from `results` when that length was timed), each in its
    own compiled plan, released before the next."""
    names = [n for n in args.variants.split(",") if n]
    unknown = sorted(set(names) - set(VARIANTS))
    if unknown:
        raise SystemExit(f"--variants: unknown {unknown}; choose from {sorted(VARIANTS)}")
    length = args.variant_length
    rows = max(1, args.tokens_per_batch // length)
    batch = random_batch(rows, length, config.vocab_size, seed=length)
    base = next((r for r in results if r["length"] == length), None)
    if base is None:
        base = time_lengths(
            ours, hf, config, argparse.Namespace(**dict(vars(args), lengths=str(length)))
        )[0]
    timed = [dict(base, variant="none")]
    for name in names:
        variant = Ours(config.replace(**VARIANTS[name]), params)
        first, best, loss = variant.time_step(batch, args.repeats)
        del variant
        timed.append(
            dict(
                base,
                variant=name,
                ours_s=best,
                ours_first_s=first,
                ours_loss=loss,
                ours_tokens_per_s=rows * (length + TARGET_LENGTH) / best,
            )
        )
    return timed


def print_variants(variants: list[dict], peak: float) -> None:
    """One line per variant: tokens/s, ratio to HF, share of the peak, cost vs 'none'."""
    none_s = variants[0]["ours_s"]
    for r in variants:
        r["ratio"] = r["ours_tokens_per_s"] / r["hf_tokens_per_s"]
        r["fraction_of_peak"] = r["flops"] / r["ours_s"] / peak
        r["cost_vs_none"] = r["ours_s"] / none_s
        print(
            f"variant {r['variant']:<9} length {r['length']} x {r['rows']} rows: ours "
            f"{r['ours_tokens_per_s']:8.0f} tok/s ({r['ours_s']:.2f} s/step, first "
            f"{r['ours_first_s']:.1f} s with compile), HF {r['hf_tokens_per_s']:8.0f} tok/s, ratio "
            f"{r['ratio']:.2f}x; {r['fraction_of_peak']:.0%} of peak; "
            f"{r['cost_vs_none']:.2f}x the time of remat none"
        )


def print_peak(peak: float, before: dict, after: dict) -> None:
    print(
        f"matmul peak (float32, 2048^3, best of jax/torch before and after): "
        f"{peak / 1e9:.1f} GFLOP/s "
        f"(jax {before.get('jax', 0) / 1e9:.1f}/{after.get('jax', 0) / 1e9:.1f}, "
        f"torch {before.get('torch', 0) / 1e9:.1f}/{after.get('torch', 0) / 1e9:.1f})"
    )


def print_results(results: list[dict], peak: float) -> None:
    """One line per length; adds each result's ratio and share of the peak."""
    for r in results:
        achieved = r["flops"] / r["ours_s"]
        r["ratio"] = r["ours_tokens_per_s"] / r["hf_tokens_per_s"]
        r["fraction_of_peak"] = achieved / peak
        print(
            f"length {r['length']:>5} x {r['rows']:<2} rows: "
            f"ours {r['ours_tokens_per_s']:8.0f} tok/s "
            f"({r['ours_s']:.2f} s/step, first {r['ours_first_s']:.1f} s with compile), "
            f"HF {r['hf_tokens_per_s']:8.0f} tok/s ({r['hf_s']:.2f} s/step), "
            f"ratio {r['ratio']:.2f}x; "
            f"ours {r['flops'] / 1e12:.2f} TFLOP/step = {achieved / 1e9:.1f} GFLOP/s, "
            f"{r['fraction_of_peak']:.0%} of peak"
        )


def print_packing(packing: dict, pack_length: int) -> None:
    un, pk = packing["unpacked"], packing["packed"]
    print(
        f"packing at length {pack_length} (median example {packing['lengths_median']} tokens): "
        f"unpacked {un['examples']} examples, {un['real_tokens_per_s']:.0f} real tok/s; packed "
        f"{pk['examples']} examples, {pk['real_tokens_per_s']:.0f} real tok/s; "
        f"gain {packing['gain']:.2f}x"
    )


def train_variants(results: list[dict], variants: list[dict], packing) -> dict:
    """{variant: figures}: ours and Hugging Face per length, ours per setting, packing."""
    found = {}
    for r in results:
        shape = f"{r['length']} tokens x {r['rows']} rows"
        found[f"ours, {shape}"] = {
            "tokens_per_s": r["ours_tokens_per_s"],
            "step_s": r["ours_s"],
            "first_step_s": r["ours_first_s"],
            "share_of_float32_peak": r["fraction_of_peak"],
        }
        found[f"Hugging Face, {shape}"] = {
            "tokens_per_s": r["hf_tokens_per_s"],
            "step_s": r["hf_s"],
        }
    for r in variants:
        found[f"ours, {r['variant']}, {r['length']} tokens x {r['rows']} rows"] = {
            "tokens_per_s": r["ours_tokens_per_s"],
            "step_s": r["ours_s"],
            "first_step_s": r["ours_first_s"],
            "share_of_float32_peak": r["fraction_of_peak"],
            "vs_hf": r["ratio"],
            "time_vs_remat_none": r["cost_vs_none"],
        }
    for kind in ("unpacked", "packed") if packing else ():
        found[f"ours, {kind}, real tokens"] = {
            "tokens_per_s": packing[kind]["real_tokens_per_s"],
            "examples": packing[kind]["examples"],
        }
    return found


def train_record(args, peak: float, results, variants, packing, ratio: float) -> dict:
    """This run as a benchmark record (bench/results/README.md)."""
    ratios = {f"ours / Hugging Face, {r['length']} tokens": r["ratio"] for r in results}
    ratios["ours / Hugging Face, geometric mean over lengths"] = ratio
    if packing:
        ratios["packed / unpacked, real tokens/s"] = packing["gain"]
    return make_record(
        "train",
        f"Training step, mT5-small shape with {args.layers}+{args.layers} layers, "
        "float32: ours against Hugging Face PyTorch",
        unit="tokens/s",
        primary="tokens_per_s",
        variants=train_variants(results, variants, packing),
        ratios=ratios,
        args=vars(args),
        matmul_peak_flops=peak,
        details={"results": results, "variants": variants, "packing": packing},
    )


def main(argv=None) -> int:
    args = parse_args(argv)
    wall = time.perf_counter()
    import jax
    import torch

    from seahorse_metrics.model.config import get_config

    threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    config = get_config(
        "mt5_small",
        dropout_rate=args.dropout,
        num_encoder_layers=args.layers,
        num_decoder_layers=args.layers,
    )
    print(machine_line())
    print(
        f"machine: {threads} CPUs, jax {jax.__version__} {jax.devices()[0].platform}, "
        f"torch {torch.__version__} ({threads} threads)"
    )
    print(
        f"model: mT5-small shape with {args.layers}+{args.layers} layers, "
        f"vocab {config.vocab_size}, "
        f"float32, dropout {args.dropout}; "
        f"targets {TARGET_LENGTH} tokens; {args.tokens_per_batch} input tokens per batch"
    )
    peak_before = measure_matmul_peak(repeats=2 if args.quick else 5)
    params = random_params(config, seed=0)
    ours, hf = Ours(config, params), HuggingFace(config, params, threads)
    results = time_lengths(ours, hf, config, args)
    variants = time_variants(ours, hf, config, params, results, args) if args.variants else []
    del params
    packing = (
        packing_comparison(
            ours,
            config,
            args.pack_length,
            max(1, args.tokens_per_batch // args.pack_length),
            args.repeats,
        )
        if args.pack_length
        else None
    )
    peak_after = peak_before if args.quick else measure_matmul_peak()
    peak = max(peak_before["peak"], peak_after["peak"])
    print_peak(peak, peak_before, peak_after)
    print_results(results, peak)
    if packing:
        print_packing(packing, args.pack_length)
    if variants:
        print_variants(variants, peak)
    ratio = math.exp(np.mean([math.log(r["ratio"]) for r in results]))
    print(f"wall time {time.perf_counter() - wall:.0f} s")
    record = train_record(args, peak, results, variants, packing, ratio)
    write_record(record, args.results_dir, tag="quick" if args.quick else "")
    if args.json:
        from seahorse_metrics.io.atomic import write_json_atomically

        write_json_atomically(args.json, record)
    print(f"ratio: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
