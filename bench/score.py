"""Scoring throughput: seahorse-metrics vs Hugging Face PyTorch and CTranslate2, mT5-small shape.

    pip install -e ".[bench]"        # torch, transformers, ctranslate2 (CPU wheels)
    python bench/score.py            # N=64 examples, lengths 100-2048 tokens
    python bench/score.py --quick    # a smoke run in about a minute

One run, one process, same random weights (mT5-small: 8+8 layers, d_model
512, the real 250112-row vocabulary), same token ids, the same number of
threads everywhere (one per CPU):

  hf_batch1    the model card's way: one pair per forward pass (float32)
  hf_padded    batches of --hf_batch_size in input order, padded to the longest
  hf_sorted    the same batches after sorting by length
  ct2_float32  CTranslate2 `Translator.score_batch`, float32, batches of
               --ct2_batch_tokens tokens (CTranslate2 sorts by length itself),
               as many computing side by side as there are cores, one core
               each (`inter_threads`; measured faster here than all cores on
               one batch: --ct2_threads_per_batch 2 gives the other)
  ct2_int8     the same with int8 weights and int8 GEMMs (`compute_type="int8"`)
  ours         `seahorse_metrics.Scorer`, float32 (length buckets, compiled
               once per shape; with --cpu_devices 2, each batch split over
               two XLA:CPU devices, as `score --cpu_devices 2`)
  ours_packed  the same with `packing=True` (short inputs fill other rows'
               padding; block-diagonal attention), float32
  ours_int8    `quantize="int8"`: int8 attention and feed-forward kernels
               with per-channel scales, products in bfloat16
  ours_int8_packed  both
  ours_ct2_float32  our front end (the same buckets, batches and tokenisation)
               on the ctranslate2 engine (`engine="ctranslate2"`): the
               checkpoint converted by CTranslate2's converter, float32, with
               the same threads per batch as the raw variants
  ours_ct2_int8     the same with `quantize="int8"` (CTranslate2's int8 GEMMs)

The weights are written once as a Hugging Face `MT5ForConditionalGeneration`
directory (`export_hf`, with the sample's vocabulary); the HF variants load
it with `from_pretrained` and CTranslate2 converts it with its own converter
(`ct2-transformers-converter`, float32 and int8, in a child process).
CTranslate2 reads token strings: every id is passed as its SentencePiece
piece, and the run checks that the converted vocabulary maps each piece
back to the same id.

The HF variants run a forward pass with the decoder start token (cheaper
than `generate`) and read P("1") from the softmax, as ours does;
CTranslate2 scores the target `▁1` (its log-probability at the first
decoder step; it also scores the end token after it, one decoder position
more than the others run). Every variant's time includes tokenisation (the
same `encode_pair` truncation). Ours are timed after their shapes are
compiled; the compile times are printed separately. Articles are log-normal
in length (100-2048 tokens, median ~500, like SEAHORSE's sources), built
from the bundled sample's articles and tokenised with the bundled sample
vocabulary (its ids are a subset of the 250112 rows, so the compute is
exactly mT5-small's).

Prints examples/s per variant, the model FLOP/s achieved (real tokens only,
padding not counted; int8 variants counted at the same FLOPs) against a
float32 matmul peak measured in the same run, checks that every float32
score agrees with ours to 1e-4 (relative) and reports int8 scores as rank
correlation and largest difference, prints the two goals (our JAX float32
>= CTranslate2 float32; our fastest mode, either engine, >= the fastest
peer), times each goal's two variants again back to back for
`--goal_rounds` rounds (their ratios drift less), and ends with `ratio: N.NNx`: our fastest
variant (either engine) over the fastest other variant (Hugging Face or raw CTranslate2).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Callable, Optional

os.environ.setdefault("USE_TF", "0")  # transformers must not import TensorFlow
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# Load times are the scorer's own: the int8 self-check (a one-time float32 probe) is off.
os.environ.setdefault("SEAHORSE_METRICS_INT8_CHECK", "off")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import (  # noqa: E402
    add_isa_argument,
    add_results_argument,
    apply_isa,
    isa_line,
    machine_line,
    make_record,
    measure_matmul_peak,
    write_record,
)

from seahorse_metrics.io.atomic import write_json_atomically  # noqa: E402

SAMPLE_DIR = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    "seahorse_metrics",
    "data",
    "sample",
)
HF_VARIANTS = ("hf_padded", "hf_sorted", "hf_batch1")
CT2_VARIANTS = {"ct2_float32": "float32", "ct2_int8": "int8"}
# Our variants: Scorer options on top of the shared ones ("ours" is the reference).
OURS_VARIANTS = {
    "ours": {},
    "ours_packed": {"packing": True},
    "ours_int8": {"quantize": "int8"},
    "ours_int8_packed": {"quantize": "int8", "packing": True},
    "ours_ct2_float32": {"engine": "ctranslate2"},
    "ours_ct2_int8": {"engine": "ctranslate2", "quantize": "int8"},
}
DEFAULT_OURS = ",".join(OURS_VARIANTS)
FLOAT32_TOLERANCE = 1e-4
# Seconds each ctranslate2 variant of ours took to convert (child process) and load.
LOAD_SECONDS: dict[str, float] = {}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=64, help="Examples (default 64).")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="12 examples of 100-512 tokens, three buckets: about a minute.",
    )
    parser.add_argument("--min_length", type=int, default=100)
    parser.add_argument("--max_length", type=int, default=2048)
    parser.add_argument("--median_length", type=int, default=500)
    parser.add_argument("--hf_batch_size", type=int, default=8)
    parser.add_argument(
        "--ct2_batch_tokens",
        type=int,
        default=2048,
        help="CTranslate2's tokens per batch (default 2048, as ours).",
    )
    parser.add_argument(
        "--ct2_threads_per_batch",
        type=int,
        default=1,
        help="CTranslate2's threads per batch, raw and ours (default 1: "
        "batches side by side, one core each).",
    )
    parser.add_argument("--batch_size", type=int, default=32, help="Our most rows per batch.")
    parser.add_argument(
        "--max_batch_tokens",
        type=int,
        default=None,
        help="Our tokens per batch (default: the library's).",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=2,
        help="Every variant runs once per round, in rotating order; the best "
        "round counts (the machine may be shared). Default 2, --quick 1.",
    )
    parser.add_argument(
        "--goal_rounds",
        type=int,
        default=4,
        help="After the table, rounds of each goal's two variants back to back "
        "(order alternating), whose ratios drift less than the table's "
        "(default 4, --quick 1; 0: none).",
    )
    parser.add_argument("--buckets", default=None, help="Our bucket lengths, comma-separated.")
    parser.add_argument(
        "--ours",
        default=DEFAULT_OURS,
        help=f"Our variants, comma-separated (of {', '.join(OURS_VARIANTS)}; "
        "`ours` is always run: the others are checked against it).",
    )
    parser.add_argument(
        "--skip_batch1", action="store_true", help="Skip the (slowest) batch-1 HF variant."
    )
    parser.add_argument(
        "--skip_ct2",
        action="store_true",
        help="Skip the CTranslate2 variants, raw and ours (they need `pip install ctranslate2`).",
    )
    parser.add_argument(
        "--cpu_devices",
        type=int,
        default=None,
        help="Our JAX variants on this many XLA:CPU devices, each scoring part "
        "of every batch (`score --cpu_devices`; default: as XLA_FLAGS "
        "says, one).",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="Also write the record here.")
    add_isa_argument(parser)
    add_results_argument(parser)
    args = parser.parse_args(argv)
    args.ours = ["ours"] + [
        n for n in args.ours.split(",") if n and n != "ours" and not (args.skip_ct2 and is_ct2(n))
    ]
    unknown = [n for n in args.ours if n not in OURS_VARIANTS]
    if unknown:
        parser.error(f"unknown --ours variants {unknown}; choose from {list(OURS_VARIANTS)}")
    if args.quick:
        args.n, args.max_length, args.median_length, args.rounds = 12, 512, 250, 1
        args.goal_rounds = min(args.goal_rounds, 1)
        args.buckets = args.buckets or "128,256,512"
    return args


# ------------------------------------------------------------------ model
def init_std(name: str, shape: tuple, config) -> Optional[float]:
    """T5-style initialisation of the parameter `name` ("a/b/kernel"): the
    standard deviation of its normal draw, or None for a norm scale (ones).
    Shared by `random_params` (numpy, host) and bench/accelerator.py (drawn on
    the device)."""
    if name.endswith("scale"):
        return None
    if "embedding" in name and "token_embedder" in name:
        return 1.0
    fan_in = shape[0] if "rel_embedding" not in name else shape[1]
    std = fan_in**-0.5
    if name.endswith("query/kernel"):
        std *= config.d_kv**-0.5
    return std


def random_params(config, seed: int) -> dict:
    """T5-style random float32 weights for `config`, in our parameter layout."""
    from seahorse_metrics.model.model import EncoderDecoderModel

    rng = np.random.default_rng(seed)
    shapes = EncoderDecoderModel(config).abstract_params()

    def draw(path, leaf):
        name = "/".join(str(getattr(k, "key", k)) for k in path)
        std = init_std(name, leaf.shape, config)
        if std is None:
            return np.ones(leaf.shape, np.float32)
        values = rng.standard_normal(leaf.shape, dtype=np.float32)
        if std != 1.0:
            values *= np.float32(std)
        return values

    import jax

    return jax.tree_util.tree_map_with_path(draw, shapes)


def hf_model(hf_dir: str):
    """`MT5ForConditionalGeneration` from the exported directory, in eval mode."""
    import transformers

    return transformers.MT5ForConditionalGeneration.from_pretrained(hf_dir).eval()


def ct2_translators(hf_dir: str, work_dir: str, threads: int, threads_per_batch: int) -> dict:
    """CTranslate2 translators converted from `hf_dir`: {variant: Translator}."""
    try:
        import ctranslate2
    except ImportError:
        raise SystemExit(
            "bench/score.py: CTranslate2 is not installed; run "
            '`pip install -e ".[bench]"` or pass --skip_ct2'
        ) from None
    from seahorse_metrics.engines.ctranslate2 import thread_split

    translators = {}
    for name, compute_type in CT2_VARIANTS.items():
        output_dir = os.path.join(work_dir, name)
        # CTranslate2's own converter (`ct2-transformers-converter`), in a child
        # process so that its copies of the weights leave with it.
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                "from ctranslate2.converters.transformers import main; main()",
                "--model",
                hf_dir,
                "--output_dir",
                output_dir,
                "--quantization",
                compute_type,
                "--low_cpu_mem_usage",
            ],
            capture_output=True,
            text=True,
        )
        if done.returncode:
            raise SystemExit(
                f"bench/score.py: converting {hf_dir} to CTranslate2 "
                f"{compute_type} failed:\n{done.stderr[-3000:]}"
            )
        inter_threads, intra_threads = thread_split(threads, threads_per_batch)
        translators[name] = (
            ctranslate2.Translator(
                output_dir,
                device="cpu",
                compute_type=compute_type,
                inter_threads=inter_threads,
                intra_threads=intra_threads,
            ),
            ct2_vocabulary(output_dir),
        )
    return translators


def ct2_vocabulary(model_dir: str) -> list[str]:
    """The converted model's token strings, in id order."""
    for name in ("shared_vocabulary.json", "target_vocabulary.json"):
        path = os.path.join(model_dir, name)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as handle:
                return json.load(handle)
    raise FileNotFoundError(f"no vocabulary file in the CTranslate2 model {model_dir}")


