"""Smoothing a T5 for int8 activations before CTranslate2 converts it (SmoothQuant).

    pairs = calibration_pairs()                      # the bundled corpus, 64 pairs
    ids = calibration_ids(tokenizer, pairs)
    report = smooth_model(hf_model, ids, alpha=0.5)  # in place, same outputs in float

    # What the ctranslate2 engine does for quantize="int8" (engine options
    # int8_smoothing, smoothing_data, smoothing_pairs):
    converter(hf_dir, vocab_path, recipe("int8", engine_options)).convert(out, quantization="int8")

CTranslate2's int8 products quantize the activations too, one scale per
token: a channel whose values run far above the others' leaves the rest of
the token few int8 levels. SmoothQuant (Xiao et al., 2023) divides input
channel j of a linear layer by

    s_j = max|X_j| ** alpha / max|W_j| ** (1 - alpha)

(max|X_j| over calibration inputs, max|W_j| over the column j of every
weight that reads X) and multiplies the weights' column j by s_j: the same
product in exact arithmetic, with part of the activations' range moved into
the weights, which are quantized per output row. In a T5 every division
folds into the weights that make the input (a `Fold`):

  - a layer norm's scale, for the layers it feeds (self-attention q, k, v;
    the cross-attention's q; wi_0 and wi_1, or wi; the encoder's final norm
    for every cross-attention's k and v; the decoder's final norm for
    lm_head unless it is tied to the embeddings);
  - the value projection's rows, for the attention output o (attention is
    linear in the values, channel by channel);
  - wi_1's rows (gated feed-forward), or wi's under relu, for wo.

So the smoothed model computes what the model did (to float32 rounding) and
its float32 conversion would score the same; only the int8 one changes.
The activation maxima come from running the float model, in PyTorch (the
converter loads it there anyway), on calibration pairs at the first decoder
step, as the scorer reads it.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import logging
import os
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from seahorse_metrics.io.json_files import json_object

logger = logging.getLogger(__name__)

DEFAULT_ALPHA = 0.5
DEFAULT_PAIRS = 64
CALIBRATION_LENGTH = 512  # Tokens per calibration input at most.
DEFAULT_CALIBRATION = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    "data",
    "sample",
    "corpus",
    "train.jsonl.gz",
)
PREMISE_FIELDS = ("article", "text", "premise")
HYPOTHESIS_FIELDS = ("summary", "hypothesis")
_FLOOR = 1e-5  # Smallest maximum a scale is computed from (dead channels, zero columns).


@dataclasses.dataclass(frozen=True)
class Fold:
    """Channel scales s divide `scale` (a norm's weight [d], or a linear
    layer's weight [d, in] by rows: the layer that makes the input) and
    multiply the weight columns of the linear layers in `readers`."""

    scale: str
    readers: tuple[str, ...]


def folds(config: Any) -> list[Fold]:
    """Every fold of a Hugging Face T5 / mT5 config (module names of
    `T5ForConditionalGeneration` and `MT5ForConditionalGeneration`)."""
    found: list[Fold] = []
    for stack, layers in (("encoder", config.num_layers), ("decoder", config.num_decoder_layers)):
        for index in range(layers):
            layer = f"{stack}.block.{index}.layer"
            attention = f"{layer}.0.SelfAttention"
            found.append(
                Fold(f"{layer}.0.layer_norm.weight", tuple(f"{attention}.{name}" for name in "qkv"))
            )
            found.append(Fold(f"{attention}.v.weight", (f"{attention}.o",)))
            if stack == "decoder":
                cross = f"{layer}.1.EncDecAttention"
                found.append(Fold(f"{layer}.1.layer_norm.weight", (f"{cross}.q",)))
                found.append(Fold(f"{cross}.v.weight", (f"{cross}.o",)))
            found.extend(_feed_forward_folds(config, f"{layer}.{2 if stack == 'decoder' else 1}"))
    found.append(
        Fold(
            "encoder.final_layer_norm.weight",
            tuple(
                f"decoder.block.{index}.layer.1.EncDecAttention.{name}"
                for index in range(config.num_decoder_layers)
                for name in "kv"
            ),
        )
    )
    if not config.tie_word_embeddings:  # Tied: lm_head is the embeddings, left as they are.
        found.append(Fold("decoder.final_layer_norm.weight", ("lm_head",)))
    return found


def _feed_forward_folds(config: Any, prefix: str) -> list[Fold]:
    """The folds of one feed-forward block: its norm into wi (wi_0, wi_1),
    and wi_1 (gated) or a relu wi into wo (s > 0 passes through relu)."""
    dense = f"{prefix}.DenseReluDense"
    if config.is_gated_act:
        return [
            Fold(f"{prefix}.layer_norm.weight", (f"{dense}.wi_0", f"{dense}.wi_1")),
            Fold(f"{dense}.wi_1.weight", (f"{dense}.wo",)),
        ]
    found = [Fold(f"{prefix}.layer_norm.weight", (f"{dense}.wi",))]
    if config.dense_act_fn == "relu":
        found.append(Fold(f"{dense}.wi.weight", (f"{dense}.wo",)))
    return found


def input_maxima(
    model: Any, readers: Sequence[str], token_ids: Sequence[Sequence[int]]
) -> dict[str, Any]:
    """max |input| per channel of each linear module in `readers`, over the
    encoder on each calibration input and the decoder's first step."""
    import torch

    maxima: dict[str, Any] = {}

    def record(name):
        def hook(_module, inputs):
            flat = inputs[0].detach().abs().reshape(-1, inputs[0].shape[-1]).amax(dim=0)
            maxima[name] = flat if name not in maxima else torch.maximum(maxima[name], flat)

        return hook

    handles = [
        model.get_submodule(name).register_forward_pre_hook(record(name)) for name in readers
    ]
    start = torch.tensor([[model.config.decoder_start_token_id]])
    try:
        with torch.no_grad():
            for ids in token_ids:  # One input at a time: no padding in the maxima.
                model(input_ids=torch.tensor([list(ids)]), decoder_input_ids=start)
    finally:
        for handle in handles:
            handle.remove()
    return maxima


def channel_scales(input_max: Any, weights: Sequence[Any], alpha: float) -> Any:
    """s_j = max|X_j| ** alpha / max|W_j| ** (1 - alpha), computed in float64."""
    import torch

    weight_max = torch.stack([w.detach().abs().amax(dim=0) for w in weights]).amax(dim=0)
    scales = input_max.double().clamp(min=_FLOOR) ** alpha / weight_max.double().clamp(
        min=_FLOOR
    ) ** (1.0 - alpha)
    return scales.float()


def smooth_model(
    model: Any, token_ids: Sequence[Sequence[int]], alpha: float = DEFAULT_ALPHA
) -> dict:
    """Applies every fold of `model` (a PyTorch HF T5, float32) in place.

    Returns:
      What was done: alpha, calibration inputs and tokens, folds, and the
      largest ratio max|X_j| / min|X_j| over the layers' channels before.
    """
    import torch

    if not 0.0 < alpha <= 1.0:
        raise ValueError(f"smoothing alpha must be in (0, 1], got {alpha}")
    plan = folds(model.config)
    maxima = input_maxima(model, [name for fold in plan for name in fold.readers], token_ids)
    spread = 0.0
    with torch.no_grad():
        for fold in plan:
            input_max = torch.stack([maxima[name] for name in fold.readers]).amax(dim=0)
            spread = max(spread, float(input_max.max() / input_max.clamp(min=_FLOOR).min()))
            readers = [model.get_submodule(name).weight for name in fold.readers]
            scales = channel_scales(input_max, readers, alpha)
            divided = model.get_parameter(fold.scale)
            divided.div_(scales if divided.ndim == 1 else scales[:, None])
            for weight in readers:
                weight.mul_(scales[None, :])
    return {
        "alpha": alpha,
        "inputs": len(token_ids),
        "tokens": int(sum(map(len, token_ids))),
        "folds": len(plan),
        "largest_channel_spread": round(spread, 1),
    }


def calibration_pairs(
    path: Optional[str] = None, count: int = DEFAULT_PAIRS
) -> list[tuple[str, str]]:
    """`count` (article, summary) pairs spread evenly over a JSON-lines file
    (gzipped if it ends in .gz; fields article, text or premise, and summary
    or hypothesis); default the bundled multilingual corpus.

    Only the picked rows are parsed (a sample of a large file is read whole
    as lines, not as JSON).

    Raises:
      ValueError: naming the file and line of a picked row that is not a
        JSON object or lacks a field, or a file without pairs.
    """
    path = path or DEFAULT_CALIBRATION
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        lines = [(number, line) for number, line in enumerate(handle, 1) if line.strip()]
    if not lines:
        raise ValueError(f"calibration file {path} has no pairs")
    picked = [lines[i] for i in np.unique(np.linspace(0, len(lines) - 1, count).astype(int))]
    return [_pair(path, number, line) for number, line in picked]


def _pair(path: str, number: int, line: str) -> tuple[str, str]:
    """(article, summary) of one calibration row, or a ValueError naming it."""
    row, error = json_object(line)
    if error is not None:
        raise ValueError(f"{path}:{number}: {error}")
    fields = []
    for names in (PREMISE_FIELDS, HYPOTHESIS_FIELDS):
        found = [row[name] for name in names if isinstance(row.get(name), str)]
        if not found:
            raise ValueError(f"{path}:{number}: no text field {' / '.join(names)}")
        fields.append(found[0])
    return fields[0], fields[1]


def calibration_ids(
    tokenizer: Any, pairs: Sequence[tuple[str, str]], max_length: int = CALIBRATION_LENGTH
) -> list[list[int]]:
    """The scorer's input ids of each pair (summary kept, article cut to fit)."""
    from seahorse_metrics.data.inputs import encode_pair

    return [
        encode_pair(tokenizer, premise, hypothesis, max_length, long_summaries="cut").ids
        for premise, hypothesis in pairs
    ]


def recipe(compute_type: str, options: Mapping[str, Any]) -> Optional[dict]:
    """How an int8 conversion is smoothed, from the ctranslate2 engine
    options `int8_smoothing` (SmoothQuant's alpha, default 0.5; 0 turns it
    off), `smoothing_data` (a JSON-lines file of article/summary pairs;
    default the bundled corpus) and `smoothing_pairs` (default 64); None for
    float32 or alpha 0. The calibration file enters the recipe by content.

    Raises:
      ValueError: naming the engine option that is out of range, or a
        calibration file that does not exist.
    """
    alpha = options.get("int8_smoothing", DEFAULT_ALPHA)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 <= alpha <= 1:
        raise ValueError(
            f"engine option int8_smoothing must be a number from 0 (off) to 1, got {alpha!r}"
        )
    pairs = options.get("smoothing_pairs", DEFAULT_PAIRS)
    if isinstance(pairs, bool) or not isinstance(pairs, int) or pairs < 1:
        raise ValueError(f"engine option smoothing_pairs must be a positive integer, got {pairs!r}")
    path = options.get("smoothing_data") or DEFAULT_CALIBRATION
    if not os.path.isfile(path):
        raise ValueError(f"engine option smoothing_data: no file {path}")
    if compute_type != "int8" or alpha == 0:
        return None
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return {
        "alpha": float(alpha),
        "pairs": pairs,
        "calibration": os.path.abspath(path),
        "calibration_sha256": digest.hexdigest(),
        "max_length": CALIBRATION_LENGTH,
    }


def converter(hf_dir: str, vocab_path: str, smoothing: Optional[dict]):
    """CTranslate2's `TransformersConverter` of `hf_dir`; with a `recipe`, the
    model it loads is smoothed in place before it is converted, and what was
    done is the converter's `smoothing_report` (None without)."""
    from ctranslate2.converters import TransformersConverter

    from seahorse_metrics.data.vocab import SentencePieceTokenizer

    class SmoothingConverter(TransformersConverter):
        smoothing_report = None

        def load_model(self, model_class, model_name_or_path, **kwargs):
            model = super().load_model(model_class, model_name_or_path, **kwargs)
            if smoothing is not None:
                pairs = calibration_pairs(smoothing["calibration"], smoothing["pairs"])
                token_ids = calibration_ids(
                    SentencePieceTokenizer(vocab_path), pairs, smoothing["max_length"]
                )
                self.smoothing_report = {
                    "calibration": smoothing["calibration"],
                    **smooth_model(model, token_ids, smoothing["alpha"]),
                }
                logger.info("smoothed for int8: %s", self.smoothing_report)
            return model

    return SmoothingConverter(hf_dir, low_cpu_mem_usage=True)
