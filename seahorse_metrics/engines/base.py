"""The engine interface: what the scoring core asks of a model call.

    engine.log_probs(tokens)            # float32 [rows, len(token_ids)], log P at the first step
    pending = engine(engine.put(tokens))  # the same, started (engines overlap batches)
    scores = engine.read(pending)

As T5X's `BaseModel` is to its trainer, `Engine` is to the scorer's core
(buckets, windows, chunks, sentences, output files, Beam, the service): one
model call, the first decoder step's log-probabilities of a padded token
batch, with what the engine can do (`Capabilities`) stated instead of
guessed. `engines.jax_engine.JaxEngine` runs it on JAX (any mesh, dtype,
int8, packing), `engines.ctranslate2.CTranslate2Engine` on CTranslate2
(CPUs, float32 or int8 GEMMs).
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any, ClassVar, Optional, Sequence

import numpy as np


@dataclasses.dataclass(frozen=True)
class Capabilities:
    """What an engine can run.

    Attributes:
      mesh: Batches split over a device mesh, parameters over its `model` axis.
      packing: Several inputs per row (segment ids).
      scan_layers: Stacks run under `nn.scan`.
      dtypes: Compute dtypes.
      questions: A multi-question metric's questions against one encoder
        pass (`engines.question_columns`).
    """

    mesh: bool
    packing: bool
    scan_layers: bool
    dtypes: tuple[str, ...]
    questions: bool = False


class Engine(abc.ABC):
    """One model's first-step call on padded token batches.

    Attributes:
      name: The engine's name ("jax", "ctranslate2").
      capabilities: What it can run.
      model: What holds the network config (`model.config`).
      token_ids: Vocabulary ids whose log-probabilities are read.
      mesh: The device mesh, or None for an engine without one.
      data_parallel: Devices a batch is split over (rows must be a multiple of it).
      batches_at_once: Batches that compute at the same time.
      questions: A multi-question metric's `QuestionPrefixes` (its call
        then returns [rows, questions, len(token_ids)]), or None.
    """

    name: ClassVar[str]
    capabilities: ClassVar[Capabilities]
    model: Any
    token_ids: tuple[int, ...]
    mesh: Any = None
    data_parallel: int = 1
    batches_at_once: int = 1
    questions: Any = None

    @abc.abstractmethod
    def put(self, tokens: np.ndarray) -> Any:
        """Sends a host batch (int [rows, length]) to where the engine computes."""

    @abc.abstractmethod
    def __call__(
        self, tokens: Any, segment_ids: Optional[Any] = None, slots: Optional[int] = None
    ) -> Any:
        """Starts scoring a placed batch; `read` of the result waits for float32
        [rows, len(token_ids)] log-probabilities (packed: [rows, slots, ...])."""

    @abc.abstractmethod
    def read(self, output: Any) -> np.ndarray:
        """The log-probabilities of a started batch, on the host."""

    def log_probs(self, tokens: np.ndarray) -> np.ndarray:
        """float32 [rows, len(token_ids)]: log P(token_ids) at the first decoder step."""
        return self.read(self(self.put(tokens)))

    def precompile(self, shapes: Sequence[tuple[int, ...]], threads: int = 2) -> None:
        """Compiles the given batch shapes now (engines that compile per shape)."""

    def is_compiled(self, rows: int, length: int, slots: Optional[int] = None) -> bool:
        """Whether a batch of this shape runs without compiling first."""
        return True

    @property
    def conversion(self) -> Optional[str]:
        """The converted model it runs (a cache entry's name), or None where it
        runs the checkpoint's own weights."""
        return None

    @abc.abstractmethod
    def quantization(self) -> str:
        """How its int8 weights compute, for signatures: "none" without int8."""

    @abc.abstractmethod
    def int8_variant(self) -> str:
        """What makes its int8 scores differ from another int8 variant's, for
        the int8 self-check's cache key."""

    @classmethod
    @abc.abstractmethod
    def library_version(cls) -> str:
        """The version of the library it computes with."""