def check_same_ids(vocabulary: list[str], tokenizer, ids: set[int]) -> None:
    """Raises if CTranslate2's vocabulary does not map our pieces to our ids."""
    wrong = [i for i in sorted(ids) if vocabulary[i] != tokenizer.id_to_piece(i)]
    if wrong:
        raise RuntimeError(
            f"CTranslate2's vocabulary maps {len(wrong)} ids differently "
            f"(first: id {wrong[0]} is {vocabulary[wrong[0]]!r} there, "
            f"{tokenizer.id_to_piece(wrong[0])!r} here)"
        )
    if len(set(vocabulary[i] for i in ids)) != len(ids):
        raise RuntimeError("CTranslate2's vocabulary has duplicate pieces among the ids used")


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
    decoder_layer = (
        2 * (4 * d * inner + 3 * d * ff)  # self-attn q,k,v,o + MLP, one position
        + 2 * 2 * d * inner  # cross-attn q, o
        + 2 * 2 * length * d * inner  # cross-attn keys and values
        + 4 * length * inner
    )  # cross-attention scores and mix
    return (
        config.num_encoder_layers * encoder_layer
        + config.num_decoder_layers * decoder_layer
        + 2 * d * config.vocab_size
    )


def folded_saving(config, length: int) -> float:
    """FLOPs of `model_flops` our JAX network does not compute: its first
    decoder step folds each cross-attention (`attention.folded_attention`),
    so the input's keys and values are never projected; the queries, spread
    over every head's columns, meet the kernels (H times a per-head fold)
    and the inputs at width d instead."""
    d, inner, heads = config.d_model, config.inner_dim, config.num_heads
    projected = 4 * length * d * inner + 4 * length * inner  # keys, values; scores, mix
    folded = 4 * heads * d * inner + 4 * length * heads * d  # W_k q, W_v; scores, mix at width d
    return config.num_decoder_layers * (projected - folded)


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
                ids[r, : len(token_ids[i])] = torch.tensor(token_ids[i])
                mask[r, : len(token_ids[i])] = 1
            logits = model(
                input_ids=ids,
                attention_mask=mask,
                decoder_input_ids=torch.zeros((len(rows), 1), dtype=torch.long),
            ).logits
            log_probs = torch.log_softmax(logits[:, 0].float(), dim=-1)
            scores[rows] = log_probs[:, one_id].exp().numpy()
    return scores


