"""CTranslate2 as the scorer's model call: CPUs, float32 or int8 GEMMs.

    scorer = Scorer.load("runs/q4/best", engine="ctranslate2", quantize="int8")

    # What the scorer does with it:
    model, converted = load_converted("runs/q4/best", vocab_path, quantize="int8")
    runner = CTranslate2Runner.of(converted, model.config, tokenizer, (one_id, zero_id))
    log_probs = np.asarray(runner(runner.put(tokens)))   # float32 [rows, 2]

A checkpoint (ours, Hugging Face, T5X; hub ids resolved by the caller) is
converted once with CTranslate2's own converter (`TransformersConverter`,
from the Hugging Face directory `checkpoints.hf.export_hf` writes), in a
child process so that its copies of the weights leave with it, into a cache
directory keyed by the checkpoint's content, the vocabulary, the compute
type and the CTranslate2 version: a second run loads the conversion. An
int8 conversion is smoothed first (`engines.smoothing`, SmoothQuant on
calibration pairs; the float model is unchanged), which brings its ranks
closer to float32's; the recipe is part of the cache key. A
conversion is written to a temporary directory and renamed into place when
complete, so one that was killed is never used (its leftovers are removed
by the next run on this machine once the process that wrote them is gone).

The model call runs each padded batch the scorer built (its buckets and
windows) as one CTranslate2 batch: the encoder over the real tokens, one
decoder step from the start token, and the full-vocabulary logits of that
step, whose log-softmax gives log P("1") and log P("0"), as the JAX runner
reads them. CTranslate2 reads token strings: ids are turned into the
vocabulary's pieces, after checking that the converted vocabulary maps
every piece back to the same id. Packed batches and device meshes are JAX's
and are refused.

The cache directory is, in order: the `cache_dir` argument, the environment
variable `SEAHORSE_METRICS_CTRANSLATE2_CACHE`, and
`$XDG_CACHE_HOME/seahorse-metrics/ctranslate2` (default `~/.cache/...`).
"""
from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import errno
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Mapping, Optional, Sequence

import numpy as np

logger = logging.getLogger(__name__)

INSTALL_HINT = "pip install -e '.[cpu]'"
CACHE_ENV_VAR = "SEAHORSE_METRICS_CTRANSLATE2_CACHE"
# quantize option -> CTranslate2 compute type (weights stored and multiplied so).
COMPUTE_TYPES = {None: "float32", "float32": "float32", "int8": "int8"}
ENGINE_FILE = "seahorse_engine.json"
_CONVERTING_PREFIX = ".converting-"
_VOCABULARY_FILES = ("shared_vocabulary.json", "target_vocabulary.json")
# Every CTranslate2 call of the process goes through these workers, and
# computes only while it holds one of the process's compute slots (shared by
# every metric's translator, or each would start all its threads at once):
# `threads / threads_per_batch` slots, one core count of work each.
_CALLS = concurrent.futures.ThreadPoolExecutor(max_workers=len(os.sched_getaffinity(0)),
                                               thread_name_prefix="ctranslate2")
_SLOTS: dict[int, threading.BoundedSemaphore] = {}
_SLOTS_LOCK = threading.Lock()


