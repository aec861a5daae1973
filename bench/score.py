"""Scoring throughput: seahorse-metrics vs Hugging Face PyTorch, mT5-small shape.

    python bench/score.py            # N=64 examples, lengths 100-2048 tokens
    python bench/score.py --quick    # a smoke run in under a minute

One run, one process, same random weights (mT5-small: 8+8 layers, d_model
512, the real 250112-row vocabulary), same token ids, float32 everywhere:

  hf_batch1   the model card's way: one pair per forward pass
  hf_padded   batches of --hf_batch_size in input order, padded to the longest
  hf_sorted   the same batches after sorting by length
  ours        `seahorse_metrics.Scorer` (length buckets, compiled once per shape)

The HF variants run a forward pass with the decoder start token (cheaper
than `generate`) and read P("1") from the softmax, as ours does. Every
variant's time includes tokenisation (the same `encode_pair` truncation).
Ours is timed after its shapes are compiled; the compile time is printed
separately. Articles are log-normal in length (100-2048 tokens, median
~500, like SEAHORSE's sources), built from the bundled sample's articles and
tokenised with the bundled sample vocabulary (its ids are a subset of the
250112 rows, so the compute is exactly mT5-small's).

Prints examples/s per variant, ours over the best HF variant, the model
FLOP/s achieved (real tokens only, padding not counted) against a float32
matmul peak measured in the same run, checks that all scores agree to 1e-4
(relative), and ends with `ratio: N.NNx`.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.setdefault("USE_TF", "0")  # transformers must not import TensorFlow
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import measure_matmul_peak  # noqa: E402

SAMPLE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "seahorse_metrics", "data", "sample")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=64, help="Examples (default 64).")
    parser.add_argument("--quick", action="store_true",
                        help="12 examples of 100-512 tokens, three buckets: under a minute.")
    parser.add_argument("--min_length", type=int, default=100)
    parser.add_argument("--max_length", type=int, default=2048)
    parser.add_argument("--median_length", type=int, default=500)
    parser.add_argument("--hf_batch_size", type=int, default=8)
    parser.add_argument("--batch_size", type=int, default=32, help="Our most rows per batch.")
    parser.add_argument("--max_batch_tokens", type=int, default=None,
                        help="Our tokens per batch (default: the library's).")
    parser.add_argument("--rounds", type=int, default=2,
                        help="Every variant runs once per round, in rotating order; the best "
                             "round counts (the machine may be shared). Default 2, --quick 1.")
    parser.add_argument("--buckets", default=None, help="Our bucket lengths, comma-separated.")
    parser.add_argument("--skip_batch1", action="store_true",
                        help="Skip the (slowest) batch-1 HF variant.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="Also write the results here.")
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.max_length, args.median_length, args.rounds = 12, 512, 250, 1
        args.buckets = args.buckets or "128,256,512"
    return args


# ------------------------------------------------------------------ model
def random_params(config, seed: int) -> dict:
    """T5-style random float32 weights for `config`, in our parameter layout."""
    from seahorse_metrics.model.model import EncoderDecoderModel

    rng = np.random.default_rng(seed)
    shapes = EncoderDecoderModel(config).abstract_params()

    def draw(path, leaf):
        name = "/".join(str(getattr(k, "key", k)) for k in path)
        if name.endswith("scale"):
            return np.ones(leaf.shape, np.float32)
        if "embedding" in name and "token_embedder" in name:
            return rng.standard_normal(leaf.shape, dtype=np.float32)
        fan_in = leaf.shape[0] if "rel_embedding" not in name else leaf.shape[1]
        values = rng.standard_normal(leaf.shape, dtype=np.float32)
        values *= np.float32(fan_in ** -0.5)
        if name.endswith("query/kernel"):
            values *= np.float32(config.d_kv ** -0.5)
        return values

    import jax

    return jax.tree_util.tree_map_with_path(draw, shapes)


def hf_model(config, params):
    """The same weights in `MT5ForConditionalGeneration` (eval mode)."""
    import torch
    import transformers
    from transformers.modeling_utils import no_init_weights

    from seahorse_metrics.checkpoints.hf import config_to_hf, hf_tensors_from_params

    hf_config = transformers.MT5Config(**{k: v for k, v in config_to_hf(config).items()
                                          if k not in ("architectures", "torch_dtype")})
    with no_init_weights():
        model = transformers.MT5ForConditionalGeneration(hf_config)
    tensors = {name: torch.from_numpy(np.ascontiguousarray(value))
               for name, value in hf_tensors_from_params(config, params).items()}
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    tied = {"encoder.embed_tokens.weight", "decoder.embed_tokens.weight"}
    if set(missing) - tied or unexpected:
        raise RuntimeError(f"weights do not map: missing {missing}, unexpected {unexpected}")
    return model.eval()


# ------------------------------------------------------------------ inputs
def make_inputs(n: int, min_length: int, max_length: int, median: int, seed: int, tokenizer):
    """Articles with log-normal token lengths in [min, max], and summaries."""
    rng = np.random.default_rng(seed)
    with open(os.path.join(SAMPLE_DIR, "seahorse", "articles.jsonl"), encoding="utf-8") as f:
        sentences = [s for line in f for s in json.loads(line)["text"].split(". ") if s]
    with open(os.path.join(SAMPLE_DIR, "seahorse", "validation.tsv"), encoding="utf-8") as f:
        summaries = [line.split("\t")[2] for line in list(f)[1:]]
    targets = np.clip(np.exp(rng.normal(np.log(median), 0.7, n)), min_length, max_length)
    premises, hypotheses = [], []
    for target in targets.astype(int):
        parts, length = [], 0
        start = int(rng.integers(len(sentences)))
        while length < target:
            sentence = sentences[(start + len(parts)) % len(sentences)] + "."
            parts.append(sentence)
            length += len(tokenizer.encode(sentence))
        premises.append(" ".join(parts))
        hypotheses.append(summaries[int(rng.integers(len(summaries)))])
    return premises, hypotheses


def model_flops(config, length: int) -> float:
    """Forward FLOPs of scoring one input of `length` real tokens (encoder,
    one decoder step with cross-attention over the input, output head)."""
    d, inner, ff = config.d_model, config.inner_dim, config.d_ff
    encoder_layer = 2 * length * (4 * d * inner + 3 * d * ff) + 4 * length * length * inner
    decoder_layer = (2 * (4 * d * inner + 3 * d * ff)  # self-attn q,k,v,o + MLP, one position
                     + 2 * 2 * d * inner  # cross-attn q, o
                     + 2 * 2 * length * d * inner  # cross-attn keys and values
                     + 4 * length * inner)  # cross-attention scores and mix
    return (config.num_encoder_layers * encoder_layer + config.num_decoder_layers * decoder_layer
            + 2 * d * config.vocab_size)


# ------------------------------------------------------------------ variants
def hf_scores(model, token_ids, batches, one_id):
    """P("1") per example, running `batches` (lists of example indices)."""
    import torch

    scores = np.zeros(len(token_ids))
    with torch.inference_mode():
        for rows in batches:
            width = max(len(token_ids[i]) for i in rows)
            ids = torch.zeros((len(rows), width), dtype=torch.long)
            mask = torch.zeros((len(rows), width), dtype=torch.long)
            for r, i in enumerate(rows):
                ids[r, :len(token_ids[i])] = torch.tensor(token_ids[i])
                mask[r, :len(token_ids[i])] = 1
            logits = model(input_ids=ids, attention_mask=mask,
                           decoder_input_ids=torch.zeros((len(rows), 1), dtype=torch.long)).logits
            log_probs = torch.log_softmax(logits[:, 0].float(), dim=-1)
            scores[rows] = log_probs[:, one_id].exp().numpy()
    return scores


def run_hf_variant(name, model, tokenizer, premises, hypotheses, max_length, batch_size, one_id):
    from seahorse_metrics.data.inputs import encode_pair

    start = time.perf_counter()
    token_ids = [encode_pair(tokenizer, p, h, max_length).ids for p, h in zip(premises, hypotheses)]
    order = list(range(len(token_ids)))
    if name == "hf_sorted":
        order.sort(key=lambda i: len(token_ids[i]))
    size = 1 if name == "hf_batch1" else batch_size
    batches = [order[i:i + size] for i in range(0, len(order), size)]
    scores = hf_scores(model, token_ids, batches, one_id)
    return scores, time.perf_counter() - start


def main(argv=None) -> int:
    args = parse_args(argv)
    import jax
    import torch

    from seahorse_metrics.data.inputs import encode_pair
    from seahorse_metrics.data.vocab import SentencePieceTokenizer
    from seahorse_metrics.model.config import get_config
    from seahorse_metrics.model.model import EncoderDecoderModel
    from seahorse_metrics.scoring.scorer import Scorer

    torch.set_num_threads(os.cpu_count() or 1)
    wall = time.perf_counter()
    config = get_config("mt5_small", dropout_rate=0.0)
    vocab_path = os.path.join(SAMPLE_DIR, "spiece.model")
    tokenizer = SentencePieceTokenizer(vocab_path)
    print(f"machine: {os.cpu_count()} CPUs, jax {jax.__version__} {jax.devices()[0].platform}, "
          f"torch {torch.__version__} ({torch.get_num_threads()} threads)")
    params = random_params(config, args.seed)
    hf = hf_model(config, params)
    buckets = [int(b) for b in args.buckets.split(",")] if args.buckets else None
    batching = {"max_batch_tokens": args.max_batch_tokens} if args.max_batch_tokens else {}
    scorer = Scorer(EncoderDecoderModel(config), params, vocab_path,
                    max_input_length=args.max_length, batch_size=args.batch_size,
                    bucket_lengths=buckets, window_size=max(args.n, 1), **batching)
    del params
    premises, hypotheses = make_inputs(args.n, args.min_length, args.max_length,
                                       args.median_length, args.seed, tokenizer)
    lengths = [len(encode_pair(tokenizer, p, h, args.max_length).ids)
               for p, h in zip(premises, hypotheses)]
    total_flops = sum(model_flops(config, length) for length in lengths)
    print(f"model: mT5-small shape, vocab {config.vocab_size}, float32; {args.n} examples, "
          f"input tokens min/median/max {min(lengths)}/{int(np.median(lengths))}/{max(lengths)}, "
          f"{total_flops / args.n / 1e9:.1f} GFLOP per example")

    start = time.perf_counter()
    scorer.precompile(max_length=max(lengths))
    compile_seconds = time.perf_counter() - start
    peak = measure_matmul_peak()

    results = {}
    variants = ["hf_padded", "hf_sorted", "ours"] + ([] if args.skip_batch1 else ["hf_batch1"])
    for round_index in range(args.rounds):
        shift = round_index % len(variants)
        for name in variants[shift:] + variants[:shift]:
            if name == "ours":
                start = time.perf_counter()
                output = scorer.score_detailed(premises, hypotheses, show_progress=False)
                seconds = time.perf_counter() - start
                scores = output.scores["score"].astype(np.float64)
                padding = output.stats.summary()["padding_fraction"]
            else:
                scores, seconds = run_hf_variant(name, hf, tokenizer, premises, hypotheses,
                                                 args.max_length, args.hf_batch_size,
                                                 scorer.positive_id)
            if name not in results or seconds < results[name]["seconds"]:
                results[name] = {"seconds": seconds, "examples_per_s": args.n / seconds,
                                 "flops_per_s": total_flops / seconds, "scores": scores}
    peak_after = measure_matmul_peak()
    matmul_peak = max(peak["peak"], peak_after["peak"])

    print(f"matmul peak (float32, 2048^3, best of jax/torch before and after): "
          f"{matmul_peak / 1e9:.1f} GFLOP/s  (jax {peak.get('jax', 0) / 1e9:.1f}/"
          f"{peak_after.get('jax', 0) / 1e9:.1f}, torch {peak.get('torch', 0) / 1e9:.1f}/"
          f"{peak_after.get('torch', 0) / 1e9:.1f})")
    print(f"ours: compiled {len(scorer.multi.batching().shapes())} bucket shapes up to "
          f"{max(lengths)} tokens in {compile_seconds:.1f} s (not in the timing below); "
          f"padding {padding:.1%} of batch tokens")
    print(f"{'variant':<11} {'seconds':>8} {'examples/s':>11} {'GFLOP/s':>8} {'of peak':>8}")
    for name in variants:
        r = results[name]
        print(f"{name:<11} {r['seconds']:8.2f} {r['examples_per_s']:11.3f} "
              f"{r['flops_per_s'] / 1e9:8.1f} {r['flops_per_s'] / matmul_peak:8.1%}")

    reference = results["ours"]["scores"]
    agreement = {name: float(np.max(np.abs(results[name]["scores"] - reference)
                                    / np.abs(results[name]["scores"])))
                 for name in variants if name != "ours"}
    worst = max(agreement.values())
    print("max relative score difference vs ours: "
          + ", ".join(f"{k} {v:.1e}" for k, v in agreement.items())
          + f" -> {'OK' if worst <= 1e-4 else 'FAIL'} (tolerance 1e-4)")
    best_hf = max((n for n in variants if n != "ours"), key=lambda n: results[n]["examples_per_s"])
    ratio = results["ours"]["examples_per_s"] / results[best_hf]["examples_per_s"]
    print(f"ours vs best HF ({best_hf}): {ratio:.2f}x; ours at "
          f"{results['ours']['flops_per_s'] / matmul_peak:.0%} of the matmul peak; "
          f"wall time {time.perf_counter() - wall:.0f} s")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"args": vars(args), "matmul_peak": matmul_peak, "compile_s": compile_seconds,
                       "agreement": agreement, "ratio": ratio,
                       "results": {k: {kk: vv for kk, vv in v.items() if kk != "scores"}
                                   for k, v in results.items()}}, handle, indent=2)
    print(f"ratio: {ratio:.2f}x")
    return 0 if worst <= 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
