"""Hyperparameters of the T5 encoder-decoder, with the published mT5 sizes.

Field names follow the Hugging Face `MT5Config` / `T5Config` (`d_model`, `d_kv`,
`d_ff`, `feed_forward_proj`, `tie_word_embeddings`, ...) so a `config.json` maps
onto this class field by field. The defaults are T5 v1.1 / mT5 (gated-GELU,
untied head); `feed_forward_proj="relu", tie_word_embeddings=True` is T5 v1.0,
the network of the TRUE NLI metric. Variants are derived with `replace`, as
the Flax examples do::

    config = get_config("mt5_small", dtype="bfloat16", dropout_rate=0.0)
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional

_COMPUTE_DTYPES = ("float32", "bfloat16", "float16")
# Sizes and layer counts beyond int32 cannot index the network (its token ids are int32).
MAX_SIZE = 2**31 - 1
# Hugging Face's names: T5 v1.1 / mT5 (wo(gelu(wi_0 x) * wi_1 x)) and T5 v1.0 (wo(relu(wi x))).
FEED_FORWARD_PROJS = ("gated-gelu", "relu")
QUANTIZATIONS = ("int8",)
INT8_PRODUCTS = ("bfloat16", "float32")
# What the backward pass recomputes per encoder/decoder layer (T5X's names):
# nothing, everything but the products without a batch dimension, everything.
REMAT_POLICIES = ("none", "minimal", "full")


# How attention is computed (blocked from which length, block sizes), not
# what the network is.
ATTENTION_COMPUTATION = (
    "attention_blocked_min_length",
    "attention_forward_min_length",
    "attention_band_min_length",
    "attention_query_block",
    "attention_key_block",
)


@dataclasses.dataclass(frozen=True)
class T5Config:
    """Sizes and constants of one T5 network (v1.1 / mT5 by default, or v1.0).

    Attributes:
      vocab_size: Rows of the input embedding and columns of the output head
        (mT5: 250112, a multiple of 128 above the 250100 SentencePiece pieces).
      d_model: Width of the residual stream (`embed` axis).
      d_kv: Width of one attention head (`kv` axis).
      d_ff: Width of the feed-forward block (`mlp` axis).
      num_heads: Attention heads; the attention inner width is
        `num_heads * d_kv`, which need not equal `d_model` (it does not for
        mT5-small: 6 x 64 = 384 vs 512).
      num_encoder_layers: Encoder blocks.
      num_decoder_layers: Decoder blocks.
      relative_attention_num_buckets: Buckets of the relative position bias.
      relative_attention_max_distance: Distance from which all positions share
        the last bucket.
      relative_bias_per_layer: False (mT5, T5): one relative position bias
        table per stack (`encoder/relpos_bias/rel_embedding`), computed once
        and added in every layer. True (T5X's scalable_t5, Hugging Face's
        UMT5): each layer computes its bias from a table of its own
        (`encoder/layers_0/relpos_bias/rel_embedding`, [heads, buckets]).
      dropout_rate: Dropout used when the network runs non-deterministically.
      layer_norm_epsilon: Epsilon of the RMS norms (computed in float32).
      dtype: Name of the compute dtype ("float32" or "bfloat16"). Norms,
        softmax, logits and the loss are float32 whatever it is. Training keeps
        float32 parameters (master weights); scoring may store them in this
        dtype too (`Scorer.load(..., dtype=...)`).
      quantize: None, or "int8": the attention and feed-forward kernels are
        int8 with a float32 scale per output channel, their products and
        the attention products run in `int8_products` with float32
        accumulation (see `seahorse_metrics.model.quantize`); embeddings,
        norms, softmax, the relative bias and the output head stay float32.
        For scoring, not training.
      int8_products: "bfloat16" (about twice float32's rate on CPUs with
        AVX512-BF16 or AMX, and on GPUs) or "float32" (faster on CPUs
        without them; `engines.isa.xla_int8_products` chooses per host when
        scoring). Unused without `quantize`.
      pad_id: Padding token id; also marks padding in attention masks.
      eos_id: End-of-sequence token id.
      decoder_start_id: First decoder input token.
      feed_forward_proj: "gated-gelu" (T5 v1.1 / mT5) or "relu" (T5 v1.0).
      tie_word_embeddings: Whether the output head is the input embedding
        (T5 v1.0), applied to the decoder output scaled by d_model**-0.5;
        False: an untied head without rescaling (T5 v1.1 / mT5).
      attention_blocked_min_length: Attention whose queries are at least this
        long is computed per block of queries (`model.attention`), never
        holding [heads, length, length] logits, bias or mask; None: always
        at once. Same outputs and gradients to float rounding; the default
        is where blocking measured faster (`bench/kernels.py`). For passes
        with dropout (training).
      attention_forward_min_length: The same for passes without dropout
        (scoring, evaluation), which also attend up to twice
        `attention_query_block` queries as one block
        (`attention_layer.Attention.query_block_for`); None: always at once.
      attention_band_min_length: Passes without dropout (scoring) whose keys
        are at least this many add the relative bias only in a band around
        each query block (`blocked_attention.blocked_attention`); shorter ones take
        it from a strip. Training uses the band wherever it fits. None:
        scoring never in a band.
      attention_query_block: Queries per block of the blocked attention
        (128 measured fastest at 1024 and 2048 tokens on this CPU).
      attention_key_block: Keys per block of the blocked attention, with a
        running softmax maximum and sum (flash-attention); None: all keys
        of a query block at once (faster on CPUs at 2048 tokens).
    """

    vocab_size: int
    d_model: int
    d_kv: int
    d_ff: int
    num_heads: int
    num_encoder_layers: int
    num_decoder_layers: int
    relative_attention_num_buckets: int = 32
    relative_attention_max_distance: int = 128
    relative_bias_per_layer: bool = False
    dropout_rate: float = 0.1
    layer_norm_epsilon: float = 1e-6
    dtype: str = "float32"
    pad_id: int = 0
    eos_id: int = 1
    decoder_start_id: int = 0
    feed_forward_proj: str = "gated-gelu"
    tie_word_embeddings: bool = False
    quantize: Optional[str] = None
    int8_products: str = "bfloat16"
    remat: str = "none"
    scan_layers: bool = False
    # bench/kernels.py on the 2-core development CPU (shared, not quiet; float32,
    # mT5-small heads): blocked in 64-query blocks took 0.6x today's CPU time at
    # 256 tokens, 0.5x at 512 and 0.3x at 2048 (0.4x forward and backward);
    # 32-128 were within noise of 64, key blocks and 256-query blocks slower.
    attention_blocked_min_length: Optional[int] = 256
    # Forward only (quiet, 2026-11-25, the scorer's batch shapes): one block
    # took 0.15-0.7x the dense attention's time at 16 x 64 to 8 x 256 tokens;
    # forward and backward, 1.2-2.2x (so training keeps its threshold).
    attention_forward_min_length: Optional[int] = 64
    # The same session: the strip's forward 1.3-1.4x faster than the band's at
    # 640-1024 tokens, a tie at 1280, the band 1.07-1.4x faster from 1536
    # (training keeps the band: 0.90x the strip's time for a 2 x 2048 step).
    attention_band_min_length: Optional[int] = 1280
    attention_query_block: int = 128
    attention_key_block: Optional[int] = None

    def __post_init__(self):
        for name in (
            "vocab_size",
            "d_model",
            "d_kv",
            "d_ff",
            "num_heads",
            "relative_attention_num_buckets",
            "relative_attention_max_distance",
            "num_encoder_layers",
            "num_decoder_layers",
        ):
            least = 0 if name.startswith("num_") and name.endswith("_layers") else 1
            if not least <= int(getattr(self, name)) <= MAX_SIZE:
                raise ValueError(
                    f"T5Config.{name} must be {least} to {MAX_SIZE} (ids and "
                    f"indices are int32), got {getattr(self, name)!r}"
                )
        if self.dtype not in _COMPUTE_DTYPES:
            raise ValueError(f"T5Config.dtype must be one of {_COMPUTE_DTYPES}, got {self.dtype!r}")
        if self.feed_forward_proj not in FEED_FORWARD_PROJS:
            raise ValueError(
                f"T5Config.feed_forward_proj={self.feed_forward_proj!r} is not supported; "
                f"choose one of {FEED_FORWARD_PROJS}"
            )
        if not isinstance(self.tie_word_embeddings, bool):
            raise ValueError(
                f"T5Config.tie_word_embeddings must be a bool, got {self.tie_word_embeddings!r}"
            )
        if self.quantize is not None and self.quantize not in QUANTIZATIONS:
            raise ValueError(
                f"T5Config.quantize must be None or one of {QUANTIZATIONS}, got {self.quantize!r}"
            )
        if self.int8_products not in INT8_PRODUCTS:
            raise ValueError(
                f"T5Config.int8_products must be one of {INT8_PRODUCTS}, got {self.int8_products!r}"
            )
        if self.remat not in REMAT_POLICIES:
            raise ValueError(f"T5Config.remat must be one of {REMAT_POLICIES}, got {self.remat!r}")
        for name in ("scan_layers", "relative_bias_per_layer"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"T5Config.{name} must be a bool, got {getattr(self, name)!r}")
        for name in (
            "attention_blocked_min_length",
            "attention_forward_min_length",
            "attention_band_min_length",
            "attention_query_block",
            "attention_key_block",
        ):
            value = getattr(self, name)
            if (value is not None or name == "attention_query_block") and (
                isinstance(value, bool) or not isinstance(value, int) or value <= 0
            ):
                raise ValueError(
                    f"T5Config.{name} must be a positive integer"
                    f"{'' if name == 'attention_query_block' else ' or None'}, "
                    f"got {value!r}"
                )
        if not 0.0 <= float(self.dropout_rate) < 1.0:
            raise ValueError(f"T5Config.dropout_rate must be in [0, 1), got {self.dropout_rate!r}")

    @property
    def inner_dim(self) -> int:
        """Width of the concatenated attention heads (`joined_kv` axis)."""
        return self.num_heads * self.d_kv

    def replace(self, **overrides: Any) -> "T5Config":
        """Returns a copy with the given fields changed."""
        return dataclasses.replace(self, **overrides)

    def with_default_attention(self) -> "T5Config":
        """A copy computing attention as this library's defaults do
        (`ATTENTION_COMPUTATION`): what a checkpoint stored there is how its
        training ran, not what the model is, and the outputs are the same to
        float rounding; the scorer loads checkpoints so."""
        defaults = {
            f.name: f.default for f in dataclasses.fields(self) if f.name in ATTENTION_COMPUTATION
        }
        return self.replace(**defaults)

    def to_dict(self) -> dict[str, Any]:
        """Returns the fields as a JSON-serialisable dict."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> "T5Config":
        """Builds a config from `to_dict()` output.

        Raises:
          ValueError: if a key is not a field of `T5Config` or a required
            field is missing.
        """
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - fields)
        if unknown:
            raise ValueError(f"Unknown T5Config fields {unknown}; known fields: {sorted(fields)}")
        try:
            return cls(**dict(values))
        except TypeError as error:
            raise ValueError(f"Incomplete T5Config {dict(values)}: {error}") from error


