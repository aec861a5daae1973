"""One model's first-step scorer, compiled per batch shape, on a device mesh.

The scorer reads log P("1") and log P("0") from the full-vocabulary softmax
at the first decoder step (the decoder fed `config.decoder_start_id`), going
through `EncoderDecoderModel.logits`, the network's one forward path.

Batches are split over the `data` axis of the same mesh the trainer uses
(`seahorse_metrics.model.partitioning`), parameters are placed by their
logical axes; with every local device on `data` that is plain data
parallelism. Rows come back in batch order whatever the device count.

Compiled programs live in a `ProgramCache`, an object with a bound on the
programs it keeps (least recently used go first), keyed by (model config,
parameter dtypes, mesh, target ids, compiler options, batch shape). Runners
share `SHARED_PROGRAMS` unless given their own, so runners of equal configs
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
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from seahorse_metrics.model import partitioning
from seahorse_metrics.model.model import EncoderDecoderModel

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


# The programs runners share unless given their own cache.
SHARED_PROGRAMS = ProgramCache()


def default_mesh() -> Mesh:
    """A ('data', 'model') mesh with every local device on 'data'."""
    return partitioning.make_mesh(model_parallel=1, devices=jax.local_devices())


def _first_step_log_probs(model: EncoderDecoderModel, token_ids: tuple[int, ...], params: Any,
                          encoder_input_tokens: jax.Array) -> jax.Array:
    rows = encoder_input_tokens.shape[0]
    batch = {
        "encoder_input_tokens": encoder_input_tokens,
        "decoder_input_tokens": jnp.full((rows, 1), model.config.decoder_start_id, jnp.int32),
    }
    return _read_log_probs(model.logits(params, batch)[:, 0], token_ids)


def _packed_first_step_log_probs(model: EncoderDecoderModel, token_ids: tuple[int, ...],
                                 slots: int, params: Any, encoder_input_tokens: jax.Array,
                                 encoder_segment_ids: jax.Array) -> jax.Array:
    """[rows, slots, len(token_ids)]: the first step of each packed segment.

    Segment s (ids 1..slots) gets decoder position s - 1, fed the start
    token; the network's segment masks keep each position to its own
    segment's encoder tokens, so every slot scores as if it were alone.
    """
    rows = encoder_input_tokens.shape[0]
    batch = {
        "encoder_input_tokens": encoder_input_tokens,
        "encoder_segment_ids": encoder_segment_ids,
        "decoder_input_tokens": jnp.full((rows, slots), model.config.decoder_start_id, jnp.int32),
        "decoder_segment_ids": jnp.broadcast_to(jnp.arange(1, slots + 1, dtype=jnp.int32),
                                                (rows, slots)),
    }
    return _read_log_probs(model.logits(params, batch), token_ids)


def _read_log_probs(logits_BxT: jax.Array, token_ids: tuple[int, ...]) -> jax.Array:
    """log P(token_ids) from the full-vocabulary softmax over the last axis."""
    logits_BxT = logits_BxT.astype(jnp.float32)
    log_z_Bx1 = jax.nn.logsumexp(logits_BxT, axis=-1, keepdims=True)
    chosen_BxN = jnp.take(logits_BxT, jnp.asarray(token_ids, jnp.int32), axis=-1)
    return chosen_BxN - log_z_Bx1


def compile_first_step(model: EncoderDecoderModel, token_ids: tuple[int, ...], mesh: Mesh,
                       abstract_params: Any, rows: int, length: int,
                       compiler_options: Optional[Mapping[str, Any]] = None,
                       slots: Optional[int] = None):
    """Compiles the scorer of `[rows, length]` batches ahead of time.

    Args:
      model: The model object.
      token_ids: Vocabulary ids whose log-probabilities are read.
      mesh: The ('data', 'model') mesh; parameters are split by their
        logical axes, the batch over 'data'.
      abstract_params: `jax.ShapeDtypeStruct`s of the parameters (their
        dtype decides the program); no weights are needed.
      rows, length: The batch shape.
      compiler_options: XLA options (see `ModelRunner`).
      slots: None, or the inputs packed per row (the program then also
        takes the segment ids and returns `[rows, slots, len(token_ids)]`).

    Returns:
      The compiled executable `(params, tokens[, segment_ids]) -> log-probabilities`.
    """
    param_shardings = partitioning.logical_to_sharding(model.param_logical_axes(), mesh)
    tokens = jax.ShapeDtypeStruct((rows, length), jnp.int32)
    if slots is None:
        program, inputs = functools.partial(_first_step_log_probs, model, token_ids), (tokens,)
    else:
        program, inputs = functools.partial(_packed_first_step_log_probs, model, token_ids,
                                            slots), (tokens, tokens)
    function = jax.jit(
        program, in_shardings=(param_shardings,) + (partitioning.data_sharding(mesh),) * len(inputs),
        out_shardings=NamedSharding(mesh, PartitionSpec(partitioning.DATA_AXIS)))
    with partitioning.sharding_context(mesh):
        return function.lower(abstract_params, *inputs).compile(
            compiler_options=dict(compiler_options) if compiler_options else None)


class ModelRunner:
    """Scores padded token batches with one model on a mesh.

    Attributes:
      model: The model object.
      params: Parameters placed on the mesh.
      mesh: The device mesh.
      token_ids: Vocabulary ids read at the first step, e.g. ("1", "0")'s.
      batches_at_once: Batches that compute at the same time (one: a batch
        takes the whole mesh).
    """

    batches_at_once = 1

    def __init__(self, model: EncoderDecoderModel, params: Any, token_ids: Sequence[int],
                 mesh: Optional[Mesh] = None,
                 compiler_options: Optional[Mapping[str, Any]] = None,
                 programs: Optional[ProgramCache] = None):
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

        Raises:
          ValueError: for token ids outside the vocabulary.
        """
        self.model = model
        self.mesh = mesh if mesh is not None else default_mesh()
        self.token_ids = tuple(int(i) for i in token_ids)
        self.compiler_options = dict(compiler_options or {})
        self.programs = programs if programs is not None else SHARED_PROGRAMS
        bad = [i for i in self.token_ids if not 0 <= i < model.config.vocab_size]
        if bad:
            raise ValueError(f"token ids {bad} are outside the vocabulary "
                             f"[0, {model.config.vocab_size})")
        self._param_shardings = partitioning.logical_to_sharding(
            model.param_logical_axes(), self.mesh)
        self.params = jax.device_put(params, self._param_shardings)
        # Parameters of one config may be float32 or bfloat16: programs differ.
        self._param_dtypes = tuple(str(leaf.dtype) for leaf in jax.tree.leaves(self.params))
        self.batch_sharding = partitioning.data_sharding(self.mesh)

    @property
    def data_parallel(self) -> int:
        """Devices a batch is split over (rows must be a multiple of it)."""
        return int(self.mesh.shape[partitioning.DATA_AXIS])

    def _key(self, rows: int, length: int, slots: Optional[int] = None) -> tuple:
        return (self.model.config, self._param_dtypes, self.mesh, self.token_ids,
                tuple(sorted(self.compiler_options.items())), rows, length, slots)

    def compiled(self, rows: int, length: int, slots: Optional[int] = None):
        """The compiled scorer of `[rows, length]` batches (compiled on first use);
        with `slots`, of packed batches with that many inputs per row."""
        return self.programs.get(self._key(rows, length, slots),
                                 functools.partial(self._compile, rows, length, slots))

    def _compile(self, rows: int, length: int, slots: Optional[int] = None):
        if rows % self.data_parallel:
            raise ValueError(f"batch rows {rows} must be a multiple of the {self.data_parallel} "
                             "data-parallel devices")
        start = time.perf_counter()
        abstract_params = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), self.params)
        executable = compile_first_step(self.model, self.token_ids, self.mesh, abstract_params,
                                        rows, length, self.compiler_options, slots)
        logger.info("scorer program for batches of %d x %d tokens%s ready in %.1f s (compiled, "
                    "or read from JAX's compilation cache)", rows, length,
                    f" ({slots} packed per row)" if slots else "", time.perf_counter() - start)
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
        return jax.make_array_from_callback(tokens.shape, self.batch_sharding,
                                            lambda index: tokens[index])

    @staticmethod
    def read(output: jax.Array) -> np.ndarray:
        """The scores of a batch on the host, rows of other processes included."""
        if output.is_fully_addressable:
            return np.asarray(output)
        return np.asarray(multihost_utils.process_allgather(output, tiled=True))

    def __call__(self, tokens: jax.Array, segment_ids: Optional[jax.Array] = None,
                 slots: Optional[int] = None) -> jax.Array:
        """Starts scoring a placed batch; returns float32 [rows, len(token_ids)]
        log-probabilities (asynchronously: reading them waits). A packed batch
        (`segment_ids` 1..`slots` per row, 0 for padding) returns
        [rows, slots, len(token_ids)]."""
        rows, length = tokens.shape
        if segment_ids is None:
            return self.compiled(rows, length)(self.params, tokens)
        return self.compiled(rows, length, slots)(self.params, tokens, segment_ids)


def compiled_shape_count() -> int:
    """Scorer programs compiled through `SHARED_PROGRAMS` so far (for tests and logs)."""
    return SHARED_PROGRAMS.compiled
