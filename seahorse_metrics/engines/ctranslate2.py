"""The CTranslate2 engine: the scorer's model call on CPUs, float32 or int8 GEMMs.

    scorer = Scorer.load("runs/q4/best", engine="ctranslate2", quantize="int8")

    # What the scorer does with it:
    model, converted = load_converted("runs/q4/best", vocab_path, quantize="int8")
    engine = CTranslate2Engine.of(converted, model.config, tokenizer, (one_id, zero_id))
    log_probs = engine.log_probs(tokens)                 # float32 [rows, 2]

A checkpoint is converted once, by CTranslate2's own converter, into a
cache keyed by its content (`engines.conversion`; int8 conversions are
smoothed first, `engines.smoothing`).

The model call runs each padded batch the scorer built (its buckets and
windows) as one CTranslate2 batch: the encoder over the real tokens, one
decoder step from the start token, and the full-vocabulary logits of that
step, whose log-softmax gives log P("1") and log P("0"), as the JAX engine
reads them (`engines.base.Engine` is the interface both implement).
CTranslate2 reads token strings: ids are turned into the vocabulary's
pieces, after checking that the converted vocabulary maps every piece back
to the same id. Packed batches, device meshes, scanned layers and bfloat16
are JAX's (`CTranslate2Engine.capabilities`) and are refused
(`engines.choice.check_settings`).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import os
import threading
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from seahorse_metrics.engines import isa
from seahorse_metrics.engines.base import Capabilities, Engine
from seahorse_metrics.engines.conversion import (
    ENGINE_FILE,
    FULL_LEVELS,
    compute_type_of,
    converted_model,
    require_ctranslate2,
)
from seahorse_metrics.io.json_files import read_json, read_json_or_none
from seahorse_metrics.option_names import option

logger = logging.getLogger(__name__)

_VOCABULARY_FILES = ("shared_vocabulary.json", "target_vocabulary.json")
# Every CTranslate2 call of the process goes through these workers, and
# computes only while it holds one of the process's compute slots (shared by
# every metric's translator, or each would start all its threads at once):
# `threads / threads_per_batch` slots, one core count of work each.
_CALLS = concurrent.futures.ThreadPoolExecutor(
    max_workers=len(os.sched_getaffinity(0)), thread_name_prefix="ctranslate2"
)
_SLOTS: dict[int, threading.BoundedSemaphore] = {}
_SLOTS_LOCK = threading.Lock()


def thread_split(threads: Optional[int], threads_per_batch: int = 1) -> tuple[int, int]:
    """CTranslate2's (inter_threads, intra_threads): batches computing side by
    side, and the threads of each, for `threads` in all (None: every usable
    core) and `threads_per_batch` threads per batch.

    Raises:
      ValueError: naming `threads_per_batch` unless it is a whole number >= 1.
    """
    if (
        isinstance(threads_per_batch, bool)
        or not isinstance(threads_per_batch, int)
        or (threads_per_batch < 1)
    ):
        raise ValueError(
            f"engine option threads_per_batch must be a whole number >= 1, got "
            f"{threads_per_batch!r}"
        )
    threads = threads or len(os.sched_getaffinity(0))
    intra_threads = min(threads_per_batch, threads)
    return max(1, threads // intra_threads), intra_threads


def _compute_slots(count: int) -> threading.BoundedSemaphore:
    """The process's `count` compute slots, one semaphore per count."""
    with _SLOTS_LOCK:
        return _SLOTS.setdefault(count, threading.BoundedSemaphore(count))


# ---------------------------------------------------------------- loading
ENGINE_OPTIONS = (
    "cache_dir",
    "threads",
    "threads_per_batch",
    "convert_in_child",
    "int8_smoothing",
    "smoothing_data",
    "smoothing_pairs",
)


