"""The questions of a multi-question metric as one engine per output column.

    columns = question_columns(engine)    # engine: a JaxEngine with questions=
    columns[2].read(columns[2](tokens))   # [rows, 2]: question 3's log-probabilities

The scoring core (`scoring.window_scoring`, the service, signatures,
metadata) keeps one engine per output column. A multi-question metric's
engine scores every question in one call (`[rows, questions, 2]`, one
encoder pass per row); each `QuestionColumn` is a view of one question of
it. `shared_calls` is how the window scorer runs a batch: once per distinct
underlying engine, so the columns of one metric share its encoder pass.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from seahorse_metrics.engines.base import Engine


class QuestionColumn(Engine):
    """One question of a multi-question engine, seen as an engine of its own.

    Attributes:
      shared: The multi-question engine (its call scores every question).
      column: The question's index.
      question: The question's name (the output column).
    """

    def __init__(self, shared: Engine, column: int):
        self.shared = shared
        self.column = int(column)
        self.question = shared.questions.names[self.column]
        self.name = shared.name
        self.capabilities = shared.capabilities
        self.model = shared.model
        self.token_ids = shared.token_ids
        self.mesh = shared.mesh
        self.batches_at_once = shared.batches_at_once

    @property
    def params(self) -> Any:
        """The shared engine's parameters."""
        return self.shared.params

    @property
    def data_parallel(self) -> int:
        """Devices a batch is split over."""
        return self.shared.data_parallel

    def put(self, tokens: np.ndarray) -> Any:
        return self.shared.put(tokens)

    def __call__(
        self, tokens: Any, segment_ids: Optional[Any] = None, slots: Optional[int] = None
    ) -> Any:
        """Starts the shared engine on a batch (every question)."""
        return self.shared(tokens, segment_ids, slots)

    def read(self, output: Any) -> np.ndarray:
        """float32 [rows, len(token_ids)]: this question's log-probabilities."""
        return self.shared.read(output)[:, self.column]

    def precompile(self, shapes: Sequence[tuple[int, ...]], threads: int = 2) -> None:
        self.shared.precompile(shapes, threads)

    def is_compiled(self, rows: int, length: int, slots: Optional[int] = None) -> bool:
        return self.shared.is_compiled(rows, length, slots)

    @property
    def conversion(self) -> Optional[str]:
        return self.shared.conversion

    def quantization(self) -> str:
        return self.shared.quantization()

    def int8_variant(self) -> str:
        return self.shared.int8_variant()

    def library_version(self) -> str:  # An instance's, as the shared engine's class.
        return self.shared.library_version()


def question_columns(engine: Engine) -> list[Engine]:
    """One `QuestionColumn` per question of `engine`, or `[engine]` for an
    engine of one question."""
    if getattr(engine, "questions", None) is None:
        return [engine]
    return [QuestionColumn(engine, column) for column in range(len(engine.questions))]


def shared_calls(engines: Sequence[Engine], call) -> list:
    """`call(engine)` once per distinct underlying engine, its output handed
    to each of the engines (columns) it serves, in order."""
    outputs: dict[int, Any] = {}
    results = []
    for engine in engines:
        underlying = getattr(engine, "shared", engine)
        if id(underlying) not in outputs:
            outputs[id(underlying)] = call(underlying)
        results.append(outputs[id(underlying)])
    return results