def hf_variant(name, model, token_ids, batch_size, one_id) -> np.ndarray:
    order = list(range(len(token_ids)))
    if name == "hf_sorted":
        order.sort(key=lambda i: len(token_ids[i]))
    size = 1 if name == "hf_batch1" else batch_size
    batches = [order[i : i + size] for i in range(0, len(order), size)]
    return hf_scores(model, token_ids, batches, one_id)


def ct2_variant(translator, tokenizer, token_ids, one_id, batch_tokens) -> np.ndarray:
    """P("1") per example from CTranslate2's `score_batch` (log-probability of
    the first target token, `▁1`; `max_input_length=0`: no truncation of its own)."""
    source = [[tokenizer.id_to_piece(i) for i in ids] for ids in token_ids]
    target = [[tokenizer.id_to_piece(one_id)]] * len(source)
    results = translator.score_batch(
        source, target, max_batch_size=batch_tokens, batch_type="tokens", max_input_length=0
    )
    return np.exp(np.asarray([result.log_probs[0] for result in results], np.float64))


@dataclasses.dataclass
class Setup:
    """Everything the timed variants share."""

    config: object
    tokenizer: object
    scorers: dict  # our variant -> Scorer
    hf: object
    translators: dict  # variant -> (ctranslate2.Translator, vocabulary)
    premises: list
    hypotheses: list
    lengths: list
    total_flops: float

    @property
    def scorer(self):
        """The reference scorer (float32, unpacked)."""
        return self.scorers["ours"]


