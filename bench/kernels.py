"""The matrix products of mT5-small scoring, one by one: XLA:CPU against PyTorch's BLAS.

    python bench/kernels.py            # about four minutes
    python bench/kernels.py --quick    # proves it runs

`bench/score.py` finds CTranslate2 ahead of our scoring on this CPU. Scoring
is almost all matrix products, so this times those products alone, at the
shapes the network runs (rows = tokens of a batch; mT5-small: d_model 512,
6 heads x 64, d_ff 1024), in each number format:

  xla_f32    jnp.dot in float32 (our float32 scoring)
  xla_bf16   bfloat16 inputs, float32 accumulation (our int8 mode's products)
  xla_s8     int8 inputs, int32 accumulation (what XLA:CPU offers for int8)
  torch_f32  torch.matmul in float32: PyTorch's CPU BLAS (MKL in the CPU
             wheel). CTranslate2 calls no XLA either: its wheel multiplies
             with Intel MKL on genuine Intel CPUs and with oneDNN elsewhere
             (its Python API has no bare product to time), so this stands
             for the vendor-tuned BLAS kind of kernel it runs on
  torch_s8   torch._int_mm (int8 x int8 -> int32), where this torch has it

Each figure is GFLOP/s (2*M*K*N per product, best of several runs) and its
share of the float32 2048^3 peak measured in the same run. The last lines
weigh the shapes by how often a scoring pass runs them (per encoder layer:
q, k, v, o, wi_0, wi_1, wo) and print, per format, the time of those
products for one 2048-token batch: the part of the gap the products alone
explain.

Then one self-attention of mT5-small (6 heads x 64, float32, relative
position bias and padding mask; projections not included) at 512, 1024 and
2048 tokens: today's dense form (`model.attention.dense_weights`, the
[H, L, L] logits at once), `jax.nn.dot_product_attention` given the same
bias, and the blocked form (`model.blocked_attention.blocked_attention`) at several
query blocks (the bias exact near the diagonal and two constants beyond,
where the band is at most half the keys; `strip`: every key's bias from the
strip), and query x key blocks with the online softmax; `<- chosen`
marks what `T5Config`'s defaults run at that length. Each line gives the
best wall time, the smallest process CPU time (both threads; the steadier
figure on a shared machine), the share of the matmul peak (4 * H * L^2 * 64
FLOPs over the wall time) and the same share by CPU time (FLOPs per CPU
second against the peak product's), and the largest difference from the
dense output. Run it under different `XLA_FLAGS` (e.g.
`--xla_cpu_use_onednn=true`) to compare XLA:CPU's options.

Last, the whole first-step scoring program of mT5-small (random weights, a
fifth of one row padded) at a few batch shapes, with the decoder's
cross-attention folded (`attention.folded_attention`, what the network runs)
and with its keys and values projected (`Attention.folds` patched off, a
program of its own), timed in alternating rounds; in float32, then with int8
kernels (`--quantize int8`'s network).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import (  # noqa: E402
    add_results_argument,
    best_time,
    machine_line,
    make_record,
    measure_matmul_peak,
    write_record,
)

D_MODEL, INNER, D_FF = 512, 384, 1024
# (name, K, N, products per encoder layer): the layer's kernels [K, N].
LAYER_PRODUCTS = (
    ("q/k/v", D_MODEL, INNER, 3),
    ("o", INNER, D_MODEL, 1),
    ("wi_0/wi_1", D_MODEL, D_FF, 2),
    ("wo", D_FF, D_MODEL, 1),
)
FORMATS = ("xla_f32", "xla_bf16", "xla_s8", "torch_f32", "torch_s8")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--rows", default="512,2048", help="Token rows per product (default 512,2048)."
    )
    parser.add_argument(
        "--lengths",
        default="512,1024,2048",
        help="Tokens of the timed self-attentions (default 512,1024,2048).",
    )
    parser.add_argument(
        "--folded_shapes",
        default="4x512,16x128,8x256,1x2048",
        help="Batch shapes (rows x tokens) of the folded cross-attention A/B.",
    )
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="Proves the script runs: 512 rows and tokens, 2 repeats.",
    )
    add_results_argument(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.lengths, args.repeats, args.folded_shapes = "512", "512", 2, "2x128"
    return args


def xla_product(fmt: str, a: np.ndarray, b: np.ndarray):
    """A timed call of XLA's product of `a` and `b` in `fmt`."""
    import jax
    import jax.numpy as jnp

    kinds = {
        "xla_f32": (jnp.float32, None),
        "xla_bf16": (jnp.bfloat16, jnp.float32),
        "xla_s8": (jnp.int8, jnp.int32),
    }
    dtype, accumulate = kinds[fmt]
    x, y = jax.device_put(a.astype(dtype)), jax.device_put(b.astype(dtype))
    product = jax.jit(lambda u, v: jax.lax.dot(u, v, preferred_element_type=accumulate))
    return lambda: product(x, y).block_until_ready()