def load_converted(
    checkpoint: str,
    vocab_path: str,
    quantize: Optional[str] = None,
    engine_options: Optional[dict] = None,
) -> tuple["EngineModel", "ConvertedModel"]:
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
        Int8 weights keep 7 bits where this host's int8 products may
        saturate (`isa.ctranslate2_weight_levels`).

    Returns:
      (the model's `EngineModel`, its `ConvertedModel`) for `MultiScorer(models=...)`.

    Raises:
      EngineNotInstalled: without CTranslate2.
      ValueError: for an unknown engine option or quantization.
    """
    from seahorse_metrics.checkpoints import checkpoint_config
    from seahorse_metrics.engines import smoothing as smoothing_lib

    options = _checked_options(engine_options)
    compute_type = compute_type_of(quantize)
    thread_split(options.get("threads"), options.get("threads_per_batch", 1))  # checked early
    smoothing = smoothing_lib.recipe(compute_type, options)
    require_ctranslate2()
    config = checkpoint_config(checkpoint)
    _refuse_bias_per_layer(checkpoint, config)
    levels = isa.ctranslate2_weight_levels() if compute_type == "int8" else FULL_LEVELS
    model_dir, _ = converted_model(
        checkpoint,
        vocab_path,
        compute_type,
        options.get("cache_dir"),
        options.get("convert_in_child", True),
        smoothing,
        levels,
    )
    quantized = None if compute_type == "float32" else compute_type
    return (
        EngineModel(config.replace(dtype="float32", quantize=quantized)),
        ConvertedModel(
            model_dir, compute_type, options.get("threads"), options.get("threads_per_batch", 1)
        ),
    )


def _checked_options(engine_options: Optional[dict]) -> dict:
    """A copy of the engine options; refuses a name not in `ENGINE_OPTIONS`."""
    options = dict(engine_options or {})
    unknown = sorted(set(options) - set(ENGINE_OPTIONS))
    if unknown:
        raise ValueError(f"unknown engine options {unknown}; choose from {ENGINE_OPTIONS}")
    return options


def _refuse_bias_per_layer(checkpoint: str, config) -> None:
    """CTranslate2 cannot run a relative position bias in every layer (its issue #2102)."""
    if config.relative_bias_per_layer:
        raise ValueError(
            f"{checkpoint} has a relative position bias in every layer (T5X's "
            "scalable_t5, UMT5), which CTranslate2 cannot run (its issue #2102); "
            "score it with " + option("engine='jax'", "--engine jax")
        )


def converted_models(
    checkpoints: Mapping[str, str],
    vocab_path: str,
    options: Any,
    mesh: Any,
    engine_options: Optional[Mapping[str, Any]],
) -> dict[str, tuple]:
    """name -> (`EngineModel`, `ConvertedModel`) for `MultiScorer(models=...)`.

    Args:
      checkpoints: name -> local checkpoint directory.
      vocab_path: Their SentencePiece vocabulary.
      options: The `ScoringOptions` (its quantize; the caller has checked
        the rest against `CTranslate2Engine.capabilities`).
      mesh: Unused: the engine has none.
      engine_options: See `load_converted`.
    """
    return {
        name: load_converted(path, vocab_path, options.quantize, dict(engine_options or {}))
        for name, path in checkpoints.items()
    }


# ------------------------------------------------------------- model call
def read_vocabulary(model_dir: str) -> list[str]:
    """The converted model's token strings, in id order."""
    for name in _VOCABULARY_FILES:
        path = os.path.join(model_dir, name)
        if os.path.isfile(path):
            return read_json(path, "CTranslate2 vocabulary")
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
            raise ValueError(
                f"{model_dir}: the CTranslate2 vocabulary gives id {token_id} "
                f"{theirs!r}, the vocabulary {tokenizer.path} {piece!r}"
            )
    if len(set(vocabulary)) != len(vocabulary):
        raise ValueError(
            f"{model_dir}: the CTranslate2 vocabulary repeats a piece, so pieces cannot name ids"
        )


@dataclasses.dataclass(frozen=True)
class ConvertedModel:
    """A checkpoint converted for CTranslate2, not loaded yet (the scorer
    loads it into a `CTranslate2Engine`).

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
    """What the scorer reads from an engine's `model`: its config.

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


class CTranslate2Engine(Engine):
    """The scorer's first-step model call on a CTranslate2 `Translator`.

    `put` a padded [rows, length] id batch, call the engine on it, and
    `read` the result for float32 [rows, len(token_ids)] log-probabilities.

    Attributes:
      model: An `EngineModel` holding the network config.
      model_dir: The converted model.
      compute_type: "float32" or "int8".
      token_ids: Vocabulary ids read at the first step.
      batches_at_once: Batches that compute at the same time.
    """

    name = "ctranslate2"
    capabilities = Capabilities(mesh=False, packing=False, scan_layers=False, dtypes=("float32",))

    def __init__(
        self,
        model_dir: str,
        config: Any,
        tokenizer,
        token_ids: Sequence[int],
        compute_type: str = "float32",
        threads: Optional[int] = None,
        threads_per_batch: int = 1,
    ):
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
            model_dir,
            device="cpu",
            compute_type=compute_type,
            inter_threads=inter_threads,
            intra_threads=intra_threads,
        )
        self.params = None  # The weights live in the translator.

    @classmethod
    def of(
        cls, converted: "ConvertedModel", config: Any, tokenizer, token_ids: Sequence[int]
    ) -> "CTranslate2Engine":
        """The engine of a `load_converted` model."""
        return cls(
            converted.model_dir,
            config,
            tokenizer,
            token_ids,
            converted.compute_type,
            converted.threads,
            converted.threads_per_batch,
        )

    def put(self, tokens: np.ndarray) -> np.ndarray:
        """The host batch as it is (CTranslate2 reads it from the host)."""
        return np.asarray(tokens, np.int32)

    def read(self, output: "_PendingLogProbs") -> np.ndarray:
        """The log-probabilities of a batch on the host (waits for it)."""
        return np.asarray(output)

    @property
    def conversion(self) -> str:
        """The cache entry it runs: a digest of what makes its scores (see
        `conversion.conversion_key`), the same on every machine."""
        return os.path.basename(os.path.normpath(self.model_dir))

    def quantization(self) -> str:
        """ "none", or "int8-w8"/"int8-w7" (weight bits) with "-s<alpha>" when smoothed."""
        if not self.model.config.quantize:
            return "none"
        described = read_json_or_none(os.path.join(self.model_dir, ENGINE_FILE)) or {}
        bits = 8 if described.get("weight_levels") in (None, 127) else 7
        smoothing = (described.get("smoothing") or {}).get("alpha")
        return f"int8-w{bits}" + (f"-s{smoothing:g}" if smoothing else "")

    def int8_variant(self) -> str:
        """ "ctranslate2:<cache entry>" (its smoothing and weight levels are in its name)."""
        return f"ctranslate2:{self.conversion}"

    @classmethod
    def library_version(cls) -> str:
        return require_ctranslate2().__version__

    def __call__(
        self,
        tokens: np.ndarray,
        segment_ids: Optional[np.ndarray] = None,
        slots: Optional[int] = None,
    ) -> _PendingLogProbs:
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
        source = [self._pieces[tokens_BxL[r, : lengths_B[r]]].tolist() for r in rows]
        with self._computing:
            results = self.translator.translate_batch(
                source,
                beam_size=1,
                max_decoding_length=1,
                min_decoding_length=0,
                max_input_length=0,
                return_logits_vocab=True,
            )
        # In float32, as CTranslate2 gives them and our JAX softmax takes them:
        # 0.19 ms a row at mT5's 250k vocabulary against 1.75 ms in float64.
        logits_RxV = np.stack([np.asarray(result.logits[0][0]) for result in results])
        peak_Rx1 = logits_RxV.max(axis=-1, keepdims=True)
        log_z_Rx1 = peak_Rx1 + np.log(np.exp(logits_RxV - peak_Rx1).sum(axis=-1, keepdims=True))
        log_probs_BxN[rows] = logits_RxV[:, self.token_ids] - log_z_Rx1
        return log_probs_BxN
