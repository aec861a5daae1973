"""Hugging Face T5 / mT5 model directories: read them, and export ours to one.

A directory holds `config.json` and the weights as `model.safetensors`,
sharded safetensors (`model.safetensors.index.json`), `pytorch_model.bin`
or its shards (read with `torch.load(weights_only=True, mmap=True)`, only when
torch is installed) or `flax_model.msgpack` (see `readers`). Tensors are read
one at a time into the target dtype and placement (see `streaming`).
`MT5ForConditionalGeneration` and `T5ForConditionalGeneration` directories
are read: T5 v1.1 / mT5 (gated-GELU, untied head; the released SEAHORSE
metrics are T5-class configs with mT5 weights) and T5 v1.0 (ReLU
feed-forward, output head tied to the embedding, as the TRUE NLI metric
`google/t5_xxl_true_nli_mixture`). `UMT5ForConditionalGeneration`
directories hold a relative position bias in every layer's self-attention
(`encoder.block.1.layer.0.SelfAttention.relative_attention_bias`): they are
read as `relative_bias_per_layer` networks, which are exported so (T5X's
scalable_t5 checkpoints among them). Other feed-forward activations and
encoder-only models are refused, naming the field.

Hugging Face stores torch `Linear` weights as [out, in] and the relative bias
as [buckets, heads]; the network's kernels are [in, out] and [heads, buckets],
so those are transposed on the way in and out.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from typing import Any, Mapping, Optional

import numpy as np

from seahorse_metrics.checkpoints import readers
from seahorse_metrics.checkpoints.layout import VOCAB_FILE
from seahorse_metrics.checkpoints.params import (
    CheckpointError,
    check_config_values,
    check_layer_claims,
    check_params,
    expected_shapes,
    flatten,
    shape_mismatch,
    unflatten,
)
from seahorse_metrics.checkpoints.streaming import (
    CHUNK_BYTES,
    Convert,
    ParamSource,
    StoredTensor,
    materialise,
    param_shardings,
)
from seahorse_metrics.io.atomic import staged_path, write_json_atomically
from seahorse_metrics.model.config import T5Config

logger = logging.getLogger(__name__)

CONFIG_FILE = "config.json"
SAFETENSORS_FILE = "model.safetensors"
SAFETENSORS_INDEX_FILE = "model.safetensors.index.json"
TORCH_FILE = "pytorch_model.bin"
TORCH_INDEX_FILE = "pytorch_model.bin.index.json"
FLAX_FILE = "flax_model.msgpack"
WEIGHT_FILES = (SAFETENSORS_FILE, SAFETENSORS_INDEX_FILE, TORCH_FILE, TORCH_INDEX_FILE, FLAX_FILE)

# Aliases of the one input embedding (HF ties them to `shared`).
_EMBEDDING_NAMES = ("shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight")
# A tied model's head: the embedding again, when the file holds it at all.
_TIED_HEAD_NAME = "lm_head.weight"
# Written by old HF versions, unused by the network (HF ignores it too).
_IGNORED_NAMES = ("decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight",)
_ATTENTION = (("q", "query"), ("k", "key"), ("v", "value"), ("o", "out"))
# Feed-forward kernels per `feed_forward_proj` (the same names in HF and T5X).
_MLP = {"gated-gelu": ("wi_0", "wi_1", "wo"), "relu": ("wi", "wo")}
# config.json keys -> T5Config fields, whose types they must have.
_CONFIG_FIELDS = {
    "vocab_size": "vocab_size",
    "d_model": "d_model",
    "d_kv": "d_kv",
    "d_ff": "d_ff",
    "num_heads": "num_heads",
    "num_layers": "num_encoder_layers",
    "num_decoder_layers": "num_decoder_layers",
    "relative_attention_num_buckets": "relative_attention_num_buckets",
    "relative_attention_max_distance": "relative_attention_max_distance",
    "dropout_rate": "dropout_rate",
    "layer_norm_epsilon": "layer_norm_epsilon",
    "pad_token_id": "pad_id",
    "eos_token_id": "eos_id",
    "decoder_start_token_id": "decoder_start_id",
    "tie_word_embeddings": "tie_word_embeddings",
}
_HF_LAYER = {stack: re.compile(rf"^{stack}\.block\.(\d+)\.") for stack in ("encoder", "decoder")}
# HF architectures without a decoder, which cannot score P("1").
_ENCODER_ONLY = ("T5EncoderModel", "MT5EncoderModel", "UMT5EncoderModel")


def is_hf_dir(path: str) -> bool:
    """Whether `path` is a directory with `config.json` and HF weight files."""
    return os.path.isfile(os.path.join(path, CONFIG_FILE)) and any(
        os.path.isfile(os.path.join(path, name)) for name in WEIGHT_FILES
    )


def parameter_map(config: T5Config) -> dict[str, tuple[str, bool]]:
    """Returns {our name: (HF name, transposed)} for every parameter but the
    input embedding (see `_EMBEDDING_NAMES`); a tied config has no head of
    its own."""
    mapping: dict[str, tuple[str, bool]] = {
        "encoder/encoder_norm/scale": ("encoder.final_layer_norm.weight", False),
        "decoder/decoder_norm/scale": ("decoder.final_layer_norm.weight", False),
    }
    mapping.update(_relative_bias_names(config))
    for i in range(config.num_encoder_layers):
        mapping.update(
            _block_names(
                config,
                f"encoder/layers_{i}",
                f"encoder.block.{i}",
                [("attention", "SelfAttention", "pre_attention_layer_norm")],
                mlp_index=1,
            )
        )
    for i in range(config.num_decoder_layers):
        mapping.update(
            _block_names(
                config,
                f"decoder/layers_{i}",
                f"decoder.block.{i}",
                [
                    ("self_attention", "SelfAttention", "pre_self_attention_layer_norm"),
                    (
                        "encoder_decoder_attention",
                        "EncDecAttention",
                        "pre_cross_attention_layer_norm",
                    ),
                ],
                mlp_index=2,
            )
        )
    if not config.tie_word_embeddings:
        mapping["decoder/logits_dense/kernel"] = ("lm_head.weight", True)
    return mapping


def _relative_bias_names(config: T5Config) -> dict[str, tuple[str, bool]]:
    """`parameter_map`'s entries for the relative-position tables: T5/mT5 keep a
    stack's one table in its first block; UMT5 has one in every block."""
    mapping: dict[str, tuple[str, bool]] = {}
    for stack, count in (
        ("encoder", config.num_encoder_layers),
        ("decoder", config.num_decoder_layers),
    ):
        bias = f"{stack}.block.{{}}.layer.0.SelfAttention.relative_attention_bias.weight"
        if config.relative_bias_per_layer:
            for i in range(count):
                mapping[f"{stack}/layers_{i}/relpos_bias/rel_embedding"] = (bias.format(i), True)
        else:
            mapping[f"{stack}/relpos_bias/rel_embedding"] = (bias.format(0), True)
    return mapping


