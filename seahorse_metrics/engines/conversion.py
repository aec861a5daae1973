"""Converting checkpoints for the ctranslate2 engine, once, into a cache.

    model_dir, converted = converted_model("runs/q4/best", vocab_path, "int8")

A checkpoint (ours, Hugging Face, T5X; hub ids resolved by the caller) is
converted with CTranslate2's own converter (`TransformersConverter`, from
the Hugging Face directory `checkpoints.hf.export_hf` writes), in a child
process so that its copies of the weights leave with it, into a cache
directory keyed by the checkpoint's content, the vocabulary, the compute
type and the CTranslate2 version: a second run loads the conversion. An
int8 conversion is smoothed first (`engines.smoothing`), and the recipe is
part of the key; its weights keep 7 bits on hosts whose int8 products may
saturate (`engines.isa`), also part of the key. A conversion is written to a temporary directory and
renamed into place when complete, so one that was killed is never used (its
leftovers are removed by the next run on this machine once the process that
wrote them is gone). Each entry records its files' SHA-256 when converted;
an entry whose files no longer match (truncated, flipped bytes, replaced)
is said to be damaged, naming the file, and converted again.

The cache directory is, in order: the `cache_dir` argument, the environment
variable `SEAHORSE_METRICS_CTRANSLATE2_CACHE`, and
`$XDG_CACHE_HOME/seahorse-metrics/ctranslate2` (default `~/.cache/...`).
`python -m seahorse_metrics.engines.conversion` is the child process.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Optional, Sequence

import numpy as np

from seahorse_metrics.io.atomic import publish_directory
from seahorse_metrics.io.json_files import read_json_or_none

logger = logging.getLogger(__name__)

INSTALL_HINT = "pip install -e '.[cpu]'"
CACHE_ENV_VAR = "SEAHORSE_METRICS_CTRANSLATE2_CACHE"
# quantize option -> CTranslate2 compute type (weights stored and multiplied so).
COMPUTE_TYPES = {None: "float32", "float32": "float32", "int8": "int8"}
ENGINE_FILE = "seahorse_engine.json"
# Each file's SHA-256, written when converted (hidden: not one of the files it covers).
DIGEST_FILE = ".seahorse_digest.json"
FULL_LEVELS = 127  # int8 weights over their whole range (see engines.isa for 63).
_CONVERTING_PREFIX = ".converting-"


class EngineNotInstalled(ImportError):
    """CTranslate2 (or its converter's transformers/torch) is not installed."""


class ConversionError(ValueError):
    """CTranslate2's converter could not convert a checkpoint (the command
    line reports it in one line; the converter's whole output is in a log
    file the message names)."""


def require_ctranslate2():
    """Imports CTranslate2, with `CT2_FORCE_CPU_ISA` extended to its GEMM
    libraries (`isa.apply_ctranslate2_cap`).

    Raises:
      EngineNotInstalled: with the install command, when it is missing.
    """
    from seahorse_metrics.engines.isa import apply_ctranslate2_cap

    apply_ctranslate2_cap()  # Before its GEMM libraries first read their caps.
    try:
        import ctranslate2
    except ImportError:
        raise EngineNotInstalled(
            f"the ctranslate2 engine needs CTranslate2: run `{INSTALL_HINT}` "
            "(CTranslate2's CPU wheels and its converter's transformers and torch)"
        ) from None
    return ctranslate2


def compute_type_of(quantize: Optional[str]) -> str:
    """The CTranslate2 compute type of a `quantize` option (None -> float32).

    Raises:
      ValueError: for a quantization CTranslate2 is not used with here.
    """
    if quantize not in COMPUTE_TYPES:
        raise ValueError(
            f"quantize={quantize!r} is not available with the ctranslate2 engine; "
            "choose none or int8"
        )
    return COMPUTE_TYPES[quantize]


def cache_directory(cache_dir: Optional[str] = None) -> str:
    """Where conversions are kept (see the module docstring)."""
    if cache_dir:
        return cache_dir
    if os.environ.get(CACHE_ENV_VAR):
        return os.environ[CACHE_ENV_VAR]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "seahorse-metrics", "ctranslate2")


