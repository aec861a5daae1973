"""Checks of loaded parameter trees against the network's expected shapes,
and of the reads themselves (`reading` names a damaged file)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import re
from typing import Any, Iterable, Iterator, Mapping, Optional

import numpy as np

from seahorse_metrics.model.config import T5Config

FlatParams = dict[str, np.ndarray]

_FLOAT_KINDS = ("float32", "bfloat16", "float16", "float64")


class CheckpointError(ValueError):
    """A checkpoint that does not fit the network: missing, unknown or
    mis-shaped parameters, an unsupported config, or an unreadable layout."""


@contextlib.contextmanager
def reading(path: str, what: str = "file") -> Iterator[None]:
    """Turns any failure while reading `path` into a `CheckpointError` naming it.

    Checkpoint libraries report a cut-short or corrupted file in many ways
    (safetensors, pickle, msgpack, TensorStore and OCDBT errors, even an
    `AttributeError`); the user needs to know which file to copy again.
    Errors that already say what to do (CheckpointError, a missing file or
    dependency) pass through.
    """
    try:
        yield
    except (CheckpointError, FileNotFoundError, ImportError, MemoryError, KeyboardInterrupt):
        raise
    except Exception as error:  # the readers' own error types vary
        detail = " ".join(str(error).split())[:300] or type(error).__name__
        raise CheckpointError(
            f"{path}: cannot read this checkpoint {what} ({type(error).__name__}: {detail}); it "
            "is damaged or incomplete (a copy or download cut short?): copy it again"
        ) from error


def expected_shapes(config: T5Config) -> dict[str, tuple[int, ...]]:
    """Returns {"encoder/layers_0/attention/query/kernel": shape, ...} for `config`,
    traced with `jax.eval_shape` (nothing is allocated); a fresh dict each call."""
    return dict(_traced_shapes(config))


@functools.lru_cache(maxsize=16)
def _traced_shapes(config: T5Config) -> tuple[tuple[str, tuple[int, ...]], ...]:
    # Cached as an immutable tuple: a caller changing its dict cannot change the next one's.
    from seahorse_metrics.model.model import EncoderDecoderModel

    abstract = EncoderDecoderModel(config).abstract_params()
    return tuple((name, tuple(leaf.shape)) for name, leaf in flatten(abstract).items())


def flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Flattens nested dicts to {"a/b/c": leaf}."""
    flat = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, name + "/"))
        else:
            flat[name] = value
    return flat


def unflatten(flat: Mapping[str, Any]) -> dict[str, Any]:
    """Inverse of `flatten`."""
    tree: dict[str, Any] = {}
    for name, value in flat.items():
        *parents, leaf = name.split("/")
        node = tree
        for parent in parents:
            node = node.setdefault(parent, {})
        node[leaf] = value
    return tree


_JSON_TYPES = {
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
    "str": (str,),
    "Optional[str]": (str, type(None)),
}


def check_config_values(
    values: Mapping[str, Any], source: str, names: Optional[Mapping[str, str]] = None
) -> None:
    """Raises unless every value a config file gives has its field's JSON
    type: a number of layers or a vocabulary size written as the string
    "6144" is refused here, in one line, rather than deep in the network.

    Args:
      values: The file's {key: value}.
      source: The file, for the message.
      names: {key in the file: T5Config field} when the file's keys differ
        (Hugging Face's `num_layers`); by default the keys are the fields.

    Raises:
      CheckpointError: naming the file, the key and the value.
    """
    fields = {
        field.name: getattr(field.type, "__name__", str(field.type))
        for field in dataclasses.fields(T5Config)
    }
    for key, value in values.items():
        field = key if names is None else names.get(key)
        expected = _JSON_TYPES.get(fields.get(field, ""))
        if expected is None or (value is None and names is not None):  # HF defaults a null
            continue
        if not isinstance(value, expected) or (isinstance(value, bool) and bool not in expected):
            kind = {
                "int": "a whole number",
                "float": "a number",
                "bool": "true or false",
                "str": "a string",
            }.get(fields[field], "a string or null")
            raise CheckpointError(f"{source}: {key} is {json.dumps(value)}, not {kind}")


def _layers_present(names: Iterable[str], pattern: "re.Pattern[str]") -> int:
    """How many layers names matching `pattern` (group 1: the index) hold."""
    indices = {int(match.group(1)) for name in names for match in [pattern.match(name)] if match}
    return len(indices)


_OUR_LAYER = {stack: re.compile(rf"^{stack}/layers_(\d+)/") for stack in ("encoder", "decoder")}