def _block_names(
    config: T5Config,
    ours: str,
    theirs: str,
    sublayers: list[tuple[str, str, str]],
    mlp_index: int,
) -> dict[str, tuple[str, bool]]:
    """`parameter_map`'s entries for one block: its attention sublayers
    (ours, HF's, our norm's name) with their norms, then its MLP."""
    mapping: dict[str, tuple[str, bool]] = {}
    for index, (attention_ours, attention_theirs, norm_ours) in enumerate(sublayers):
        for hf_name, our_name in _ATTENTION:
            mapping[f"{ours}/{attention_ours}/{our_name}/kernel"] = (
                f"{theirs}.layer.{index}.{attention_theirs}.{hf_name}.weight",
                True,
            )
        mapping[f"{ours}/{norm_ours}/scale"] = (f"{theirs}.layer.{index}.layer_norm.weight", False)
    for name in _MLP[config.feed_forward_proj]:
        mapping[f"{ours}/mlp/{name}/kernel"] = (
            f"{theirs}.layer.{mlp_index}.DenseReluDense.{name}.weight",
            True,
        )
    mapping[f"{ours}/pre_mlp_layer_norm/scale"] = (
        f"{theirs}.layer.{mlp_index}.layer_norm.weight",
        False,
    )
    return mapping