def conversion_key(
    checkpoint: str,
    vocab_path: str,
    compute_type: str,
    smoothing: Optional[dict] = None,
    weight_levels: int = FULL_LEVELS,
) -> str:
    """The cache entry's name: content of checkpoint and vocabulary, compute type,
    CTranslate2 version, any int8 smoothing recipe (its file by content) and
    int8 weight levels other than the full 127."""
    from seahorse_metrics.checkpoints.content import content_digest

    ctranslate2 = require_ctranslate2()
    entry = {
        "checkpoint": content_digest(checkpoint),
        "vocabulary": content_digest(vocab_path),
        "compute_type": compute_type,
        "ctranslate2": ctranslate2.__version__,
    }
    if smoothing is not None:
        entry["smoothing"] = {k: v for k, v in smoothing.items() if k != "calibration"}
    if compute_type == "int8" and weight_levels != FULL_LEVELS:
        entry["weight_levels"] = int(weight_levels)
    payload = json.dumps(entry, sort_keys=True)
    return f"{hashlib.sha256(payload.encode('utf-8')).hexdigest()[:32]}-{compute_type}"


def _remove_abandoned(cache_dir: str) -> None:
    """Removes temporary conversions whose process is gone (killed runs)."""
    for name in os.listdir(cache_dir):
        if not name.startswith(_CONVERTING_PREFIX):
            continue
        pid = name[len(_CONVERTING_PREFIX) :].split("-", 1)[0]
        if pid.isdigit() and not _process_alive(int(pid)):
            logger.info("removing %s, left by a conversion that did not finish", name)
            shutil.rmtree(os.path.join(cache_dir, name), ignore_errors=True)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def converted_model(
    checkpoint: str,
    vocab_path: str,
    compute_type: str = "float32",
    cache_dir: Optional[str] = None,
    in_child: bool = True,
    smoothing: Optional[dict] = None,
    weight_levels: int = FULL_LEVELS,
) -> tuple[str, bool]:
    """The CTranslate2 conversion of a checkpoint, converting it on first use.

    Args:
      checkpoint: A local checkpoint directory `load_checkpoint` reads.
      vocab_path: Its SentencePiece vocabulary.
      compute_type: "float32" or "int8" (the weights are stored so).
      cache_dir: The cache directory (default: see the module docstring).
      in_child: Run the converter in a child process (False: in this one).
      smoothing: The int8 smoothing recipe (`smoothing.recipe`), or None.
      weight_levels: Levels of int8 weights on either side of zero: 127, or
        63 for hosts whose int8 products may saturate (`isa.ctranslate2_weight_levels`).

    Returns:
      (model directory, whether it was converted by this call).

    Raises:
      EngineNotInstalled: without CTranslate2.
      ConversionError: if the conversion in a child fails (its last error
        line included; its whole output kept in `<cache_dir>/<key>.failed.log`).
    """
    cache_dir = cache_directory(cache_dir)
    os.makedirs(cache_dir, exist_ok=True)
    key = conversion_key(checkpoint, vocab_path, compute_type, smoothing, weight_levels)
    final = os.path.join(cache_dir, key)
    if _usable_entry(final, checkpoint):
        return final, False
    _remove_abandoned(cache_dir)
    converted = _convert_into_cache(
        checkpoint, vocab_path, compute_type, final, in_child, smoothing, weight_levels
    )
    return final, converted


def _convert_into_cache(
    checkpoint: str,
    vocab_path: str,
    compute_type: str,
    final: str,
    in_child: bool,
    smoothing: Optional[dict],
    weight_levels: int,
) -> bool:
    """Converts the checkpoint in a staging directory beside `final` and
    publishes it there; False when another process published it first."""
    cache_dir = os.path.dirname(final)
    failed_log = f"{final}.failed.log"
    staging = tempfile.mkdtemp(prefix=f"{_CONVERTING_PREFIX}{os.getpid()}-", dir=cache_dir)
    try:
        start = time.perf_counter()
        output_dir = os.path.join(staging, "model")
        if in_child:
            _convert_in_child(
                checkpoint,
                vocab_path,
                output_dir,
                compute_type,
                failed_log,
                smoothing,
                weight_levels,
            )
        else:
            convert_checkpoint(
                checkpoint, vocab_path, output_dir, compute_type, smoothing, weight_levels
            )
        write_digest(output_dir)
        if not publish_directory(output_dir, final):  # Another process converted it first.
            return False
        if os.path.exists(failed_log):  # a failed attempt's log, now stale
            os.remove(failed_log)
        logger.info(
            "converted %s to CTranslate2 %s in %.1f s: %s",
            checkpoint,
            compute_type,
            time.perf_counter() - start,
            final,
        )
        return True
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _usable_entry(entry: str, checkpoint: str) -> bool:
    """Whether a cache entry exists intact; a damaged one is named and discarded."""
    if not os.path.isdir(entry):
        return False
    damage = damaged_entry(entry)
    if damage is None:
        return True
    logger.warning("%s; converting %s again", damage, checkpoint)
    _discard(entry)
    return False