def thread_split(threads: Optional[int], threads_per_batch: int = 1) -> tuple[int, int]:
    """CTranslate2's (inter_threads, intra_threads): batches computing side by
    side, and the threads of each, for `threads` in all (None: every usable
    core) and `threads_per_batch` threads per batch.

    Raises:
      ValueError: naming `threads_per_batch` unless it is a whole number >= 1.
    """
    if isinstance(threads_per_batch, bool) or not isinstance(threads_per_batch, int) or (
            threads_per_batch < 1):
        raise ValueError(f"engine option threads_per_batch must be a whole number >= 1, got "
                         f"{threads_per_batch!r}")
    threads = threads or len(os.sched_getaffinity(0))
    intra_threads = min(threads_per_batch, threads)
    return max(1, threads // intra_threads), intra_threads


def _compute_slots(count: int) -> threading.BoundedSemaphore:
    """The process's `count` compute slots, one semaphore per count."""
    with _SLOTS_LOCK:
        return _SLOTS.setdefault(count, threading.BoundedSemaphore(count))


class EngineNotInstalled(ImportError):
    """CTranslate2 (or its converter's transformers/torch) is not installed."""


class ConversionError(ValueError):
    """CTranslate2's converter could not convert a checkpoint (the command
    line reports it in one line; the converter's whole output is in a log
    file the message names)."""


def require_ctranslate2():
    """Imports CTranslate2.

    Raises:
      EngineNotInstalled: with the install command, when it is missing.
    """
    try:
        import ctranslate2
    except ImportError:
        raise EngineNotInstalled(
            f"the ctranslate2 engine needs CTranslate2: run `{INSTALL_HINT}` "
            "(CTranslate2's CPU wheels and its converter's transformers and torch)") from None
    return ctranslate2


def compute_type_of(quantize: Optional[str]) -> str:
    """The CTranslate2 compute type of a `quantize` option (None -> float32).

    Raises:
      ValueError: for a quantization CTranslate2 is not used with here.
    """
    if quantize not in COMPUTE_TYPES:
        raise ValueError(f"quantize={quantize!r} is not available with the ctranslate2 engine; "
                         "choose none or int8")
    return COMPUTE_TYPES[quantize]


def cache_directory(cache_dir: Optional[str] = None) -> str:
    """Where conversions are kept (see the module docstring)."""
    if cache_dir:
        return cache_dir
    if os.environ.get(CACHE_ENV_VAR):
        return os.environ[CACHE_ENV_VAR]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "seahorse-metrics", "ctranslate2")


# ------------------------------------------------------------- conversion
def conversion_key(checkpoint: str, vocab_path: str, compute_type: str,
                   smoothing: Optional[dict] = None) -> str:
    """The cache entry's name: content of checkpoint and vocabulary, compute type,
    CTranslate2 version, and any int8 smoothing recipe (its file by content)."""
    from seahorse_metrics.checkpoints.content import content_digest

    ctranslate2 = require_ctranslate2()
    entry = {"checkpoint": content_digest(checkpoint), "vocabulary": content_digest(vocab_path),
             "compute_type": compute_type, "ctranslate2": ctranslate2.__version__}
    if smoothing is not None:
        entry["smoothing"] = {k: v for k, v in smoothing.items() if k != "calibration"}
    payload = json.dumps(entry, sort_keys=True)
    return f"{hashlib.sha256(payload.encode('utf-8')).hexdigest()[:32]}-{compute_type}"


def _remove_abandoned(cache_dir: str) -> None:
    """Removes temporary conversions whose process is gone (killed runs)."""
    for name in os.listdir(cache_dir):
        if not name.startswith(_CONVERTING_PREFIX):
            continue
        pid = name[len(_CONVERTING_PREFIX):].split("-", 1)[0]
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