# ------------------------------------------------------------------- config
def config_from_hf(hf_config: Mapping[str, Any], source: str) -> T5Config:
    """Builds a `T5Config` from a Hugging Face T5/mT5 `config.json` dict.

    Raises:
      CheckpointError: naming the field, for other model types, a
        feed-forward other than gated-gelu or relu, or an encoder-only model.
    """
    model_type = hf_config.get("model_type")
    if model_type not in ("t5", "mt5", "umt5"):
        raise CheckpointError(f"{source}: model_type {model_type!r} is not a T5/mT5/UMT5 model")
    check_config_values(hf_config, source, _CONFIG_FIELDS)
    _refuse_encoder_only(hf_config, source)
    # HF's defaults: T5Config is v1.0 (ReLU, tied head), MT5Config is v1.1.
    feed_forward = hf_config.get(
        "feed_forward_proj", "relu" if model_type == "t5" else "gated-gelu"
    )
    if feed_forward not in _MLP:
        raise CheckpointError(
            f"{source}: feed_forward_proj={feed_forward!r} is not supported; T5 v1.1 / mT5 use "
            "'gated-gelu' and T5 v1.0 'relu'"
        )
    # HF's T5Config and UMT5Config tie the head by default, MT5Config does not.
    tied = hf_config.get("tie_word_embeddings", model_type != "mt5")
    num_layers = hf_config.get("num_layers")
    try:
        return T5Config(
            vocab_size=hf_config["vocab_size"],
            d_model=hf_config["d_model"],
            d_kv=hf_config["d_kv"],
            d_ff=hf_config["d_ff"],
            num_heads=hf_config["num_heads"],
            num_encoder_layers=hf_config["num_layers"],
            num_decoder_layers=hf_config.get("num_decoder_layers") or num_layers,
            relative_attention_num_buckets=hf_config.get("relative_attention_num_buckets", 32),
            relative_attention_max_distance=hf_config.get("relative_attention_max_distance", 128),
            dropout_rate=hf_config.get("dropout_rate", 0.1),
            layer_norm_epsilon=hf_config.get("layer_norm_epsilon", 1e-6),
            pad_id=hf_config.get("pad_token_id", 0),
            eos_id=hf_config.get("eos_token_id", 1),
            decoder_start_id=hf_config.get("decoder_start_token_id", 0),
            feed_forward_proj=feed_forward,
            tie_word_embeddings=bool(tied),
            relative_bias_per_layer=model_type == "umt5",
        )
    except KeyError as error:
        raise CheckpointError(f"{source}: config.json lacks the field {error}") from error
    except ValueError as error:
        raise CheckpointError(f"{source}: {error}") from error


def _refuse_encoder_only(hf_config: Mapping[str, Any], source: str) -> None:
    """Raises for a model without a decoder: a metric needs one to read P("1")."""
    encoder_only = [name for name in hf_config.get("architectures") or [] if name in _ENCODER_ONLY]
    if encoder_only:
        raise CheckpointError(
            f"{source}: architectures={encoder_only} is an encoder-only model; a SEAHORSE or NLI "
            "metric needs the decoder (T5ForConditionalGeneration / MT5ForConditionalGeneration)"
        )
    if hf_config.get("is_encoder_decoder") is False:
        raise CheckpointError(
            f"{source}: is_encoder_decoder=false; only encoder-decoder T5 models are supported"
        )
    if hf_config.get("num_decoder_layers") == 0:
        raise CheckpointError(
            f"{source}: num_decoder_layers=0 is an encoder-only model; a metric needs the decoder"
        )


def config_to_hf(config: T5Config) -> dict[str, Any]:
    """The config.json dict of `config`: `MT5ForConditionalGeneration` for
    T5 v1.1 / mT5, `T5ForConditionalGeneration` for T5 v1.0 (ReLU, tied),
    `UMT5ForConditionalGeneration` for a relative position bias per layer."""
    if config.relative_bias_per_layer:
        architecture, model_type = "UMT5ForConditionalGeneration", "umt5"
    elif config.tie_word_embeddings:
        architecture, model_type = "T5ForConditionalGeneration", "t5"
    else:
        architecture, model_type = "MT5ForConditionalGeneration", "mt5"
    return {
        "architectures": [architecture],
        "model_type": model_type,
        "vocab_size": config.vocab_size,
        "d_model": config.d_model,
        "d_kv": config.d_kv,
        "d_ff": config.d_ff,
        "num_heads": config.num_heads,
        "num_layers": config.num_encoder_layers,
        "num_decoder_layers": config.num_decoder_layers,
        "relative_attention_num_buckets": config.relative_attention_num_buckets,
        "relative_attention_max_distance": config.relative_attention_max_distance,
        "dropout_rate": config.dropout_rate,
        "layer_norm_epsilon": config.layer_norm_epsilon,
        "feed_forward_proj": config.feed_forward_proj,
        "is_encoder_decoder": True,
        "tie_word_embeddings": config.tie_word_embeddings,
        "pad_token_id": config.pad_id,
        "eos_token_id": config.eos_id,
        "decoder_start_token_id": config.decoder_start_id,
        "tokenizer_class": "T5Tokenizer",
        "torch_dtype": "float32",
    }