def our_scorers(args, config, params, vocab_path, hf_dir: str, threads: int) -> dict:
    """{variant: Scorer} for `args.ours`, sharing the float32 weights; the
    ctranslate2 ones load `hf_dir` (converted in a child process, into a cache
    beside it)."""
    from seahorse_metrics.model.model import EncoderDecoderModel
    from seahorse_metrics.model.quantize import quantize_params
    from seahorse_metrics.scoring.single import Scorer

    buckets = [int(b) for b in args.buckets.split(",")] if args.buckets else None
    batching = {"max_batch_tokens": args.max_batch_tokens} if args.max_batch_tokens else {}
    scorers, placed = {}, {}  # placed: the weights on the device, per quantization
    for name in args.ours:
        options = dict(OURS_VARIANTS[name])
        quantize = options.pop("quantize", None)
        if options.pop("engine", "jax") == "ctranslate2":
            engine_options = {
                "cache_dir": os.path.join(os.path.dirname(hf_dir), "ct2_cache"),
                "threads": threads,
                "threads_per_batch": args.ct2_threads_per_batch,
            }
            start = time.perf_counter()
            scorers[name] = Scorer.load(
                hf_dir,
                vocab=vocab_path,
                max_input_length=args.max_length,
                batch_size=args.batch_size,
                bucket_lengths=buckets,
                window_size=max(args.n, 1),
                quantize=quantize,
                engine="ctranslate2",
                engine_options=engine_options,
                **batching,
                **options,
            )
            LOAD_SECONDS[name] = time.perf_counter() - start
            continue
        model = EncoderDecoderModel(config.replace(quantize=quantize))
        weights = placed.get(quantize)
        if weights is None:  # int8 shares the float32 embeddings and head once they are placed
            weights = quantize_params(model, placed.get(None, params)) if quantize else params
        scorers[name] = Scorer(
            model,
            weights,
            vocab_path,
            max_input_length=args.max_length,
            batch_size=args.batch_size,
            bucket_lengths=buckets,
            window_size=max(args.n, 1),
            **batching,
            **options,
        )
        placed[quantize] = scorers[name].params
    return scorers


