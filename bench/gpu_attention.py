"""cuDNN's fused attention on a GPU, against XLA's and ours: agreement and speed.

    python bench/gpu_attention.py            # on a CUDA GPU: about ten minutes on an H100
    python bench/gpu_attention.py --skip_attention   # the whole networks only
    python bench/gpu_attention.py --quick    # proves it runs (on CPU: no cuDNN lines)

On GPUs, 16-bit attention without dropout runs in cuDNN's fused kernel
(`model.attention.uses_cudnn`): T5's relative position bias goes in as a
[1, H, Q, K] bias and the key padding as each row's number of keys. This
measures, in bfloat16 products:

1. The bfloat16 matrix-product peak of the device (an 8192^3 `jnp.dot`).
2. One self-attention (64-dim heads, relative position bias, padded rows),
   with the heads of mT5-small (6), mT5-large (16) and mT5-XXL (64):
     cudnn        `attention.cudnn_attention` (what the network runs on GPUs)
     xla          the same `jax.nn.dot_product_attention` call, implementation="xla"
     ours dense   `dense_weights` + `weighted_values` (the [B, H, L, L] logits at once)
     ours blocked `blocked_attention`, 128 queries a block, the bias in a band
   Each line: forward time and its share of the peak (4 * B * H * L^2 * 64
   FLOPs), forward+backward time (the gradient of q, k, v and the bias table;
   counted as 3.5 times the forward's FLOPs), and the relative error
   ||out - ref|| / ||ref|| of the output and of each gradient against a float32
   reference at full float32 precision (the dense form on upcast inputs).
3. The whole network with random weights (mT5-small, mT5-large): the
   scorer's first-step program (`first_token_probs`) on rows of 2048 tokens,
   and a training gradient (`loss`, no dropout) on rows of 1024, in float32
   at full precision (no TF32: the reference), and in bfloat16 with cuDNN on
   and off (off: `uses_cudnn` patched to False, so our blocked form runs).
   Each line: examples/s, the gradient's time, the largest difference of
   log P("1") and log P("0") from float32's, and the gradient's relative error.

A float32 network does not use cuDNN (its kernel takes 16-bit inputs only).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import add_results_argument, make_record, write_record  # noqa: E402

HEAD_DIM = 64
# (model, heads, length, batch) of the single-attention table.
ATTENTION_SHAPES = (
    ("mT5-small", 6, 512, 16),
    ("mT5-small", 6, 2048, 4),
    ("mT5-large", 16, 2048, 4),
    ("mT5-XXL", 64, 2048, 2),
)
# (config name, scoring rows of 2048 tokens, training rows of 1024 tokens).
NETWORKS = (("mt5_small", 16, 8), ("mt5_large", 8, 4))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="Tiny shapes and one repeat: proves the script runs."
    )
    parser.add_argument("--repeats", type=int, default=10, help="Timed runs per figure (10).")
    parser.add_argument("--json", default=None, help="Also write every figure to this file.")
    parser.add_argument(
        "--skip_attention", action="store_true", help="Only the peak and the whole networks."
    )
    add_results_argument(parser)
    return parser.parse_args(argv)


def timed(function, repeats: int) -> float:
    """Median seconds of `function()` (its result waited for) after one warm-up run."""
    import jax

    jax.block_until_ready(function())
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(function())
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def relative_error(got, want) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))


def header() -> dict:
    import jax

    device = jax.devices()[0]
    info = {
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "device": getattr(device, "device_kind", str(device)),
    }
    try:
        from jax._src.lib import cuda_versions

        info["cudnn"] = cuda_versions.cudnn_get_version() if cuda_versions else None
    except Exception:  # no CUDA plugin: a CPU run
        info["cudnn"] = None
    print(f"jax {info['jax']} on {info['backend']}: {info['device']}; cuDNN {info['cudnn']}")
    return info


def peak_tflops(size: int, repeats: int) -> float:
    import jax
    import jax.numpy as jnp

    a, b = (jax.random.normal(jax.random.key(i), (size, size), jnp.bfloat16) for i in (1, 2))
    product = jax.jit(lambda x, y: jnp.dot(x, y, preferred_element_type=jnp.float32))
    seconds = timed(lambda: product(a, b), repeats)
    peak = 2 * size**3 / seconds / 1e12
    print(f"bfloat16 {size}^3 product: {seconds * 1e3:.2f} ms, {peak:.1f} TFLOP/s (the peak below)")
    return peak


def attention_inputs(heads: int, length: int, batch: int):
    """bfloat16 q, k, v [B, L, H, 64], a bias table [H, 32] and key padding
    (row b keeps L - b * L / (4B) tokens)."""
    import jax
    import jax.numpy as jnp

    from seahorse_metrics.model.network import relative_position_bucket

    keys = jax.random.split(jax.random.key(length * heads), 4)
    q, k, v = (
        jax.random.normal(key, (batch, length, heads, HEAD_DIM), jnp.bfloat16) for key in keys[:3]
    )
    table = jax.random.normal(keys[3], (heads, 32), jnp.float32)
    buckets = relative_position_bucket(
        np.arange(-(length - 1), length), bidirectional=True, num_buckets=32, max_distance=128
    )
    tokens = length - np.arange(batch) * (length // (4 * batch))
    key_is_token = jnp.asarray(np.arange(length)[None, :] < tokens[:, None])
    return (q, k, v, table), buckets, key_is_token


def attention_forms(buckets, key_is_token, length: int) -> dict:
    """{name: attention(q, k, v, table) -> [B, L, H, 64]}; `reference` in float32."""
    import jax
    import jax.numpy as jnp

    from seahorse_metrics.model.attention import (
        AttentionMask,
        RelativeBias,
        cudnn_attention,
        dense_weights,
        weighted_values,
    )
    from seahorse_metrics.model.blocked_attention import blocked_attention

    mask = AttentionMask(key_is_token)

    def position(table):
        return RelativeBias.of_buckets(table, buckets, length, length)

    def fused(implementation):
        return lambda q, k, v, table: cudnn_attention(
            q, k, v, position(table), mask, jnp.bfloat16, jnp.bfloat16, implementation
        )

    def dense(dtype):
        def form(q, k, v, table):
            weights = dense_weights(q, k, position(table), mask, dtype)
            return weighted_values(weights, v, dtype, dtype, accumulate_float32=True)

        return form

    def blocked(q, k, v, table):
        return blocked_attention(
            q,
            k,
            v,
            position(table),
            mask,
            query_block=128,
            key_block=None,
            products_dtype=jnp.bfloat16,
            output_dtype=jnp.bfloat16,
        )

    def reference(q, k, v, table):
        with jax.default_matmul_precision("float32"):
            return dense(jnp.float32)(*(x.astype(jnp.float32) for x in (q, k, v)), table)

    forms = {"xla": fused("xla"), "ours dense": dense(jnp.bfloat16), "ours blocked": blocked}
    if jax.default_backend() == "gpu":
        forms = {"cudnn": fused("cudnn"), **forms}
    return forms, reference


def with_gradient(form):
    """f(q, k, v, table, cotangent) -> (gradients of q, k, v and the table of
    sum(output * cotangent), output). The cotangent is an argument: closed
    over, it would be a constant that XLA folds for seconds."""
    import jax
    import jax.numpy as jnp

    def objective(q, k, v, table, cotangent):
        out = form(q, k, v, table)
        return jnp.sum(out.astype(jnp.float32) * cotangent), out

    return jax.grad(objective, argnums=(0, 1, 2, 3), has_aux=True)


def attention_table(shapes, peak: float, repeats: int) -> list[dict]:
    import jax

    rows = []
    for model, heads, length, batch in shapes:
        inputs, buckets, key_is_token = attention_inputs(heads, length, batch)
        forms, reference = attention_forms(buckets, key_is_token, length)
        cotangent = jax.random.normal(jax.random.key(7), inputs[0].shape)
        want_grads, want = jax.jit(with_gradient(reference))(*inputs, cotangent)
        flops = 4 * batch * heads * length**2 * HEAD_DIM
        print(
            f"{model} attention, {batch} x {length} tokens, {heads} heads "
            f"({flops / 1e9:.0f} GFLOP forward):"
        )
        for name, form in forms.items():
            try:
                forward, backward = jax.jit(form), jax.jit(with_gradient(form))
                out = forward(*inputs)
                grads, _ = backward(*inputs, cotangent)
                row = dict(
                    model=model,
                    heads=heads,
                    length=length,
                    batch=batch,
                    form=name,
                    forward_ms=timed(lambda: forward(*inputs), repeats) * 1e3,
                    train_ms=timed(lambda: backward(*inputs, cotangent), repeats) * 1e3,
                    error=relative_error(out, want),
                    grad_errors=[relative_error(g, w) for g, w in zip(grads, want_grads)],
                )
            except Exception as error:  # a form this device refuses: say so, go on
                print(f"  {name:13s} failed: {type(error).__name__}: {str(error)[:300]}")
                continue
            row["forward_share"] = flops / (row["forward_ms"] / 1e3) / 1e12 / peak
            row["train_share"] = 3.5 * flops / (row["train_ms"] / 1e3) / 1e12 / peak
            rows.append(row)
            print(
                f"  {name:13s} forward {row['forward_ms']:8.3f} ms ({row['forward_share']:5.1%})"
                f"  +backward {row['train_ms']:8.3f} ms ({row['train_share']:5.1%})"
                f"  error {row['error']:.1e}, gradients (q k v bias) "
                + " ".join(f"{e:.1e}" for e in row["grad_errors"])
            )
    return rows


def random_params(model, seed: int):
    """T5-style random float32 weights, drawn on the device (the query kernel
    scaled by d_kv^-0.5 as T5 initialises it: unscaled, the logits of random
    weights are so large that bfloat16 rounding changes a score's log by 1-2)."""
    import jax
    import jax.numpy as jnp

    shapes = model.abstract_params()
    leaves, tree = jax.tree_util.tree_flatten_with_path(shapes)
    keys = jax.random.split(jax.random.key(seed), len(leaves))
    values = []
    for (path, leaf), key in zip(leaves, keys):
        name = "/".join(str(getattr(k, "key", k)) for k in path)
        if name.endswith("scale"):
            values.append(jnp.ones(leaf.shape, jnp.float32))
            continue
        fan_in = leaf.shape[1] if "rel_embedding" in name else leaf.shape[0]
        scale = 1.0 if "token_embedder" in name else fan_in**-0.5
        if name.endswith("query/kernel"):
            scale *= model.config.d_kv**-0.5
        values.append(jax.random.normal(key, leaf.shape, jnp.float32) * scale)
    return jax.tree_util.tree_unflatten(tree, values)


def measured(model, params, tokens, grad, repeats: int) -> dict:
    """log P("1"), P("0") of the first step, the flat gradient, and both times."""
    import jax
    import jax.numpy as jnp

    def score():
        return model.first_token_probs(params, tokens, (259, 260))

    gradient = np.concatenate(
        [np.asarray(g, np.float32).ravel() for g in jax.tree_util.tree_leaves(grad(params))]
    )
    return dict(
        log_p=np.asarray(jnp.log(score())),
        gradient=gradient,
        score_s=timed(score, repeats),
        train_s=timed(lambda: grad(params), repeats),
    )


# (label, compute dtype, whether `uses_cudnn` is left as it is) of the network rows.
NETWORK_VARIANTS = (
    ("float32", "float32", True),
    ("bfloat16, cuDNN", "bfloat16", True),
    ("bfloat16, ours", "bfloat16", False),
)


def network_rows(
    name: str, score_rows: int, train_rows: int, score_length: int, train_length: int, repeats: int
) -> list[dict]:
    """The scorer's first step and a training gradient in float32 (the
    reference), and in bfloat16 with cuDNN on and off."""
    import jax

    from seahorse_metrics.model import attention_layer
    from seahorse_metrics.model.config import get_config
    from seahorse_metrics.model.model import EncoderDecoderModel

    params = random_params(EncoderDecoderModel(get_config(name)), 0)
    rng = np.random.default_rng(0)
    tokens = rng.integers(5, 30000, (score_rows, score_length)).astype(np.int32)
    tokens[1::2, score_length - score_length // 5 :] = 0  # every other row padded
    batch = {
        "encoder_input_tokens": tokens[:train_rows, :train_length],
        "decoder_input_tokens": np.zeros((train_rows, 2), np.int32),
        "decoder_target_tokens": np.tile(np.array([[259, 1]], np.int32), (train_rows, 1)),
    }
    original, rows = attention_layer.uses_cudnn, []
    for label, dtype, cudnn in NETWORK_VARIANTS:
        model = EncoderDecoderModel(get_config(name, dtype=dtype, dropout_rate=0.0))
        attention_layer.uses_cudnn = original if cudnn else (lambda *_: False)
        jax.clear_caches()  # trace again under the patch
        grad = jax.jit(jax.grad(lambda p: model.loss(p, batch)[0]))
        try:
            with jax.default_matmul_precision("float32" if dtype == "float32" else None):
                rows.append(measured(model, params, tokens, grad, repeats))
        finally:
            attention_layer.uses_cudnn = original
        rows[-1].update(
            network=name,
            variant=label,
            score_rows=score_rows,
            score_length=score_length,
            train_rows=train_rows,
            train_length=train_length,
        )
    want_log_p, want_gradient = rows[0]["log_p"], rows[0]["gradient"]
    for row in rows:
        row["log_p_difference"] = float(np.max(np.abs(row.pop("log_p") - want_log_p)))
        row["grad_error"] = relative_error(row.pop("gradient"), want_gradient)
    for row in rows:
        print(
            f"{name} {row['variant']:16s} scoring {score_rows} x {score_length}: "
            f"{score_rows / row['score_s']:8.2f} examples/s; gradient {train_rows} x "
            f"{train_length}: {row['train_s'] * 1e3:7.1f} ms; max |log P - float32's| "
            f"{row['log_p_difference']:.1e}, gradient error {row['grad_error']:.1e}"
        )
    return rows


def gpu_record(args, figures: dict) -> dict:
    """The figures so far as a benchmark record (bench/results/README.md)."""
    variants, ratios = {}, {}
    for row in figures.get("attention", []):
        variants[f"{row['model']} attention, {row['batch']} x {row['length']}, {row['form']}"] = {
            "forward_ms": row["forward_ms"],
            "forward_and_backward_ms": row["train_ms"],
            "forward_share_of_bf16_peak": row["forward_share"],
            "error": row["error"],
        }
    for name, _, _ in NETWORKS:
        rows = {row["variant"]: row for row in figures.get(name, [])}
        for label, row in rows.items():
            variants[f"{name}, {label}, scoring {row['score_rows']} x {row['score_length']}"] = {
                "examples_per_s": row["score_rows"] / row["score_s"],
                "gradient_ms": row["train_s"] * 1e3,
                "max_abs_log_p_diff_vs_float32": row["log_p_difference"],
                "gradient_relative_error": row["grad_error"],
            }
        if "bfloat16, cuDNN" in rows and "bfloat16, ours" in rows:
            ratios[f"{name} scoring, cuDNN / ours (bfloat16)"] = (
                rows["bfloat16, ours"]["score_s"] / rows["bfloat16, cuDNN"]["score_s"]
            )
    machine = figures["machine"]
    return make_record(
        "gpu_attention",
        "cuDNN's fused attention against XLA's and ours, and whole networks "
        "in bfloat16 with cuDNN on and off",
        unit="ms",
        primary="forward_ms",
        variants=variants or {"bfloat16 product peak": {"tflops": figures["peak_tflops"]}},
        ratios=ratios,
        args=vars(args),
        device={
            "kind": machine["device"],
            "platform": machine["backend"],
            "cudnn": machine["cudnn"],
            "bf16_product_peak_flops": figures["peak_tflops"] * 1e12,
        },
    )


def main(argv=None) -> int:
    args = parse_args(argv)
    figures = {"machine": header()}
    repeats = 1 if args.quick else args.repeats
    if figures["machine"]["backend"] != "gpu":
        print("no GPU: cuDNN is not run; the XLA and our forms only")
    figures["peak_tflops"] = peak_tflops(512 if args.quick else 8192, repeats)
    shapes = (("tiny", 2, 256, 2),) if args.quick else ATTENTION_SHAPES
    sections = (
        []
        if args.skip_attention
        else [("attention", lambda: attention_table(shapes, figures["peak_tflops"], repeats))]
    )
    for name, score_rows, train_rows in NETWORKS[:1] if args.quick else NETWORKS:
        sizes = (2, 2, 256, 128) if args.quick else (score_rows, train_rows, 2048, 1024)
        sections.append(
            (
                name,
                lambda name=name, sizes=sizes: network_rows(
                    name, sizes[0], sizes[1], sizes[2], sizes[3], repeats
                ),
            )
        )
    from seahorse_metrics.io.atomic import write_json_atomically

    record_path = None
    for name, section in sections:
        start = time.perf_counter()
        try:
            figures[name] = section()
        except Exception:  # report, and go on to the next section
            traceback.print_exc()
            print(f"{name}: failed (above)")
        print(f"({name}: {time.perf_counter() - start:.0f} s)", flush=True)
        # After each section, so a run cut short keeps what it measured.
        record = gpu_record(args, figures)
        if record_path is None:
            record_path = write_record(record, args.results_dir)
        else:
            write_json_atomically(record_path, record)
        if args.json:  # after each section, so a run cut short keeps what it measured
            with open(args.json, "w", encoding="utf-8") as out:
                json.dump(figures, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
