"""The matrix products of mT5-small scoring, one by one: XLA:CPU against PyTorch's BLAS.

    python bench/kernels.py            # about two minutes

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
explain. Then one self-attention, written out as the network writes it
and through `jax.nn.dot_product_attention`. Run it under different
`XLA_FLAGS` (e.g. `--xla_cpu_use_onednn=true`) to compare XLA:CPU's options.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import best_time, measure_matmul_peak  # noqa: E402

D_MODEL, INNER, D_FF = 512, 384, 1024
# (name, K, N, products per encoder layer): the layer's kernels [K, N].
LAYER_PRODUCTS = (("q/k/v", D_MODEL, INNER, 3), ("o", INNER, D_MODEL, 1),
                  ("wi_0/wi_1", D_MODEL, D_FF, 2), ("wo", D_FF, D_MODEL, 1))
FORMATS = ("xla_f32", "xla_bf16", "xla_s8", "torch_f32", "torch_s8")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", default="512,2048",
                        help="Token rows per product (default 512,2048).")
    parser.add_argument("--repeats", type=int, default=20)
    return parser.parse_args(argv)


def xla_product(fmt: str, a: np.ndarray, b: np.ndarray):
    """A timed call of XLA's product of `a` and `b` in `fmt`."""
    import jax
    import jax.numpy as jnp

    kinds = {"xla_f32": (jnp.float32, None), "xla_bf16": (jnp.bfloat16, jnp.float32),
             "xla_s8": (jnp.int8, jnp.int32)}
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


def attention_ms(length: int, repeats: int) -> dict[str, float]:
    """Milliseconds of one T5 self-attention (6 heads x 64, float32 logits and
    softmax, relative bias and mask added) on `length` tokens: written out as
    the network does, and through `jax.nn.dot_product_attention`; and the
    largest difference of their outputs."""
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(length)
    q, k, v = (jnp.asarray(rng.standard_normal((1, length, 6, 64)), jnp.float32) for _ in range(3))
    bias = jnp.asarray(rng.standard_normal((1, 6, length, length)), jnp.float32)

    def written_out(q, k, v, bias):
        logits = jnp.einsum("bqhv,bkhv->bhqk", q, k, preferred_element_type=jnp.float32) + bias
        return jnp.einsum("bhqk,bkhv->bqhv", jax.nn.softmax(logits, axis=-1), v)

    def fused(q, k, v, bias):
        return jax.nn.dot_product_attention(q, k, v, bias=bias, scale=1.0)

    result = {}
    for name, function in (("written_out", written_out), ("dot_product_attention", fused)):
        compiled = jax.jit(function)
        result[name] = 1e3 * best_time(lambda: compiled(q, k, v, bias).block_until_ready(), repeats)
    result["max_difference"] = float(jnp.max(jnp.abs(jax.jit(written_out)(q, k, v, bias)
                                                      - jax.jit(fused)(q, k, v, bias))))
    return result


def main(argv=None) -> int:
    args = parse_args(argv)
    import jax
    import torch

    torch.set_num_threads(len(os.sched_getaffinity(0)))
    print(f"machine: {len(os.sched_getaffinity(0))} CPUs, jax {jax.__version__}, "
          f"torch {torch.__version__} ({torch.get_num_threads()} threads)")
    peak = measure_matmul_peak()["peak"] / 1e9
    print(f"float32 matmul peak (2048^3): {peak:.1f} GFLOP/s")
    print(f"{'rows':>5} {'product':<10} {'K x N':>11}  " + "  ".join(f"{f:>10}" for f in FORMATS))
    table = {}
    for rows in [int(r) for r in args.rows.split(",")]:
        for name, k, n, _ in LAYER_PRODUCTS:
            table[(rows, name)] = rates = time_formats(rows, k, n, args.repeats)
            cells = [f"{rates[f]:6.1f} {rates[f] / peak:3.0%}" if f in rates else f"{'n/a':>10}"
                     for f in FORMATS]
            print(f"{rows:>5} {name:<10} {f'{k}x{n}':>11}  " + "  ".join(cells))
    print("GFLOP/s and share of the float32 peak; per encoder layer, its products take:")
    for rows in [int(r) for r in args.rows.split(",")]:
        times = {fmt: layer_time_ms(rows, table, fmt) for fmt in FORMATS}
        print(f"  {rows} tokens: " + ", ".join(f"{fmt} {ms:.2f} ms" for fmt, ms in times.items()))
        print(f"  {rows} tokens: torch_f32 / xla_f32 time {times['torch_f32'] / times['xla_f32']:.2f}, "
              f"xla_bf16 / xla_f32 {times['xla_bf16'] / times['xla_f32']:.2f}, "
              f"torch_s8 / xla_bf16 {times['torch_s8'] / times['xla_bf16']:.2f}")
    for length in (558, 2048):
        times = attention_ms(length, args.repeats)
        print(f"attention on {length} tokens: written out {times['written_out']:.2f} ms, "
              f"jax.nn.dot_product_attention {times['dot_product_attention']:.2f} ms "
              f"(outputs differ by at most {times['max_difference']:.1e})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
