"""The JAX engine: one model's first-step program, compiled per batch shape, on a device mesh.

It runs `model.first_step` (log P("1") and log P("0") from the
full-vocabulary softmax at the first decoder step, through
`EncoderDecoderModel.logits`, the network's one forward path), the program
training's validation scores with too.

Batches are split over the `data` axis of the same mesh the trainer uses
(`seahorse_metrics.model.partitioning`), parameters are placed by their
logical axes; with every local device on `data` that is plain data
parallelism. Rows come back in batch order whatever the device count.

Compiled programs live in a `ProgramCache`, an object with a bound on the
programs it keeps (least recently used go first), keyed by (model config,
parameter dtypes, mesh, target ids, compiler options, batch shape). Engines
share `SHARED_PROGRAMS` unless given their own, so engines of equal configs
(the q1-q6 metrics, a scorer loaded twice, validation at every step) share
programs and each shape compiles once.

Batches go in and scores come out on any mesh, one process or several
(`put` builds the global batch from the host batch every process holds;
`read` gathers rows other processes hold).
"""

from __future__ import annotations

import collections
import concurrent.futures
import functools
import logging
import threading
import time
from typing import Any, Mapping, Optional, Sequence

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh

from seahorse_metrics.engines.base import Capabilities, Engine
from seahorse_metrics.model import partitioning
from seahorse_metrics.model.first_step import check_token_ids, compile_first_step
from seahorse_metrics.model.model import EncoderDecoderModel
from seahorse_metrics.model.questions import QuestionPrefixes

logger = logging.getLogger(__name__)

DEFAULT_MAX_PROGRAMS = 64


class ProgramCache:
    """Compiled scorer programs by key, at most `max_programs` of them
    (least recently used dropped first); thread-safe, and a program being
    compiled by one thread is waited for, not compiled twice.

    Attributes:
      max_programs: The bound.
      compiled: Programs compiled through this cache so far (for logs and tests).
    """

    def __init__(self, max_programs: int = DEFAULT_MAX_PROGRAMS):
        if max_programs < 1:
            raise ValueError(f"max_programs must be >= 1, got {max_programs}")
        self.max_programs = int(max_programs)
        self.compiled = 0
        self._programs: collections.OrderedDict[tuple, Any] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._key_locks: dict[tuple, threading.Lock] = {}

    def __len__(self) -> int:
        return len(self._programs)

    def __contains__(self, key: tuple) -> bool:
        return key in self._programs

    def get(self, key: tuple, compile_program) -> Any:
        """The program of `key`, compiled by `compile_program()` on first use."""
        with self._lock:
            if key in self._programs:
                self._programs.move_to_end(key)
                return self._programs[key]
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:  # Another thread may be compiling this very program.
            with self._lock:
                if key in self._programs:
                    return self._programs[key]
            program = compile_program()
            with self._lock:
                self._programs[key] = program
                self.compiled += 1
                while len(self._programs) > self.max_programs:
                    dropped, _ = self._programs.popitem(last=False)
                    self._key_locks.pop(dropped, None)
            return program


# The programs engines share unless given their own cache.
SHARED_PROGRAMS = ProgramCache()


def default_mesh() -> Mesh:
    """A ('data', 'model') mesh with every local device on 'data'."""
    return partitioning.make_mesh(model_parallel=1, devices=jax.local_devices())