def write_digest(model_dir: str) -> None:
    """Records each file's SHA-256 in `DIGEST_FILE` (checked by `damaged_entry`)."""
    from seahorse_metrics.checkpoints.content import file_entries

    digest = {entry["name"]: entry["sha256"] for entry in file_entries(model_dir)}
    with open(os.path.join(model_dir, DIGEST_FILE), "w", encoding="utf-8") as handle:
        json.dump(digest, handle, indent=2, sort_keys=True)


def damaged_entry(model_dir: str) -> Optional[str]:
    """What is wrong with a cache entry ("<file>: ..."), or None when every
    file has the content recorded when it was converted. Files are hashed
    again only when their size, times or inode changed (`content.file_entries`)."""
    from seahorse_metrics.checkpoints.content import file_entries

    digest_path = os.path.join(model_dir, DIGEST_FILE)
    recorded = read_json_or_none(digest_path)
    if not isinstance(recorded, dict):
        return f"{digest_path}: missing or unreadable (an earlier version's or a torn entry)"
    found = {entry["name"]: entry["sha256"] for entry in file_entries(model_dir)}
    for name in sorted(set(recorded) | set(found)):
        if recorded.get(name) != found.get(name):
            what = (
                "is missing"
                if name not in found
                else (
                    "is not part of the conversion"
                    if name not in recorded
                    else "differs from what was converted (damaged or replaced)"
                )
            )
            return f"{os.path.join(model_dir, name)} {what}"
    return None


def _discard(model_dir: str) -> None:
    """Moves a damaged entry aside (atomically), then removes it."""
    aside = os.path.join(
        os.path.dirname(model_dir),
        f"{_CONVERTING_PREFIX}{os.getpid()}-damaged-{os.path.basename(model_dir)}",
    )
    try:
        os.rename(model_dir, aside)
    except FileNotFoundError:  # Another process discarded it first.
        return
    shutil.rmtree(aside, ignore_errors=True)


def _convert_in_child(
    checkpoint: str,
    vocab_path: str,
    output_dir: str,
    compute_type: str,
    log_path: str,
    smoothing: Optional[dict] = None,
    weight_levels: int = FULL_LEVELS,
) -> None:
    """Runs `convert_checkpoint` in a child process (its memory leaves with it);
    if it fails, its output goes to `log_path` and its last error line into
    the `ConversionError`."""
    command = [
        sys.executable,
        "-m",
        __name__,
        "--checkpoint",
        checkpoint,
        "--vocab",
        vocab_path,
        "--output_dir",
        output_dir,
        "--compute_type",
        compute_type,
        "--weight_levels",
        str(weight_levels),
    ]
    if smoothing is not None:
        command += ["--smoothing", json.dumps(smoothing)]
    environment = dict(os.environ)
    environment.setdefault("JAX_PLATFORMS", "cpu")  # It only reads and writes files.
    done = subprocess.run(command, capture_output=True, text=True, env=environment)
    if not done.returncode and os.path.isfile(os.path.join(output_dir, ENGINE_FILE)):
        return
    with open(log_path, "w", encoding="utf-8") as handle:
        handle.write(f"$ {' '.join(command)}\n{done.stdout}{done.stderr}")
    lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
    reason = lines[-1] if lines else f"exit status {done.returncode}, no output"
    raise ConversionError(
        f"converting {checkpoint} to CTranslate2 {compute_type} failed: "
        f"{reason} (the converter's output: {log_path})"
    )