def torch_product(fmt: str, a: np.ndarray, b: np.ndarray):
    """A timed call of PyTorch's product in `fmt`, or None where it has none."""
    import torch

    if fmt == "torch_f32":
        x, y = torch.from_numpy(a), torch.from_numpy(b)
        return lambda: torch.matmul(x, y)
    if not hasattr(torch, "_int_mm"):
        return None
    x, y = torch.from_numpy(a.astype(np.int8)), torch.from_numpy(b.astype(np.int8))
    try:
        torch._int_mm(x, y)
    except RuntimeError:  # no CPU kernel in this build, or these shapes refused
        return None
    return lambda: torch._int_mm(x, y)


def time_formats(rows: int, k: int, n: int, repeats: int) -> dict[str, float]:
    """GFLOP/s of a [rows, k] x [k, n] product in each format (absent: none)."""
    import torch

    rng = np.random.default_rng(rows + k + n)
    a = rng.integers(-100, 100, (rows, k)).astype(np.float32)
    b = rng.integers(-100, 100, (k, n)).astype(np.float32)
    flops = 2.0 * rows * k * n
    result = {}
    with torch.inference_mode():
        for fmt in FORMATS:
            call = (xla_product if fmt.startswith("xla") else torch_product)(fmt, a, b)
            if call is not None:
                result[fmt] = flops / best_time(call, repeats) / 1e9
    return result


def layer_time_ms(rows: int, table: dict, fmt: str) -> float:
    """Milliseconds of one encoder layer's products on `rows` tokens in `fmt`."""
    total = 0.0
    for name, k, n, count in LAYER_PRODUCTS:
        rate = table[(rows, name)].get(fmt)
        if rate is None:
            return float("nan")
        total += count * 2.0 * rows * k * n / (rate * 1e9)
    return 1e3 * total


def best_wall_and_cpu_time(function, repeats: int) -> tuple[float, float]:
    """The fastest wall time and the smallest process CPU time (all threads)
    of `repeats` calls, in seconds, after a warm-up call. On a shared machine
    the CPU time is the steadier of the two."""
    function()
    walls, cpus = [], []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        function()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return min(walls), min(cpus)


HEADS, HEAD_DIM = 6, 64  # mT5-small
# (query block, key block or None) of the blocked attention, timed at each length.
BLOCKINGS = ((32, None), (64, None), (128, None), (256, None), (128, 512), (256, 1024))
# Query blocks timed also with the bias of every key from the strip (no band).
STRIP_BLOCKS = (64, 128)