def build_setup(args, threads: int, work_dir: str) -> Setup:
    """Random weights, our scorer, the HF model and the CTranslate2 conversions."""
    from seahorse_metrics.checkpoints.hf import export_hf
    from seahorse_metrics.data.inputs import encode_pair
    from seahorse_metrics.data.vocab import SentencePieceTokenizer
    from seahorse_metrics.model.config import get_config

    config = get_config("mt5_small", dropout_rate=0.0)
    vocab_path = os.path.join(SAMPLE_DIR, "spiece.model")
    tokenizer = SentencePieceTokenizer(vocab_path)
    params = random_params(config, args.seed)
    hf_dir = os.path.join(work_dir, "hf")
    export_hf(hf_dir, config, params, vocab_path)
    translators = (
        {}
        if args.skip_ct2
        else ct2_translators(hf_dir, work_dir, threads, args.ct2_threads_per_batch)
    )
    scorers = our_scorers(args, config, params, vocab_path, hf_dir, threads)
    del params
    premises, hypotheses = make_inputs(
        args.n, args.min_length, args.max_length, args.median_length, args.seed, tokenizer
    )
    lengths = [
        len(encode_pair(tokenizer, p, h, args.max_length).ids) for p, h in zip(premises, hypotheses)
    ]
    return Setup(
        config,
        tokenizer,
        scorers,
        hf_model(hf_dir),
        translators,
        premises,
        hypotheses,
        lengths,
        sum(model_flops(config, length) for length in lengths),
    )


def check_ct2_vocabularies(setup: Setup) -> None:
    """Every id the inputs use (and "▁1"'s) means the same piece to CTranslate2."""
    used_ids = {
        i for ids in setup.scorer.encode_inputs(setup.premises, setup.hypotheses) for i in ids
    } | {setup.scorer.positive_id}
    for _, vocabulary in setup.translators.values():
        check_same_ids(vocabulary, setup.tokenizer, used_ids)


def precompile_ours(setup: Setup) -> dict[str, float]:
    """Compiles each of our variants' shapes up to the longest input; seconds per variant."""
    seconds = {}
    for name, scorer in setup.scorers.items():
        start = time.perf_counter()
        scorer.precompile(max_length=max(setup.lengths))
        seconds[name] = time.perf_counter() - start
    return seconds


def variant_runners(args, setup: Setup) -> dict[str, Callable[[], tuple[np.ndarray, dict]]]:
    """{variant: a function that scores every pair, tokenising included}."""
    from seahorse_metrics.data.inputs import encode_pair

    one_id = setup.scorer.positive_id

    def encoded() -> list[list[int]]:
        return [
            encode_pair(setup.tokenizer, p, h, args.max_length).ids
            for p, h in zip(setup.premises, setup.hypotheses)
        ]

    def ours(scorer) -> tuple[np.ndarray, dict]:
        output = scorer.score_detailed(setup.premises, setup.hypotheses, show_progress=False)
        return (
            output.scores["score"].astype(np.float64),
            {"padding": output.stats.summary()["padding_fraction"]},
        )

    runners = {name: lambda scorer=scorer: ours(scorer) for name, scorer in setup.scorers.items()}
    for name in HF_VARIANTS:
        if name != "hf_batch1" or not args.skip_batch1:
            runners[name] = lambda name=name: (
                hf_variant(name, setup.hf, encoded(), args.hf_batch_size, one_id),
                {},
            )
    for name, (translator, _) in setup.translators.items():
        runners[name] = lambda translator=translator: (
            ct2_variant(translator, setup.tokenizer, encoded(), one_id, args.ct2_batch_tokens),
            {},
        )
    return runners