class JaxEngine(Engine):
    """Scores padded token batches with one model on a mesh.

    Attributes:
      model: The model object.
      params: Parameters placed on the mesh.
      mesh: The device mesh.
      token_ids: Vocabulary ids read at the first step, e.g. ("1", "0")'s.
      batches_at_once: Batches that compute at the same time (one: a batch
        takes the whole mesh).
    """

    name = "jax"
    capabilities = Capabilities(
        mesh=True, packing=True, scan_layers=True, dtypes=("float32", "bfloat16"), questions=True
    )
    batches_at_once = 1

    def __init__(
        self,
        model: EncoderDecoderModel,
        params: Any,
        token_ids: Sequence[int],
        mesh: Optional[Mesh] = None,
        compiler_options: Optional[Mapping[str, Any]] = None,
        programs: Optional[ProgramCache] = None,
        questions: Optional[QuestionPrefixes] = None,
    ):
        """Places `params` on `mesh` (default: all local devices on `data`).

        Args:
          model: The model object.
          params: Its parameters (host or device arrays).
          token_ids: Vocabulary ids whose log-probabilities are read.
          mesh: A ('data', 'model') mesh.
          compiler_options: XLA options for compiling the scorer, e.g.
            `{"xla_backend_optimization_level": 0}` compiles about twice as
            fast and runs slower: for short jobs and tests.
          programs: Where compiled programs are kept (default `SHARED_PROGRAMS`).
          questions: A multi-question metric's decoder prefixes: batches then
            score `[rows, questions, len(token_ids)]`, one encoder pass per row.

        Raises:
          ValueError: for token ids (or question prefix ids) outside the vocabulary.
        """
        self.model = model
        self.mesh = mesh if mesh is not None else default_mesh()
        self.token_ids = check_token_ids(token_ids, model.config.vocab_size)
        if questions is not None:
            questions.check_vocab(model.config.vocab_size)
        self.questions = questions
        self.compiler_options = dict(compiler_options or {})
        self.programs = programs if programs is not None else SHARED_PROGRAMS
        self._param_shardings = partitioning.logical_to_sharding(
            model.param_logical_axes(), self.mesh
        )
        self.params = jax.device_put(params, self._param_shardings)
        # Parameters of one config may be float32 or bfloat16: programs differ.
        self._param_dtypes = tuple(str(leaf.dtype) for leaf in jax.tree.leaves(self.params))
        self.batch_sharding = partitioning.data_sharding(self.mesh)

    @property
    def data_parallel(self) -> int:
        """Devices a batch is split over (rows must be a multiple of it)."""
        return int(self.mesh.shape[partitioning.DATA_AXIS])

    def _key(self, rows: int, length: int, slots: Optional[int] = None) -> tuple:
        return (
            self.model.config,
            self._param_dtypes,
            self.mesh,
            self.token_ids,
            tuple(sorted(self.compiler_options.items())),
            rows,
            length,
            slots,
            self.questions,
        )

    def compiled(self, rows: int, length: int, slots: Optional[int] = None):
        """The compiled scorer of `[rows, length]` batches (compiled on first use);
        with `slots`, of packed batches with that many inputs per row."""
        return self.programs.get(
            self._key(rows, length, slots), functools.partial(self._compile, rows, length, slots)
        )

    def _compile(self, rows: int, length: int, slots: Optional[int] = None):
        if rows % self.data_parallel:
            raise ValueError(
                f"batch rows {rows} must be a multiple of the {self.data_parallel} "
                "data-parallel devices"
            )
        start = time.perf_counter()
        abstract_params = jax.tree.map(
            lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), self.params
        )
        executable = compile_first_step(
            self.model,
            self.token_ids,
            self.mesh,
            abstract_params,
            rows,
            length,
            self.compiler_options,
            slots,
            self.questions,
        )
        logger.info(
            "scorer program for batches of %d x %d tokens%s ready in %.1f s (compiled, "
            "or read from JAX's compilation cache)",
            rows,
            length,
            f" ({slots} packed per row)" if slots else "",
            time.perf_counter() - start,
        )
        return executable

    def precompile(self, shapes: Sequence[tuple[int, ...]], threads: int = 2) -> None:
        """Compiles the given `(rows, length)` (or packed `(rows, length, slots)`)
        shapes now, a few at a time."""
        missing = [s for s in shapes if self._key(*s) not in self.programs]
        if not missing:
            return
        with concurrent.futures.ThreadPoolExecutor(max(1, threads)) as pool:
            for future in [pool.submit(self.compiled, *shape) for shape in missing]:
                future.result()

    def is_compiled(self, rows: int, length: int, slots: Optional[int] = None) -> bool:
        """Whether the `[rows, length]` program (packed: with `slots`) exists already."""
        return self._key(rows, length, slots) in self.programs

    def put(self, tokens: np.ndarray) -> jax.Array:
        """Sends a host batch to the devices, split over `data` (with several
        processes, each holds the whole host batch and places its part)."""
        tokens = np.asarray(tokens, np.int32)
        if jax.process_count() == 1:
            return jax.device_put(tokens, self.batch_sharding)
        return jax.make_array_from_callback(
            tokens.shape, self.batch_sharding, lambda index: tokens[index]
        )

    def read(self, output: jax.Array) -> np.ndarray:
        """The scores of a batch on the host, rows of other processes included."""
        if output.is_fully_addressable:
            return np.asarray(output)
        return np.asarray(multihost_utils.process_allgather(output, tiled=True))

    def __call__(
        self,
        tokens: jax.Array,
        segment_ids: Optional[jax.Array] = None,
        slots: Optional[int] = None,
    ) -> jax.Array:
        """Starts scoring a placed batch; returns float32 [rows, len(token_ids)]
        log-probabilities (asynchronously: reading them waits). A packed batch
        (`segment_ids` 1..`slots` per row, 0 for padding) returns
        [rows, slots, len(token_ids)]; with `questions`, [rows, questions,
        len(token_ids)]."""
        rows, length = tokens.shape
        if segment_ids is None:
            return self.compiled(rows, length)(self.params, tokens)
        return self.compiled(rows, length, slots)(self.params, tokens, segment_ids)

    def quantization(self) -> str:
        """ "none", or "int8-bf16"/"int8-f32": the dtype int8 kernels multiply in."""
        config = self.model.config
        if not config.quantize:
            return "none"
        return "int8-" + {"bfloat16": "bf16", "float32": "f32"}[config.int8_products]

    def int8_variant(self) -> str:
        """ "jax:<product dtype>"."""
        return f"jax:{self.model.config.int8_products}"

    @classmethod
    def library_version(cls) -> str:
        return jax.__version__


def compiled_shape_count() -> int:
    """Scorer programs compiled through `SHARED_PROGRAMS` so far (for tests and logs)."""
    return SHARED_PROGRAMS.compiled