def converted_model(checkpoint: str, vocab_path: str, compute_type: str = "float32",
                    cache_dir: Optional[str] = None, in_child: bool = True,
                    smoothing: Optional[dict] = None) -> tuple[str, bool]:
    """The CTranslate2 conversion of a checkpoint, converting it on first use.

    Args:
      checkpoint: A local checkpoint directory `load_checkpoint` reads.
      vocab_path: Its SentencePiece vocabulary.
      compute_type: "float32" or "int8" (the weights are stored so).
      cache_dir: The cache directory (default: see the module docstring).
      in_child: Run the converter in a child process (False: in this one).
      smoothing: The int8 smoothing recipe (`smoothing.recipe`), or None.

    Returns:
      (model directory, whether it was converted by this call).

    Raises:
      EngineNotInstalled: without CTranslate2.
      ConversionError: if the conversion in a child fails (its last error
        line included; its whole output kept in `<cache_dir>/<key>.failed.log`).
    """
    cache_dir = cache_directory(cache_dir)
    os.makedirs(cache_dir, exist_ok=True)
    key = conversion_key(checkpoint, vocab_path, compute_type, smoothing)
    final = os.path.join(cache_dir, key)
    if os.path.isdir(final):
        return final, False
    _remove_abandoned(cache_dir)
    staging = tempfile.mkdtemp(prefix=f"{_CONVERTING_PREFIX}{os.getpid()}-", dir=cache_dir)
    try:
        start = time.perf_counter()
        output_dir = os.path.join(staging, "model")
        if in_child:
            _convert_in_child(checkpoint, vocab_path, output_dir, compute_type,
                              os.path.join(cache_dir, f"{key}.failed.log"), smoothing)
        else:
            convert_checkpoint(checkpoint, vocab_path, output_dir, compute_type, smoothing)
        try:
            os.rename(output_dir, final)
        except OSError as error:  # Another process finished the same conversion first.
            if error.errno not in (errno.EEXIST, errno.ENOTEMPTY) or not os.path.isdir(final):
                raise
            return final, False
        stale_log = os.path.join(cache_dir, f"{key}.failed.log")
        if os.path.exists(stale_log):
            os.remove(stale_log)
        logger.info("converted %s to CTranslate2 %s in %.1f s: %s", checkpoint, compute_type,
                    time.perf_counter() - start, final)
        return final, True
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _convert_in_child(checkpoint: str, vocab_path: str, output_dir: str, compute_type: str,
                      log_path: str, smoothing: Optional[dict] = None) -> None:
    """Runs `convert_checkpoint` in a child process (its memory leaves with it);
    if it fails, its output goes to `log_path` and its last error line into
    the `ConversionError`."""
    command = [sys.executable, "-m", __name__, "--checkpoint", checkpoint, "--vocab", vocab_path,
               "--output_dir", output_dir, "--compute_type", compute_type]
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
    raise ConversionError(f"converting {checkpoint} to CTranslate2 {compute_type} failed: "
                          f"{reason} (the converter's output: {log_path})")