# ------------------------------------------------------------------ timing and report
def time_variants(runners, rounds: int, n: int, total_flops: float) -> dict[str, dict]:
    """Runs every variant once per round in rotating order; keeps each one's best round."""
    results = {}
    names = list(runners)
    for round_index in range(rounds):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            start = time.perf_counter()
            scores, extra = runners[name]()
            seconds = time.perf_counter() - start
            if name not in results or seconds < results[name]["seconds"]:
                results[name] = {
                    "seconds": seconds,
                    "examples_per_s": n / seconds,
                    "flops_per_s": total_flops / seconds,
                    "scores": scores,
                    **extra,
                }
    return results


def paired_rounds(runners, pairs, rounds: int, n: int) -> dict:
    """{(ours, peer): [(ours, peer examples/s) per round]}: the two run back to
    back, peer first in even rounds (the machine drifts between minutes more
    than between two runs)."""
    found = {}
    for pair in dict.fromkeys(pairs):
        found[pair] = []
        for index in range(rounds):
            speed = {}
            for name in pair[::-1] if index % 2 == 0 else pair:
                start = time.perf_counter()
                runners[name]()
                speed[name] = n / (time.perf_counter() - start)
            found[pair].append((speed[pair[0]], speed[pair[1]]))
    return found


def print_paired(found: dict) -> None:
    for (ours, peer), speeds in found.items():
        if not speeds:  # --goal_rounds 0
            continue
        ratios = [a / b for a, b in speeds]
        print(
            f"{ours} vs {peer}, {len(speeds)} rounds back to back (examples/s): "
            + ", ".join(f"{a:.2f}/{b:.2f}" for a, b in speeds)
            + f"; median ratio {float(np.median(ratios)):.2f}x, best of each "
            f"{max(a for a, _ in speeds) / max(b for _, b in speeds):.2f}x"
        )


def is_int8(name: str) -> bool:
    return "int8" in name


def is_ct2(name: str) -> bool:
    return "ct2" in name


def agreement(results: dict) -> dict[str, dict]:
    """Each variant's scores against ours (float32): max relative difference for
    float32 variants; rank correlation and max absolute difference for int8."""
    from scipy.stats import spearmanr

    reference = results["ours"]["scores"]
    report = {}
    for name, result in results.items():
        if name == "ours":
            continue
        scores = result["scores"]
        if is_int8(name):
            report[name] = {
                "spearman": float(spearmanr(scores, reference).statistic),
                "max_abs_diff": float(np.max(np.abs(scores - reference))),
                "max_rel_diff_int8": float(np.max(np.abs(scores - reference) / np.abs(reference))),
            }
        else:
            report[name] = {
                "max_rel_diff": float(np.max(np.abs(scores - reference) / np.abs(scores)))
            }
    return report


def ratios(results: dict) -> dict[str, Optional[float]]:
    """Our fastest (any engine) over the fastest other variant, and our JAX
    float32 over CTranslate2's float32."""
    speed = {name: r["examples_per_s"] for name, r in results.items()}
    ours = [n for n in speed if n == "ours" or n.startswith("ours_")]
    others = [n for n in speed if n not in ours]
    best_ours, best_other = max(ours, key=speed.get), max(others, key=speed.get)
    best_float32 = max((n for n in ours if not is_int8(n) and not is_ct2(n)), key=speed.get)
    return {
        "best_ours": best_ours,
        "best_other": best_other,
        "best_float32": best_float32,
        "ratio": speed[best_ours] / speed[best_other],
        "float32_vs_ct2_float32": (
            speed[best_float32] / speed["ct2_float32"] if "ct2_float32" in speed else None
        ),
        "fastest_vs_ct2_int8": (
            speed[best_ours] / speed["ct2_int8"] if "ct2_int8" in speed else None
        ),
    }