def convert_checkpoint(
    checkpoint: str,
    vocab_path: str,
    output_dir: str,
    compute_type: str,
    smoothing: Optional[dict] = None,
    weight_levels: int = FULL_LEVELS,
) -> None:
    """Converts a checkpoint with CTranslate2's `TransformersConverter`, in this process.

    The checkpoint is read in float32 and written as a Hugging Face
    directory next to `output_dir` (`export_hf`, with a tokenizer config
    that adds no sentinel pieces, so the vocabulary is the SentencePiece
    model's, padded by the converter to the model's rows), then converted;
    with a `smoothing` recipe, the model the converter loads is smoothed
    first (`engines.smoothing`), on the recipe's calibration pairs. Int8
    weights are quantized by `save_int8` to `weight_levels` levels.
    """
    require_ctranslate2()
    os.environ.setdefault("USE_TF", "0")  # transformers must not import TensorFlow.
    from seahorse_metrics.checkpoints import load_checkpoint
    from seahorse_metrics.checkpoints.hf import export_hf
    from seahorse_metrics.engines import smoothing as smoothing_lib

    config, params = load_checkpoint(checkpoint, dtype="float32")
    parent = os.path.dirname(os.path.abspath(output_dir))
    with tempfile.TemporaryDirectory(prefix=".hf-", dir=parent) as hf_dir:
        export_hf(hf_dir, config, params, vocab_path=vocab_path)
        del params
        with open(os.path.join(hf_dir, "tokenizer_config.json"), "w", encoding="utf-8") as handle:
            json.dump({"extra_ids": 0, "legacy": True}, handle)
        converter = smoothing_lib.converter(hf_dir, vocab_path, smoothing)
        if compute_type == "int8":
            save_int8(converter, output_dir, weight_levels)
        else:
            converter.convert(output_dir, quantization=compute_type)
    with open(os.path.join(output_dir, ENGINE_FILE), "w", encoding="utf-8") as handle:
        json.dump(
            {
                "checkpoint": os.path.abspath(checkpoint),
                "compute_type": compute_type,
                "weight_levels": weight_levels if compute_type == "int8" else None,
                "smoothing": converter.smoothing_report,
                "config": config.to_dict(),
            },
            handle,
            indent=2,
        )


def round_rows(weights: np.ndarray, levels: int) -> tuple[np.ndarray, np.ndarray]:
    """(int8 values in [-levels, levels], float32 scale per row) of a weight,
    `values ~ weights * scale` row by row (CTranslate2's scheme, `levels`
    instead of its 127; an all-zero row gets scale 1)."""
    weights = np.asarray(weights, np.float32)
    largest_R = np.abs(weights.reshape(len(weights), -1)).max(axis=1)
    largest_R = np.maximum(
        np.where(largest_R == 0, np.float32(levels), largest_R),
        np.float32(levels) / np.finfo(np.float32).max,
    )
    scale_R = (np.float32(levels) / largest_R).astype(np.float32)
    scaled = weights * scale_R.reshape((-1,) + (1,) * (weights.ndim - 1))
    return np.rint(scaled).astype(np.int8), scale_R


def save_int8(converter: Any, output_dir: str, levels: int = FULL_LEVELS) -> None:
    """What `converter.convert(output_dir, quantization="int8")` does, with the
    weights rounded to `levels` levels on either side of zero.

    CTranslate2 quantizes each weight its spec gives a `<name>_scale` to,
    per output row, to 127 levels (`scale = 127 / max|row|`); at 127 this
    writes the same file (a test compares them byte for byte). Fewer levels
    keep the int8 products of hosts without VNNI from saturating (`engines.isa`).
    """
    from ctranslate2.specs import model_spec

    spec = converter._load()  # The spec `Converter.convert` builds, before it optimizes.
    spec.validate()
    spec.optimize(quantization="float32")  # Aliases shared weights, keeps float32.

    def quantize(layer, name, value):
        key = name.rpartition("/")[2]
        if (
            not hasattr(layer, f"{key}_scale")
            or not isinstance(value, model_spec.Variable)
            or value.is_scalar()
        ):
            return
        rounded, scale_R = round_rows(value.to("float32").numpy(), levels)
        setattr(layer, key, model_spec.NumpyVariable(rounded))
        setattr(layer, f"{key}_scale", model_spec.NumpyVariable(scale_R))

    model_spec.visit_spec(spec, quantize)
    os.makedirs(output_dir)
    spec.save(output_dir)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The child process of `converted_model`: one `convert_checkpoint` call."""
    parser = argparse.ArgumentParser(
        description="Converts a checkpoint for the ctranslate2 engine."
    )
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--vocab", required=True)
    parser.add_argument("--output_dir", required=True)
    parser.add_argument(
        "--compute_type", required=True, choices=sorted(set(COMPUTE_TYPES.values()))
    )
    parser.add_argument(
        "--smoothing",
        type=json.loads,
        default=None,
        help="The int8 smoothing recipe, as JSON (see `smoothing.recipe`).",
    )
    parser.add_argument(
        "--weight_levels",
        type=int,
        default=FULL_LEVELS,
        help="Levels of int8 weights on either side of zero (127 or 63).",
    )
    args = parser.parse_args(argv)
    convert_checkpoint(
        args.checkpoint,
        args.vocab,
        args.output_dir,
        args.compute_type,
        args.smoothing,
        args.weight_levels,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
