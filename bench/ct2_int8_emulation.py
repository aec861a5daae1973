"""Where CTranslate2's int8 loses ranks: its arithmetic emulated in PyTorch, layer by layer.

    python -m seahorse_metrics.demo                    # trains demo_output/metrics/q1..q6
    python bench/ct2_int8_emulation.py                 # Q1, the first 400 test pairs
    python bench/ct2_int8_emulation.py --metric demo_output/metrics/q3/best --pairs 1000 --layers

CTranslate2's int8 on CPUs (compute types int8 and int8_float32) quantizes
every linear layer: the weight per output row and, at each product, the
input per token (symmetric, 127 levels, rounded), then rescales the int32
sums. This script does the same to a metric's Hugging Face export in
PyTorch, so each part can be switched on alone, and prints the Spearman
rank correlation of P("1") (first decoder step, full-vocabulary softmax, as
the scorer reads it) with float32's for: the weights alone, the activations
alone, and both; smoothed as the ctranslate2 engine smooths before an int8
conversion (`engines.smoothing`, SmoothQuant with --alpha on the bundled
calibration pairs) and unsmoothed. With --layers, also each layer's
activations alone and all layers' but one: whether one layer could be kept
in float (CTranslate2 itself quantizes every linear weight of an int8 model).
`bench/int8_agreement.py --engine ctranslate2` measures CTranslate2 itself.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("USE_TF", "0")

from common import add_results_argument, machine_line, make_record, write_record  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--metric",
        default="demo_output/metrics/q1/best",
        help="A metric checkpoint (default the demo's Q1).",
    )
    parser.add_argument(
        "--input",
        default="demo_output/prepared/test.jsonl",
        help="JSONL with article and summary fields (default the demo's test split).",
    )
    parser.add_argument("--pairs", type=int, default=400, help="Score the first N pairs (400).")
    parser.add_argument("--max_length", type=int, default=2048, help="Input tokens at most.")
    parser.add_argument("--alpha", type=float, default=0.5, help="Smoothing exponent (0.5).")
    parser.add_argument(
        "--layers",
        action="store_true",
        help="Also each layer's activations alone, and all but each layer.",
    )
    add_results_argument(parser)
    return parser.parse_args(argv)


def quantized_rows(x):
    """Symmetric int8 per row of the last axis, back in float: CTranslate2's rounding."""
    import torch

    scale = x.abs().amax(dim=-1, keepdim=True).clamp(min=1e-12) / 127.0
    return torch.round(x / scale).clamp(-127, 127) * scale


def quantize(model, weights: bool, activations) -> None:
    """Int8 `weights` (per output row, in place) of every linear layer, and
    the inputs of those named in `activations` (per token; a set of names)."""
    import torch

    for name, module in model.named_modules():
        if not isinstance(module, torch.nn.Linear):
            continue
        if weights:
            with torch.no_grad():
                module.weight.copy_(quantized_rows(module.weight))
        if name in activations:
            module.register_forward_pre_hook(lambda _m, inputs: (quantized_rows(inputs[0]),))


def linear_names(model) -> list[str]:
    import torch

    return [name for name, module in model.named_modules() if isinstance(module, torch.nn.Linear)]


class Emulation:
    """A metric's float32 export, loaded afresh (optionally smoothed) for each variant."""

    def __init__(self, args, hf_dir: str):
        from seahorse_metrics.data.inputs import encode_pair
        from seahorse_metrics.data.vocab import SentencePieceTokenizer, target_token_ids
        from seahorse_metrics.engines import smoothing

        self.hf_dir, self.alpha = hf_dir, args.alpha
        tokenizer = SentencePieceTokenizer(os.path.join(hf_dir, "spiece.model"))
        self.positive_id = target_token_ids(tokenizer)[0]
        with open(args.input, encoding="utf-8") as handle:
            records = [json.loads(line) for line in handle if line.strip()][: args.pairs]
        self.ids = [
            encode_pair(tokenizer, r["article"], r["summary"], args.max_length).ids for r in records
        ]
        self.calibration = smoothing.calibration_ids(tokenizer, smoothing.calibration_pairs())
        self.linears = linear_names(self.model(smoothed=False))
        self.reference = self.scores(self.model(smoothed=False))

    def model(self, smoothed: bool):
        from transformers import MT5ForConditionalGeneration

        from seahorse_metrics.engines import smoothing

        model = MT5ForConditionalGeneration.from_pretrained(self.hf_dir).float().eval()
        if smoothed:
            smoothing.smooth_model(model, self.calibration, self.alpha)
        return model

    def scores(self, model) -> np.ndarray:
        import torch

        start = torch.tensor([[model.config.decoder_start_token_id]])
        found = []
        with torch.no_grad():
            for ids in self.ids:
                logits = model(input_ids=torch.tensor([ids]), decoder_input_ids=start).logits
                found.append(float(torch.softmax(logits[0, 0], -1)[self.positive_id]))
        return np.array(found)

    def spearman(self, smoothed: bool, weights: bool, activations) -> float:
        from scipy.stats import spearmanr

        model = self.model(smoothed)
        quantize(model, weights, set(activations))
        return float(spearmanr(self.reference, self.scores(model)).statistic)


def main(argv=None) -> int:
    args = parse_args(argv)
    from seahorse_metrics.checkpoints import export_hf, load_checkpoint

    if not os.path.exists(args.metric):
        raise SystemExit(
            f"bench/ct2_int8_emulation.py: no checkpoint {args.metric}; run "
            "`python -m seahorse_metrics.demo` first or pass --metric"
        )
    print(machine_line(), flush=True)
    variants = {}
    with tempfile.TemporaryDirectory(prefix="ct2-emulation-") as hf_dir:
        config, params = load_checkpoint(args.metric, dtype="float32")
        export_hf(hf_dir, config, params, vocab_path=os.path.join(args.metric, "spiece.model"))
        emulation = Emulation(args, hf_dir)
        every = emulation.linears
        print(
            f"{args.metric}: {len(emulation.ids)} pairs of {args.input}, {len(every)} linear "
            f"layers; Spearman with float32 (smoothing alpha {args.alpha}):"
        )
        print(f"{'':<18} {'smoothed':>9} {'unsmoothed':>11}")
        for label, weights, activations in (
            ("weights alone", True, ()),
            ("activations alone", False, every),
            ("both (CTranslate2)", True, every),
        ):
            rho = [emulation.spearman(smoothed, weights, activations) for smoothed in (True, False)]
            print(f"{label:<18} {rho[0]:9.5f} {rho[1]:11.5f}", flush=True)
            variants[label] = {"spearman": rho[0], "spearman_unsmoothed": rho[1]}
        if args.layers:
            print("smoothed, per layer: its activations alone / every layer's but its own")
            for name in every:
                alone = emulation.spearman(True, False, [name])
                others = emulation.spearman(True, True, [n for n in every if n != name])
                print(f"  {name:<52} {alone:.5f} / {others:.5f}", flush=True)
                variants[f"layer {name}"] = {
                    "spearman": alone,
                    "spearman_every_other_layer": others,
                }
    write_record(
        make_record(
            "ct2_int8_emulation",
            f"CTranslate2's int8 emulated in PyTorch on {args.metric}, "
            f"{len(emulation.ids)} pairs: Spearman with float32",
            unit="Spearman",
            primary="spearman",
            variants=variants,
            ratios={"both, smoothed": variants["both (CTranslate2)"]["spearman"]},
            args=vars(args),
        ),
        args.results_dir,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