# ---------------------------------------------------------------- tensors
def stored_hf_tensors(directory: str) -> readers.StoredTensors:
    """The weights of an HF directory as {torch-style name: StoredTensor};
    only headers and indexes are read.

    Raises:
      FileNotFoundError: if no weight file (or a shard an index names) is there.
      CheckpointError: for an unreadable file or an index that does not match its shards.
    """
    torch_files = readers.TorchFiles()
    path = lambda name: os.path.join(directory, name)  # noqa: E731
    candidates = [
        (SAFETENSORS_FILE, lambda: readers.safetensors_tensors(path(SAFETENSORS_FILE))),
        (
            SAFETENSORS_INDEX_FILE,
            lambda: readers.sharded_tensors(
                path(SAFETENSORS_INDEX_FILE), readers.safetensors_tensors
            ),
        ),
        (TORCH_FILE, lambda: torch_files.tensors(path(TORCH_FILE))),
        (
            TORCH_INDEX_FILE,
            lambda: readers.sharded_tensors(path(TORCH_INDEX_FILE), torch_files.tensors),
        ),
        (FLAX_FILE, lambda: readers.flax_msgpack_tensors(path(FLAX_FILE))),
    ]
    for file_name, read in candidates:
        if os.path.isfile(path(file_name)):
            logger.info("Reading %s", path(file_name))
            return read()
    raise FileNotFoundError(f"{directory}: none of {', '.join(WEIGHT_FILES)} found")


def checked_hf_config(directory: str) -> T5Config:
    """The config of an HF directory, its layer counts checked against the
    tensor names of its weight files (headers only are read)."""
    config_path = os.path.join(directory, CONFIG_FILE)
    config = config_from_hf(readers.read_json_object(config_path), config_path)
    check_layer_claims(
        config,
        stored_hf_tensors(directory),
        config_path,
        ("num_layers", "num_decoder_layers"),
        _HF_LAYER,
    )
    return config