def print_report(args, setup: Setup, results, compile_seconds, peaks, checks, summary) -> bool:
    """Prints the table, the score checks and the ratios; returns whether the
    float32 variants agree with ours."""
    matmul_peak = max(p["peak"] for p in peaks)
    print(
        "matmul peak (float32, 2048^3, best of jax/torch before and after): "
        f"{matmul_peak / 1e9:.1f} GFLOP/s  (jax {peaks[0].get('jax', 0) / 1e9:.1f}/"
        f"{peaks[1].get('jax', 0) / 1e9:.1f}, torch {peaks[0].get('torch', 0) / 1e9:.1f}/"
        f"{peaks[1].get('torch', 0) / 1e9:.1f})"
    )
    for name, scorer in setup.scorers.items():
        if is_ct2(name):
            print(
                f"{name}: converted and loaded in {LOAD_SECONDS[name]:.1f} s (not in the "
                f"timing below); padding {results[name]['padding']:.1%} of batch tokens"
            )
            continue
        print(
            f"{name}: compiled {len(scorer.multi.batching().shapes())} bucket shapes up to "
            f"{max(setup.lengths)} tokens in {compile_seconds[name]:.1f} s (not in the timing "
            f"below); padding {results[name]['padding']:.1%} of batch tokens"
        )
    print(f"{'variant':<17} {'seconds':>8} {'examples/s':>11} {'GFLOP/s':>8} {'of peak':>8}")
    for name, r in results.items():
        print(
            f"{name:<17} {r['seconds']:8.2f} {r['examples_per_s']:11.3f} "
            f"{r['flops_per_s'] / 1e9:8.1f} {r['flops_per_s'] / matmul_peak:8.1%}"
        )
    float32 = {n: c["max_rel_diff"] for n, c in checks.items() if "max_rel_diff" in c}
    agree = max(float32.values(), default=0.0) <= FLOAT32_TOLERANCE
    print(
        "float32 scores, max relative difference vs ours: "
        + ", ".join(f"{k} {v:.1e}" for k, v in float32.items())
        + f" -> {'OK' if agree else 'FAIL'} (tolerance {FLOAT32_TOLERANCE:g})"
    )
    for name, check in checks.items():
        if "spearman" in check:
            print(
                f"{name} vs ours float32: Spearman {check['spearman']:.4f}, "
                f"max |difference| {check['max_abs_diff']:.2e} "
                f"(relative {check['max_rel_diff_int8']:.1%})"
            )
    if summary["float32_vs_ct2_float32"] is not None:
        print(
            f"goal, our JAX float32 ({summary['best_float32']}) >= ct2_float32: "
            f"{summary['float32_vs_ct2_float32']:.2f}x"
        )
    if summary["fastest_vs_ct2_int8"] is not None:
        print(
            f"our fastest ({summary['best_ours']}) vs ct2_int8: "
            f"{summary['fastest_vs_ct2_int8']:.2f}x"
        )
    print(
        f"goal, our fastest ({summary['best_ours']}) >= the fastest peer "
        f"({summary['best_other']}): {'met' if summary['ratio'] >= 1 else 'not met'}"
    )
    print(
        f"{summary['best_ours']} vs the fastest other variant ({summary['best_other']}): "
        f"{summary['ratio']:.2f}x; ours at {results['ours']['flops_per_s'] / matmul_peak:.0%} "
        "of the matmul peak"
    )
    computed = 1 - sum(folded_saving(setup.config, n) for n in setup.lengths) / setup.total_flops
    print(
        f"our JAX variants fold the first decoder step's cross-attention and compute "
        f"{computed:.1%} of these FLOPs: ours at "
        f"{computed * results['ours']['flops_per_s'] / matmul_peak:.0%} of the peak by the "
        "FLOPs it computes (the table counts every variant's as the unfolded network's)"
    )
    return agree


def paired_ratios(found: dict) -> dict[str, float]:
    """The median ratio of each pair's back-to-back rounds."""
    return {
        f"{ours} / {peer}, median of {len(speeds)} rounds back to back": float(
            np.median([a / b for a, b in speeds])
        )
        for (ours, peer), speeds in found.items()
        if speeds
    }