def check_layer_claims(
    config: T5Config,
    names: Iterable[str],
    source: str,
    fields: tuple[str, str] = ("num_encoder_layers", "num_decoder_layers"),
    patterns: Optional[Mapping[str, "re.Pattern[str]"]] = None,
) -> None:
    """Raises if the config claims more or fewer layers than the checkpoint's
    tensors hold, before anything is built from the claim (tracing a network
    of 10^9 layers would take the machine's memory).

    Args:
      config: The config read from the checkpoint's config file.
      names: The tensor names the checkpoint holds.
      source: The config file, for the message.
      fields: How the file names the encoder and decoder layer counts.
      patterns: {"encoder"|"decoder": regex whose group 1 is a layer index};
        default: this network's names (`encoder/layers_0/...`).

    Raises:
      CheckpointError: naming the field, its claim and what the tensors hold.
    """
    names = list(names)
    patterns = patterns or _OUR_LAYER
    for (stack, pattern), field, claimed in zip(
        patterns.items(), fields, (config.num_encoder_layers, config.num_decoder_layers)
    ):
        present = _layers_present(names, pattern)
        if claimed != present:
            raise CheckpointError(
                f"{source}: {field}={claimed}, but the checkpoint's tensors "
                f"hold {present} {stack} layers"
            )


_SIZE_FIELDS = (
    "vocab_size",
    "d_model",
    "d_ff",
    "num_heads",
    "d_kv",
    "relative_attention_num_buckets",
)


def config_sizes(config: T5Config, shape: Iterable[int] = ()) -> str:
    """The config's sizes a reader needs beside a shape: those equal to one of
    `shape`'s dimensions (all sizes when none is), e.g. "vocab_size=1000, d_model=32"."""
    dims = set(shape)
    named = [
        f"{name}={getattr(config, name)}" for name in _SIZE_FIELDS if getattr(config, name) in dims
    ]
    return ", ".join(named or [f"{name}={getattr(config, name)}" for name in _SIZE_FIELDS])


def shape_mismatch(
    source: str,
    name: str,
    stored: tuple,
    expected: tuple,
    config: T5Config,
    config_name: str = "the config",
) -> "CheckpointError":
    """The error of a stored tensor whose shape the config does not call for,
    both shapes in the stored tensor's orientation, naming only the config's
    sizes that differ (a whole `T5Config` ran to 700 characters)."""
    stored, expected = tuple(stored), tuple(expected)
    differing = [want for have, want in zip(stored, expected) if have != want] or expected
    return CheckpointError(
        f"{source}: {name} has shape {stored}, but {config_name} "
        f"({config_sizes(config, differing)}) calls for {expected}"
    )


def _listed(names: list[str], most: int = 3) -> str:
    """At most `most` names, and how many more."""
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def check_params(config: T5Config, flat: Mapping[str, Any], source: str) -> None:
    """Raises `CheckpointError` unless `flat` has exactly the network's parameters,
    each with the expected shape and a floating dtype.

    Args:
      config: The network's config.
      flat: {"encoder/layers_0/...": array} as returned by `flatten`.
      source: Where the parameters came from, for the error message.
    """
    expected = expected_shapes(config)
    missing = sorted(set(expected) - set(flat))
    unknown = sorted(set(flat) - set(expected))
    if missing or unknown:
        raise CheckpointError(
            f"{source}: parameters do not match a T5 network of "
            f"{config.num_encoder_layers}+{config.num_decoder_layers} layers, "
            f"feed_forward_proj={config.feed_forward_proj!r}: "
            + (f"missing {_listed(missing)}" if missing else "")
            + ("; " if missing and unknown else "")
            + (f"unknown {_listed(unknown)}" if unknown else "")
            + ". Check that the checkpoint is a T5 model of the configured size and variant."
        )
    for name, shape in expected.items():
        value = flat[name]
        if tuple(value.shape) != shape:
            raise shape_mismatch(source, f"parameter {name}", value.shape, shape, config)
        if np.dtype(value.dtype).name not in _FLOAT_KINDS:
            raise CheckpointError(
                f"{source}: parameter {name} has dtype {value.dtype}, expected a float type "
                f"({', '.join(_FLOAT_KINDS)})"
            )


def numpy_dtype(name: Any) -> np.dtype:
    """The numpy dtype of a name ("float32", "bfloat16" as `ml_dtypes.bfloat16`, ...).

    Raises:
      ValueError: for a name numpy does not know.
    """
    if str(name) == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    try:
        return np.dtype(name)
    except TypeError as error:
        raise ValueError(f"Unknown dtype {name!r}; use 'float32' or 'bfloat16'") from error


_numpy_dtype = numpy_dtype  # The name the test fixtures know.