def convert_checkpoint(checkpoint: str, vocab_path: str, output_dir: str,
                       compute_type: str, smoothing: Optional[dict] = None) -> None:
    """Converts a checkpoint with CTranslate2's `TransformersConverter`, in this process.

    The checkpoint is read in float32 and written as a Hugging Face
    directory next to `output_dir` (`export_hf`, with a tokenizer config
    that adds no sentinel pieces, so the vocabulary is the SentencePiece
    model's, padded by the converter to the model's rows), then converted;
    with a `smoothing` recipe, the model the converter loads is smoothed
    first (`engines.smoothing`), on the recipe's calibration pairs.
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
        converter.convert(output_dir, quantization=compute_type)
    with open(os.path.join(output_dir, ENGINE_FILE), "w", encoding="utf-8") as handle:
        json.dump({"checkpoint": os.path.abspath(checkpoint), "compute_type": compute_type,
                   "smoothing": converter.smoothing_report, "config": config.to_dict()},
                  handle, indent=2)


# ---------------------------------------------------------------- loading
ENGINE_OPTIONS = ("cache_dir", "threads", "threads_per_batch", "convert_in_child",
                  "int8_smoothing", "smoothing_data", "smoothing_pairs")


def check_engine_settings(engine: str, *, dtype: Optional[str] = None, mesh: Any = None,
                          packing: bool = False, scan_layers: bool = False) -> None:
    """Refuses what only the JAX engine does, in one line each.

    Raises:
      ValueError: for an unknown engine, a mesh, packing, scanned layers or
        a dtype other than float32 with the ctranslate2 engine.
    """
    from seahorse_metrics.engines import ENGINES

    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; choose one of {ENGINES}")
    if engine != "ctranslate2":
        return
    if mesh is not None:
        raise ValueError("the ctranslate2 engine runs on this machine's CPUs: a device mesh "
                         "is the jax engine's (drop the mesh, or use engine jax)")
    if packing:
        raise ValueError("packing is the jax engine's (block-diagonal attention); drop it "
                         "with the ctranslate2 engine")
    if scan_layers:
        raise ValueError("scan_layers is the jax engine's (nn.scan); drop it with the "
                         "ctranslate2 engine")
    if dtype not in (None, "float32"):
        raise ValueError(f"dtype {dtype!r} is the jax engine's; the ctranslate2 engine computes "
                         "in float32, or int8 with quantize='int8'")


def load_converted(checkpoint: str, vocab_path: str, quantize: Optional[str] = None,
                   engine_options: Optional[dict] = None) -> tuple["EngineModel", "ConvertedModel"]:
    """Converts a checkpoint for CTranslate2 (once; see `converted_model`).

    Args:
      checkpoint: A local checkpoint directory `load_checkpoint` reads.
      vocab_path: Its SentencePiece vocabulary.
      quantize: None (float32) or "int8".
      engine_options: `cache_dir` (where conversions are kept), `threads`
        (CPU threads of CTranslate2), `threads_per_batch` (default 1: batches
        compute side by side, one core each, which `bench/score.py` measured
        faster than all cores on one batch), `convert_in_child` (default
        True: the converter runs in a child process; False runs it here,
        quicker for small models); with int8, `int8_smoothing`,
        `smoothing_data` and `smoothing_pairs` (see `smoothing.recipe`).

    Returns:
      (the model's `EngineModel`, its `ConvertedModel`) for `MultiScorer(models=...)`.

    Raises:
      EngineNotInstalled: without CTranslate2.
      ValueError: for an unknown engine option or quantization.
    """
    from seahorse_metrics.checkpoints import checkpoint_config
    from seahorse_metrics.engines import smoothing as smoothing_lib

    options = dict(engine_options or {})
    unknown = sorted(set(options) - set(ENGINE_OPTIONS))
    if unknown:
        raise ValueError(f"unknown engine options {unknown}; choose from {ENGINE_OPTIONS}")
    compute_type = compute_type_of(quantize)
    thread_split(options.get("threads"), options.get("threads_per_batch", 1))  # checked early
    smoothing = smoothing_lib.recipe(compute_type, options)
    require_ctranslate2()
    config = checkpoint_config(checkpoint)
    model_dir, _ = converted_model(checkpoint, vocab_path, compute_type, options.get("cache_dir"),
                                   options.get("convert_in_child", True), smoothing)
    quantized = None if compute_type == "float32" else compute_type
    return (EngineModel(config.replace(dtype="float32", quantize=quantized)),
            ConvertedModel(model_dir, compute_type, options.get("threads"),
                           options.get("threads_per_batch", 1)))


def converted_models(checkpoints: Mapping[str, str], vocab_path: str, options: Any, mesh: Any,
                     engine_options: Optional[Mapping[str, Any]]) -> dict[str, tuple]:
    """name -> (`EngineModel`, `ConvertedModel`) for `MultiScorer(models=...)`.

    Args:
      checkpoints: name -> local checkpoint directory.
      vocab_path: Their SentencePiece vocabulary.
      options: The `ScoringOptions` (its engine, dtype, quantize, packing,
        scan_layers are checked by `check_engine_settings`).
      mesh: The mesh asked for (refused), or None.
      engine_options: See `load_converted`.
    """
    check_engine_settings(options.engine, dtype=options.dtype, mesh=mesh,
                          packing=options.packing, scan_layers=options.scan_layers)
    return {name: load_converted(path, vocab_path, options.quantize, dict(engine_options or {}))
            for name, path in checkpoints.items()}


def engine_runners(models: Mapping[str, tuple], tokenizer,
                   token_ids: Sequence[int]) -> Optional[list["CTranslate2Runner"]]:
    """A `CTranslate2Runner` per model when `models` holds converted models
    (`converted_models`), else None."""
    if not any(isinstance(params, ConvertedModel) for _, params in models.values()):
        return None
    return [CTranslate2Runner.of(params, model.config, tokenizer, token_ids)
            for model, params in models.values()]


def engine_name(runner: Any) -> str:
    """The engine of a scorer's model call ("jax" for `ModelRunner`)."""
    return getattr(runner, "engine", "jax")


def conversion_name(runner: "CTranslate2Runner") -> str:
    """The runner's cache entry: a digest of what makes its scores (see
    `conversion_key`), the same on every machine."""
    return os.path.basename(os.path.normpath(runner.model_dir))


# ------------------------------------------------------------- model call
def read_vocabulary(model_dir: str) -> list[str]:
    """The converted model's token strings, in id order."""
    for name in _VOCABULARY_FILES:
        path = os.path.join(model_dir, name)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as handle:
                return json.load(handle)
    raise FileNotFoundError(f"{model_dir}: no CTranslate2 vocabulary file ({_VOCABULARY_FILES})")


def check_vocabulary(vocabulary: Sequence[str], tokenizer, model_dir: str) -> None:
    """Raises unless every piece of `tokenizer` has its own id in `vocabulary`.

    Raises:
      ValueError: naming the first id that differs, or a repeated piece.
    """
    for token_id in range(tokenizer.vocab_size):
        piece = tokenizer.id_to_piece(token_id)
        if token_id >= len(vocabulary) or vocabulary[token_id] != piece:
            theirs = vocabulary[token_id] if token_id < len(vocabulary) else None
            raise ValueError(f"{model_dir}: the CTranslate2 vocabulary gives id {token_id} "
                             f"{theirs!r}, the vocabulary {tokenizer.path} {piece!r}")
    if len(set(vocabulary)) != len(vocabulary):
        raise ValueError(f"{model_dir}: the CTranslate2 vocabulary repeats a piece, so pieces "
                         "cannot name ids")


@dataclasses.dataclass(frozen=True)
class ConvertedModel:
    """A checkpoint converted for CTranslate2, not loaded yet (the scorer
    loads it into a `CTranslate2Runner`).

    Attributes:
      model_dir: The converted model directory.
      compute_type: "float32" or "int8".
      threads: CPU threads of CTranslate2 (None: every usable core).
      threads_per_batch: Of those, the threads one batch computes on.
    """

    model_dir: str
    compute_type: str
    threads: Optional[int] = None
    threads_per_batch: int = 1


@dataclasses.dataclass(frozen=True)
class EngineModel:
    """What the scorer reads from a runner's `model`: its config.

    Attributes:
      config: The network config (`dtype` float32; `quantize` None or "int8").
    """

    config: Any


class _PendingLogProbs:
    """A batch in flight; `np.asarray` waits for it (as a JAX array would)."""

    def __init__(self, future: concurrent.futures.Future):
        self._future = future

    def __array__(self, dtype=None, copy=None):
        values = self._future.result()
        return values if dtype is None else values.astype(dtype)


class CTranslate2Runner:
    """The scorer's first-step model call on a CTranslate2 `Translator`.

    Same interface as `scoring.runner.ModelRunner`: `put` a padded
    [rows, length] id batch, call the runner on it, and `np.asarray` the
    result for float32 [rows, len(token_ids)] log-probabilities.

    Attributes:
      model: An `EngineModel` holding the network config.
      model_dir: The converted model.
      compute_type: "float32" or "int8".
      token_ids: Vocabulary ids read at the first step.
      engine: "ctranslate2".
      batches_at_once: Batches that compute at the same time.
    """

    engine = "ctranslate2"
    mesh = None
    data_parallel = 1

    def __init__(self, model_dir: str, config: Any, tokenizer, token_ids: Sequence[int],
                 compute_type: str = "float32", threads: Optional[int] = None,
                 threads_per_batch: int = 1):
        """Loads a converted model.

        Args:
          model_dir: A CTranslate2 model directory (`converted_model`).
          config: The network config (`EngineModel.config` of `load_converted`).
          tokenizer: The scorer's `SentencePieceTokenizer`.
          token_ids: Vocabulary ids whose log-probabilities are read.
          compute_type: "float32" or "int8".
          threads: CPU threads of CTranslate2 (default: every usable core).
          threads_per_batch: Threads of one batch; threads / threads_per_batch
            batches compute at once (CTranslate2's `inter_threads`).

        Raises:
          ValueError: if the converted vocabulary does not match `tokenizer`,
            or threads_per_batch is not a whole number of at least 1.
        """
        inter_threads, intra_threads = thread_split(threads, threads_per_batch)
        ctranslate2 = require_ctranslate2()
        self.model_dir = model_dir
        self.compute_type = compute_type
        self.model = EngineModel(config)
        self.token_ids = tuple(int(i) for i in token_ids)
        self.pad_id = config.pad_id
        vocabulary = read_vocabulary(model_dir)
        check_vocabulary(vocabulary, tokenizer, model_dir)
        self._pieces = np.asarray(vocabulary, dtype=object)
        self.batches_at_once = inter_threads
        self._computing = _compute_slots(inter_threads)
        self.translator = ctranslate2.Translator(
            model_dir, device="cpu", compute_type=compute_type,
            inter_threads=inter_threads, intra_threads=intra_threads)
        self.params = None  # The weights live in the translator.

    @classmethod
    def of(cls, converted: "ConvertedModel", config: Any, tokenizer,
           token_ids: Sequence[int]) -> "CTranslate2Runner":
        """The runner of a `load_converted` model."""
        return cls(converted.model_dir, config, tokenizer, token_ids, converted.compute_type,
                   converted.threads, converted.threads_per_batch)

    def put(self, tokens: np.ndarray) -> np.ndarray:
        """The host batch as it is (CTranslate2 reads it from the host)."""
        return np.asarray(tokens, np.int32)

    @staticmethod
    def read(output: "_PendingLogProbs") -> np.ndarray:
        """The log-probabilities of a batch on the host (waits for it)."""
        return np.asarray(output)

    def precompile(self, shapes: Sequence[tuple[int, ...]], threads: int = 2) -> None:
        """Nothing to compile: CTranslate2 runs any batch shape."""

    def is_compiled(self, rows: int, length: int, slots: Optional[int] = None) -> bool:
        """Always true: no batch shape is compiled."""
        return True

    def __call__(self, tokens: np.ndarray, segment_ids: Optional[np.ndarray] = None,
                 slots: Optional[int] = None) -> _PendingLogProbs:
        """Starts scoring a batch; `np.asarray` of the result waits for float32
        [rows, len(token_ids)] log-probabilities (rows of padding only get 0).

        Raises:
          ValueError: for a packed batch (packing is the JAX engine's).
        """
        if segment_ids is not None:
            raise ValueError("packed batches run on the jax engine only")
        return _PendingLogProbs(_CALLS.submit(self._first_step_log_probs, np.asarray(tokens)))

    def _first_step_log_probs(self, tokens_BxL: np.ndarray) -> np.ndarray:
        lengths_B = (tokens_BxL != self.pad_id).sum(axis=1)
        rows = [r for r in range(tokens_BxL.shape[0]) if lengths_B[r]]
        log_probs_BxN = np.zeros((tokens_BxL.shape[0], len(self.token_ids)), np.float32)
        if not rows:
            return log_probs_BxN
        # Padding only follows the real tokens (the batch plan writes ids from the left).
        source = [self._pieces[tokens_BxL[r, :lengths_B[r]]].tolist() for r in rows]
        with self._computing:
            results = self.translator.translate_batch(
                source, beam_size=1, max_decoding_length=1, min_decoding_length=0,
                max_input_length=0, return_logits_vocab=True)
        # In float32, as CTranslate2 gives them and our JAX softmax takes them:
        # 0.19 ms a row at mT5's 250k vocabulary against 1.75 ms in float64.
        logits_RxV = np.stack([np.asarray(result.logits[0][0]) for result in results])
        peak_Rx1 = logits_RxV.max(axis=-1, keepdims=True)
        log_z_Rx1 = peak_Rx1 + np.log(np.exp(logits_RxV - peak_Rx1).sum(axis=-1, keepdims=True))
        log_probs_BxN[rows] = logits_RxV[:, self.token_ids] - log_z_Rx1
        return log_probs_BxN


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The child process of `converted_model`: one `convert_checkpoint` call."""
    parser = argparse.ArgumentParser(description="Converts a checkpoint for the ctranslate2 engine.")
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--vocab", required=True)
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--compute_type", required=True, choices=sorted(set(COMPUTE_TYPES.values())))
    parser.add_argument("--smoothing", type=json.loads, default=None,
                        help="The int8 smoothing recipe, as JSON (see `smoothing.recipe`).")
    args = parser.parse_args(argv)
    convert_checkpoint(args.checkpoint, args.vocab, args.output_dir, args.compute_type,
                       args.smoothing)
    return 0


if __name__ == "__main__":
    sys.exit(main())