def attention_inputs(length: int, batch: int = 1):
    """Random queries, keys, values [B, L, 6, 64], a bias table per offset and
    a key padding mask (the last 5% of the tokens are padding)."""
    import jax.numpy as jnp

    from seahorse_metrics.model.attention import AttentionMask, RelativeBias
    from seahorse_metrics.model.network import relative_position_bucket

    rng = np.random.default_rng(length)
    q, k, v = (
        jnp.asarray(rng.standard_normal((batch, length, HEADS, HEAD_DIM)), jnp.float32)
        for _ in range(3)
    )
    rel_embedding = rng.standard_normal((HEADS, 32)).astype(np.float32)
    buckets = relative_position_bucket(
        np.arange(-(length - 1), length), bidirectional=True, num_buckets=32, max_distance=128
    )
    position = RelativeBias.of_buckets(jnp.asarray(rel_embedding), buckets, length, length)
    key_is_token = np.ones((batch, length), bool)
    key_is_token[:, length - length // 20 :] = False
    return q, k, v, position, AttentionMask(jnp.asarray(key_is_token))


def attention_variants(config):
    """{name: jitted attention(q, k, v, position, mask)}: today's written-out
    form (`attention.dense_weights`), the blocked form at each of `BLOCKINGS`,
    and `chosen`: what the network runs with `config`'s defaults."""
    import jax
    import jax.numpy as jnp

    from seahorse_metrics.model.attention import dense_weights, weighted_values
    from seahorse_metrics.model.blocked_attention import blocked_attention

    def dense(q, k, v, position, mask):
        weights = dense_weights(q, k, position, mask, jnp.float32)
        return weighted_values(weights, v, jnp.float32, jnp.float32, accumulate_float32=False)

    def blocked(query_block, key_block):
        return lambda q, k, v, position, mask: blocked_attention(
            q,
            k,
            v,
            position,
            mask,
            query_block=query_block,
            key_block=key_block,
            products_dtype=jnp.float32,
            output_dtype=jnp.float32,
        )

    def fused(q, k, v, position, mask):
        bias = position.dense() + mask.dense(q.shape[1], k.shape[1])
        return jax.nn.dot_product_attention(q, k, v, bias=bias, scale=1.0)

    def strip(query_block):  # the bias of every key from the strip, no band
        return lambda q, k, v, position, mask: blocked(query_block, None)(
            q, k, v, position.replace(constant_beyond=None), mask
        )

    variants = {"dense (today)": dense, "dot_product_attention": fused}
    for query_block, key_block in BLOCKINGS:
        variants[f"blocked q{query_block}" + (f" k{key_block}" if key_block else "")] = blocked(
            query_block, key_block
        )
    for query_block in STRIP_BLOCKS:
        variants[f"blocked q{query_block} strip"] = strip(query_block)
    return {name: jax.jit(function) for name, function in variants.items()}


def chosen_variant(config, length: int) -> str:
    """The name in `attention_variants` of what the network's forward pass
    without dropout (scoring) runs at `length`."""
    threshold = config.attention_forward_min_length
    if threshold is None or length < threshold:
        return "dense (today)"
    key = f" k{config.attention_key_block}" if config.attention_key_block else ""
    block = length if length <= 2 * config.attention_query_block else config.attention_query_block
    band_from = config.attention_band_min_length
    band = band_from is not None and length >= band_from
    strip = " strip" if not key and not band and block in STRIP_BLOCKS else ""
    return f"blocked q{block}{key}{strip}"


def peak_per_cpu_second(size: int = 2048, repeats: int = 5) -> float:
    """GFLOP per CPU second (all threads) of XLA's float32 size^3 product."""
    import jax
    import jax.numpy as jnp

    a = jnp.asarray(np.random.default_rng(0).standard_normal((size, size)), jnp.float32)
    product = jax.jit(lambda x, y: x @ y)
    _, cpu = best_wall_and_cpu_time(lambda: product(a, a).block_until_ready(), repeats)
    return 2.0 * size**3 / cpu / 1e9


def attention_table(lengths, repeats: int, peak_gflops: float) -> list[dict]:
    """Prints, per length, each attention variant's best wall time, best
    process CPU time, shares of the matmul peak by wall and by CPU time, and
    largest difference from the dense output, and which one `T5Config`'s
    defaults choose; returns those figures, a dict per line."""
    import jax

    from seahorse_metrics.model.config import get_config

    config = get_config("mt5_small")
    variants = attention_variants(config)
    peak_cpu_gflops = peak_per_cpu_second()
    print(f"float32 matmul peak by CPU time: {peak_cpu_gflops:.1f} GFLOP per CPU second")
    print(
        f"one self-attention (mT5-small: {HEADS} heads x {HEAD_DIM}, float32, relative bias "
        "and padding mask), % of the float32 matmul peak:"
    )
    rows = []
    for length in lengths:
        inputs = attention_inputs(length)
        flops = 4.0 * HEADS * length * length * HEAD_DIM  # q.k and weights.v
        reference = variants["dense (today)"](*inputs)
        chosen = chosen_variant(config, length)
        for name, function in variants.items():
            key_block = name.partition(" k")[2]
            if key_block and int(key_block) >= length:
                continue  # one key block: the same program as without
            wall, cpu = best_wall_and_cpu_time(
                lambda: function(*inputs).block_until_ready(), repeats
            )
            difference = float(jax.numpy.max(jax.numpy.abs(function(*inputs) - reference)))
            print(
                f"  {length:>5} {name:<21} {1e3 * wall:8.2f} ms (cpu {1e3 * cpu:8.2f} ms) "
                f"{flops / wall / 1e9 / peak_gflops:4.0%} of peak "
                f"(by cpu {flops / cpu / 1e9 / peak_cpu_gflops:4.0%})  "
                f"max diff {difference:.1e}" + ("  <- chosen" if name == chosen else "")
            )
            rows.append(
                {
                    "length": length,
                    "variant": name,
                    "ms": 1e3 * wall,
                    "cpu_ms": 1e3 * cpu,
                    "share_of_peak": flops / wall / 1e9 / peak_gflops,
                    "share_of_peak_by_cpu": flops / cpu / 1e9 / peak_cpu_gflops,
                    "max_diff": difference,
                    "chosen": "yes" if name == chosen else None,
                }
            )
    print(
        f"chosen (T5Config defaults, scoring): blocked from "
        f"{config.attention_forward_min_length} tokens (training: from "
        f"{config.attention_blocked_min_length}), {config.attention_query_block} queries per "
        f"block (up to twice that as one block when scoring), key blocks "
        f"{config.attention_key_block}, the bias in a band from "
        f"{config.attention_band_min_length} tokens (else from the strip)"
    )
    return rows


def folded_table(shapes, quantize=None, rounds: int = 5) -> list[dict]:
    """Prints, per batch shape, the first-step scoring program's best and
    median time with the cross-attention folded and projected, and their
    largest relative difference (int8 kernels with `quantize="int8"`);
    returns those figures, a dict per shape."""
    import jax
    from score import random_params

    from seahorse_metrics.model import attention_layer
    from seahorse_metrics.model.config import get_config
    from seahorse_metrics.model.model import EncoderDecoderModel
    from seahorse_metrics.model.quantize import quantize_params

    config = get_config("mt5_small", dropout_rate=0.0, quantize=quantize)
    params = random_params(config.replace(quantize=None), 0)
    params = jax.device_put(
        quantize_params(EncoderDecoderModel(config), params) if quantize else params
    )
    folds = attention_layer.Attention.folds
    print(
        f"first-step scoring program (mT5-small, {quantize or 'float32'} kernels), "
        "cross-attention folded vs projected:"
    )
    found = []
    for rows, length in shapes:
        tokens = np.random.default_rng(0).integers(5, 1000, (rows, length)).astype(np.int32)
        tokens[0, length - length // 5 :] = 0
        programs = {}
        for name in ("projected", "folded"):
            # Another config (scoring has no dropout), so another compiled program.
            model = EncoderDecoderModel(config.replace(dropout_rate=0.1 * (name == "projected")))
            attention_layer.Attention.folds = folds if name == "folded" else (lambda *_: False)
            try:
                probs = np.asarray(model.first_token_probs(params, tokens, (259, 260)))
            finally:
                attention_layer.Attention.folds = folds
            programs[name] = (model, probs)
        times = {name: [] for name in programs}
        for _ in range(rounds):
            for name, (model, _) in programs.items():
                times[name].append(
                    best_time(
                        lambda: jax.block_until_ready(
                            model.first_token_probs(params, tokens, (259, 260))
                        ),
                        3,
                    )
                )
        (_, want), (_, got) = programs["projected"], programs["folded"]
        best = {name: min(t) * 1e3 for name, t in times.items()}
        median = {name: float(np.median(t)) * 1e3 for name, t in times.items()}
        print(
            f"  {rows} x {length}: projected {best['projected']:.1f} ms (median "
            f"{median['projected']:.1f}), folded {best['folded']:.1f} ms (median "
            f"{median['folded']:.1f}): {best['projected'] / best['folded']:.2f}x, relative "
            f"difference {float(np.max(np.abs(got - want) / np.abs(want))):.1e}"
        )
        found.append(
            {
                "kernels": quantize or "float32",
                "rows": rows,
                "length": length,
                "best_ms": best,
                "median_ms": median,
                "max_rel_diff": float(np.max(np.abs(got - want) / np.abs(want))),
            }
        )
    return found


def kernels_record(args, peaks: list, table: dict, attention: list, folded: list) -> dict:
    """This run as a benchmark record (bench/results/README.md)."""
    variants, ratios = {}, {}
    for rows in sorted({rows for rows, _ in table}):
        for fmt in FORMATS:
            if all(fmt in table[(rows, name)] for name, *_ in LAYER_PRODUCTS):
                variants[f"products of an encoder layer, {rows} tokens, {fmt}"] = {
                    "ms": layer_time_ms(rows, table, fmt)
                }
    for row in attention:
        variants[f"self-attention, {row['length']} tokens, {row['variant']}"] = {
            key: value for key, value in row.items() if key not in ("length", "variant")
        }
        if row["chosen"]:
            ratios[
                f"chosen self-attention at {row['length']} tokens, share of the float32 peak"
            ] = row["share_of_peak"]
    for row in folded:
        shape = f"first step, {row['kernels']} kernels, {row['rows']} x {row['length']}"
        for form in ("projected", "folded"):
            variants[f"{shape}, {form}"] = {
                "ms": row["best_ms"][form],
                "median_ms": row["median_ms"][form],
            }
        ratios[f"{shape}: projected / folded time"] = (
            row["best_ms"]["projected"] / row["best_ms"]["folded"]
        )
    return make_record(
        "kernels",
        "mT5-small scoring's matrix products, one self-attention and the first-step "
        "program (folded against projected cross-attention)",
        unit="ms",
        primary="ms",
        variants=variants,
        ratios=ratios,
        args=vars(args),
        matmul_peak_flops=max(peaks) * 1e9,
        details={
            "products_gflops": {f"{rows} {name}": rates for (rows, name), rates in table.items()}
        },
    )


def main(argv=None) -> int:
    args = parse_args(argv)
    import jax
    import torch

    torch.set_num_threads(len(os.sched_getaffinity(0)))
    print(machine_line())
    print(
        f"machine: {len(os.sched_getaffinity(0))} CPUs, jax {jax.__version__}, "
        f"torch {torch.__version__} ({torch.get_num_threads()} threads)"
    )
    peak = measure_matmul_peak()["peak"] / 1e9
    print(f"float32 matmul peak (2048^3): {peak:.1f} GFLOP/s")
    print(f"{'rows':>5} {'product':<10} {'K x N':>11}  " + "  ".join(f"{f:>10}" for f in FORMATS))
    table = {}
    for rows in [int(r) for r in args.rows.split(",")]:
        for name, k, n, _ in LAYER_PRODUCTS:
            table[(rows, name)] = rates = time_formats(rows, k, n, args.repeats)
            cells = [
                f"{rates[f]:6.1f} {rates[f] / peak:3.0%}" if f in rates else f"{'n/a':>10}"
                for f in FORMATS
            ]
            print(f"{rows:>5} {name:<10} {f'{k}x{n}':>11}  " + "  ".join(cells))
    print("GFLOP/s and share of the float32 peak; per encoder layer, its products take:")
    for rows in [int(r) for r in args.rows.split(",")]:
        times = {fmt: layer_time_ms(rows, table, fmt) for fmt in FORMATS}
        print(f"  {rows} tokens: " + ", ".join(f"{fmt} {ms:.2f} ms" for fmt, ms in times.items()))
        print(
            f"  {rows} tokens: torch_f32 / xla_f32 time "
            f"{times['torch_f32'] / times['xla_f32']:.2f}, "
            f"xla_bf16 / xla_f32 {times['xla_bf16'] / times['xla_f32']:.2f}, "
            f"torch_s8 / xla_bf16 {times['torch_s8'] / times['xla_bf16']:.2f}"
        )
    # This machine's speed drifts between minutes (a shared host): measure the
    # peak again and weigh the attention against the larger of the two.
    again = measure_matmul_peak(repeats=10)["peak"] / 1e9
    print(
        f"float32 matmul peak measured again: {again:.1f} GFLOP/s; the attention's shares "
        f"use {max(peak, again):.1f}"
    )
    attention = attention_table(
        [int(n) for n in args.lengths.split(",")], args.repeats, max(peak, again)
    )
    shapes = [tuple(int(x) for x in shape.split("x")) for shape in args.folded_shapes.split(",")]
    folded = [row for quantize in (None, "int8") for row in folded_table(shapes, quantize)]
    write_record(
        kernels_record(args, [peak, again], table, attention, folded),
        args.results_dir,
        tag="quick" if args.quick else "",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