def score_record(args, results, compile_seconds, peaks, checks, summary, paired) -> dict:
    """This run as a benchmark record (bench/results/README.md)."""
    from seahorse_metrics.engines.isa import describe

    matmul_peak = max(p["peak"] for p in peaks)
    variants = {
        name: {
            "examples_per_s": r["examples_per_s"],
            "seconds": r["seconds"],
            "share_of_float32_peak": r["flops_per_s"] / matmul_peak,
            "padding": r.get("padding"),
            **checks.get(name, {}),
        }
        for name, r in results.items()
    }
    ratios = {
        f"{summary['best_ours']} / {summary['best_other']} (fastest ours / fastest peer)": summary[
            "ratio"
        ]
    }
    if summary["float32_vs_ct2_float32"] is not None:
        ratios[f"{summary['best_float32']} / ct2_float32"] = summary["float32_vs_ct2_float32"]
    if summary["fastest_vs_ct2_int8"] is not None and summary["best_other"] != "ct2_int8":
        ratios[f"{summary['best_ours']} / ct2_int8"] = summary["fastest_vs_ct2_int8"]
    ratios.update(paired_ratios(paired))
    return make_record(
        "score",
        f"Scoring, mT5-small shape, {args.n} examples of {args.min_length}-"
        f"{args.max_length} tokens: ours against Hugging Face PyTorch and CTranslate2",
        unit="examples/s",
        primary="examples_per_s",
        variants=variants,
        ratios=ratios,
        args=vars(args),
        isa=describe(),
        matmul_peak_flops=matmul_peak,
        details={
            "compile_s": compile_seconds,
            "summary": summary,
            "rounds_back_to_back": {
                f"{ours} / {peer}": speeds for (ours, peer), speeds in paired.items()
            },
        },
    )


def main(argv=None) -> int:
    args = parse_args(argv)
    apply_isa(args)
    from seahorse_metrics.model.partitioning import split_host_cpu

    if args.cpu_devices is not None:
        split_host_cpu(args.cpu_devices)  # before anything starts JAX's backends
    import jax
    import torch

    threads = os.cpu_count() or 1
    torch.set_num_threads(threads)
    wall = time.perf_counter()
    print(machine_line())
    print(isa_line())
    print(
        f"machine: {threads} CPUs, jax {jax.__version__} on {jax.device_count()} "
        f"{jax.devices()[0].platform} device(s), "
        f"torch {torch.__version__} ({torch.get_num_threads()} threads, CTranslate2 too)"
    )
    with tempfile.TemporaryDirectory(prefix="bench-score-") as work_dir:
        setup = build_setup(args, threads, work_dir)
    check_ct2_vocabularies(setup)
    print(
        f"model: mT5-small shape, vocab {setup.config.vocab_size}; {args.n} examples, input "
        f"tokens min/median/max {min(setup.lengths)}/{int(np.median(setup.lengths))}/"
        f"{max(setup.lengths)}, {setup.total_flops / args.n / 1e9:.1f} GFLOP per example"
    )
    compile_seconds = precompile_ours(setup)
    peaks = [measure_matmul_peak()]
    runners = variant_runners(args, setup)
    results = time_variants(runners, args.rounds, args.n, setup.total_flops)
    peaks.append(measure_matmul_peak())
    checks, summary = agreement(results), ratios(results)
    agree = print_report(args, setup, results, compile_seconds, peaks, checks, summary)
    pairs = [(summary["best_ours"], summary["best_other"])]
    if summary["float32_vs_ct2_float32"] is not None:
        pairs.insert(0, (summary["best_float32"], "ct2_float32"))
    paired = paired_rounds(runners, pairs, args.goal_rounds, args.n)
    print_paired(paired)
    print(f"wall time {time.perf_counter() - wall:.0f} s")
    record = score_record(args, results, compile_seconds, peaks, checks, summary, paired)
    write_record(record, args.results_dir, tag="quick" if args.quick else "")
    if args.json:
        write_json_atomically(args.json, record)
    print(f"ratio: {summary['ratio']:.2f}x")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