# Published mT5 sizes (Xue et al., 2021; google/mt5-* configs).
_MT5_SMALL = T5Config(
    vocab_size=250112,
    d_model=512,
    d_kv=64,
    d_ff=1024,
    num_heads=6,
    num_encoder_layers=8,
    num_decoder_layers=8,
)

PRESETS: dict[str, T5Config] = {
    "mt5_small": _MT5_SMALL,
    "mt5_base": _MT5_SMALL.replace(
        d_model=768, d_ff=2048, num_heads=12, num_encoder_layers=12, num_decoder_layers=12
    ),
    "mt5_large": _MT5_SMALL.replace(
        d_model=1024, d_ff=2816, num_heads=16, num_encoder_layers=24, num_decoder_layers=24
    ),
    "mt5_xl": _MT5_SMALL.replace(
        d_model=2048, d_ff=5120, num_heads=32, num_encoder_layers=24, num_decoder_layers=24
    ),
    "mt5_xxl": _MT5_SMALL.replace(
        d_model=4096, d_ff=10240, num_heads=64, num_encoder_layers=24, num_decoder_layers=24
    ),
    # Tests: mT5-small shrunk, keeping an attention inner width (4 x 16 = 64)
    # different from d_model (32) as mT5-small has.
    "tiny": _MT5_SMALL.replace(
        vocab_size=512,
        d_model=32,
        d_kv=16,
        d_ff=64,
        num_heads=4,
        num_encoder_layers=2,
        num_decoder_layers=2,
    ),
}


def get_config(name: str, **overrides: Any) -> T5Config:
    """Returns the preset `name` with `overrides` applied.

    Args:
      name: One of `PRESETS` ("tiny", "mt5_small", ..., "mt5_xxl"); a "-"
        is read as "_" so "mt5-small" works too.
      **overrides: Fields of `T5Config` to change.

    Raises:
      ValueError: if the preset does not exist.
    """
    key = name.replace("-", "_")
    if key not in PRESETS:
        raise ValueError(f"Unknown model preset {name!r}; choose one of {sorted(PRESETS)}")
    return PRESETS[key].replace(**overrides) if overrides else PRESETS[key]