def _check_same_tensor(tensor: StoredTensor, other: StoredTensor, source: str) -> None:
    """Compares two stored tensors block by block (aliases of the embedding,
    and a tied model's head)."""
    hint = (
        " (tie_word_embeddings is true, so the head must be the embedding; set "
        '"tie_word_embeddings": false in config.json if it is a head of its own)'
        if other.name == _TIED_HEAD_NAME
        else ""
    )
    differs = CheckpointError(
        f"{source}: {other.name} differs from {tensor.name}; they must be one tensor{hint}"
    )
    if other.shape != tensor.shape:
        raise differs
    rows = max(1, CHUNK_BYTES // max(1, tensor.dtype.itemsize * int(np.prod(tensor.shape[1:]))))
    rest = tuple(slice(0, n) for n in tensor.shape[1:])
    for start in range(0, tensor.shape[0], rows):
        box = (slice(start, min(start + rows, tensor.shape[0])),) + rest
        if not np.array_equal(tensor.read(box), other.read(box)):
            raise differs


def hf_param_sources(
    config: T5Config, tensors: Mapping[str, StoredTensor], source: str
) -> dict[str, ParamSource]:
    """Maps HF tensors onto the network's flat parameter names (`parameter_map`),
    checking names and shapes before any data is read.

    Raises:
      CheckpointError: naming the parameter, for a missing, unknown or
        mis-shaped tensor, or embedding aliases that differ.
    """
    # config.json's layer counts against the tensors, before a name map is built from them.
    check_layer_claims(
        config,
        tensors,
        os.path.join(source, CONFIG_FILE),
        ("num_layers", "num_decoder_layers"),
        _HF_LAYER,
    )
    remaining = dict(tensors)
    for name in _IGNORED_NAMES:
        if remaining.pop(name, None) is not None:
            logger.info("%s: ignoring %s (unused by T5, as in Hugging Face)", source, name)
    aliases = _EMBEDDING_NAMES + ((_TIED_HEAD_NAME,) if config.tie_word_embeddings else ())
    embeddings = [remaining.pop(name) for name in aliases if name in remaining]
    if not embeddings:
        raise CheckpointError(
            f"{source}: missing the input embedding (one of {list(_EMBEDDING_NAMES)})"
        )
    sources = {"token_embedder/embedding": ParamSource(embeddings[0])}
    missing = []
    for ours, (theirs, transposed) in parameter_map(config).items():
        if theirs not in remaining:
            missing.append(theirs)
            continue
        sources[ours] = ParamSource(remaining.pop(theirs), transposed)
    if missing:
        hint = (
            ' (a tied model? set "tie_word_embeddings": true in config.json)'
            if "lm_head.weight" in missing
            else ""
        )
        raise CheckpointError(f"{source}: missing parameters {missing}{hint}")
    if remaining:
        raise CheckpointError(
            f"{source}: unknown parameters {sorted(remaining)} for a T5 network with "
            f"{config.num_encoder_layers}+{config.num_decoder_layers} layers, "
            f"feed_forward_proj={config.feed_forward_proj!r}, "
            f"tie_word_embeddings={config.tie_word_embeddings}"
        )
    for ours, shape in expected_shapes(config).items():
        if tuple(sources[ours].shape) != shape:
            stored = sources[ours].tensor
            wanted = shape[::-1] if sources[ours].transposed else shape
            raise shape_mismatch(
                source, f"parameter {stored.name}", stored.shape, wanted, config, CONFIG_FILE
            )
    check_params(config, sources, source)
    for other in embeddings[1:]:
        _check_same_tensor(embeddings[0], other, source)
    return sources


def load_hf(
    directory: str, dtype: Optional[str] = None, mesh: Any = None, convert: Optional[Convert] = None
) -> tuple[T5Config, dict]:
    """Loads an HF T5/mT5 directory tensor by tensor.

    Args:
      directory: The HF model directory.
      dtype: Parameter dtype ("float32" by default, or "bfloat16").
      mesh: A ('data', 'model') mesh to place the parameters on by their
        logical axes; None returns host numpy arrays.
      convert: See `streaming.materialise` (int8 scoring quantizes each
        kernel as it is read).

    Returns:
      (config, nested params).
    """
    config = config_from_hf(
        readers.read_json_object(os.path.join(directory, CONFIG_FILE)),
        os.path.join(directory, CONFIG_FILE),
    )
    sources = hf_param_sources(config, stored_hf_tensors(directory), directory)
    shardings = None if mesh is None else param_shardings(config, mesh)
    return config, unflatten(materialise(sources, dtype, directory, shardings, convert))


# ------------------------------------------------------------------ export
def hf_tensors_from_params(config: T5Config, params: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Returns {HF name: float32 array} for the network parameters `params`."""
    flat = {name: np.asarray(value, np.float32) for name, value in flatten(params).items()}
    check_params(config, flat, "params")
    tensors = {"shared.weight": flat["token_embedder/embedding"]}
    for ours, (theirs, transposed) in parameter_map(config).items():
        tensors[theirs] = np.ascontiguousarray(flat[ours].T if transposed else flat[ours])
    return tensors


def export_hf(
    directory: str, config: T5Config, params: Mapping[str, Any], vocab_path: Optional[str] = None
) -> None:
    """Writes config.json + model.safetensors (+ spiece.model when
    `vocab_path` is given) into `directory`: an `MT5ForConditionalGeneration`
    directory, a `T5ForConditionalGeneration` one for T5 v1.0 configs, or
    a `UMT5ForConditionalGeneration` one for `relative_bias_per_layer`.

    Files are written to temporary names and renamed into place.
    """
    from safetensors.numpy import save_file

    if vocab_path is not None and not os.path.isfile(vocab_path):
        raise FileNotFoundError(f"vocabulary {vocab_path} does not exist")
    tensors = hf_tensors_from_params(config, params)
    with staged_path(os.path.join(directory, SAFETENSORS_FILE)) as temporary:
        # HF's loader expects the "pt" format tag on safetensors files.
        save_file(tensors, temporary, metadata={"format": "pt"})
    write_json_atomically(
        os.path.join(directory, CONFIG_FILE), config_to_hf(config), sort_keys=True
    )
    written = [SAFETENSORS_FILE, CONFIG_FILE]
    if vocab_path is not None:
        with staged_path(os.path.join(directory, VOCAB_FILE)) as temporary:
            shutil.copyfile(vocab_path, temporary)
        written.append(VOCAB_FILE)
    logger.info("Exported %s to %s", ", ".join(written), directory)
