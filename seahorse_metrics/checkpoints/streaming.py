"""Tensor-by-tensor loading: each parameter is read into the target dtype and
placed before the next one is read.

A format's reader describes what a checkpoint holds as `StoredTensor`s (name,
file, shape, dtype and a function that reads a box of it) without reading any
data. The format's name mapping (`hf.parameter_map`, T5X's own names) turns
them into the network's parameters, `ParamSource`s: a stored tensor, possibly
transposed. Names and shapes are checked (`params.check_params`) before a byte
of data is read; then `materialise` reads every parameter in row blocks of at
most `CHUNK_BYTES` straight into its destination buffer, cast on the way, and

  - without shardings, returns it as a host numpy array, 64-byte aligned so
    that `jax.device_put` on a CPU uses it without copying;
  - with a sharding, builds the device array with
    `jax.make_array_from_callback`, reading only the box each device owns.

So the host holds the finished parameters plus about one block (one shard
per device with a mesh), never a second copy of the model. A read that fails
stops the load with a `CheckpointError` naming the file and the tensor; the
arrays placed until then are deleted, so nothing half-loaded is returned.
"""

from __future__ import annotations

import ctypes
import dataclasses
import logging
import math
import time
from typing import Any, Callable, Iterable, Mapping, Optional

import numpy as np

from seahorse_metrics.checkpoints.params import CheckpointError, FlatParams, flatten, numpy_dtype

logger = logging.getLogger(__name__)

# Rows of a tensor are read this many bytes at a time.
CHUNK_BYTES = 16 << 20
# XLA's CPU client wraps host buffers with this alignment without copying them.
_ALIGNMENT = 64
# A block is transposed this many stored rows at a time: a tile that stays in
# the cache transposes 2-3x faster than the whole block at once.
_TRANSPOSE_ROWS = 256

Index = tuple[slice, ...]
# A parameter's conversion as it is loaded: (flat name, array) -> {flat name: array}.
Convert = Callable[[str, Any], Mapping[str, Any]]
Box = tuple[tuple[int, int], ...]


@dataclasses.dataclass(frozen=True)
class StoredTensor:
    """One tensor of a checkpoint, read on demand.

    Attributes:
      name: Its name in the checkpoint (e.g. `encoder.block.0.layer.0.SelfAttention.q.weight`).
      path: The file or directory holding it, for messages.
      shape: Its shape.
      dtype: Its numpy dtype (bfloat16 as `ml_dtypes.bfloat16`).
      reader: Reads a box (a tuple of slices with explicit bounds) as a numpy array.
    """

    name: str
    path: str
    shape: tuple[int, ...]
    dtype: np.dtype
    reader: Callable[[Index], Any] = dataclasses.field(repr=False, compare=False)

    @classmethod
    def in_memory(cls, name: str, path: str, array: Any) -> "StoredTensor":
        """A tensor that is already an array in memory."""
        array = np.asarray(array)
        return cls(name, path, tuple(array.shape), array.dtype, lambda index: array[index])

    def read(self, index: Index) -> np.ndarray:
        """Reads the box `index` (one slice per axis).

        Raises:
          CheckpointError: naming the file and tensor, if reading fails or
            returns another shape.
        """
        expected = tuple(s.stop - s.start for s in index)
        try:
            block = np.asarray(self.reader(index))
        except CheckpointError:
            raise
        except Exception as error:  # each storage library raises its own types
            raise CheckpointError(
                f"{self.path}: cannot read tensor {self.name} ({error})"
            ) from error
        if tuple(block.shape) != expected:
            raise CheckpointError(
                f"{self.path}: reading tensor {self.name}{list(self.shape)} "
                f"gave a block of shape {tuple(block.shape)}, not {expected}"
            )
        return block


@dataclasses.dataclass(frozen=True)
class ParamSource:
    """Where one network parameter comes from: a stored tensor, transposed
    when the format keeps the matrix the other way round (torch `Linear`)."""

    tensor: StoredTensor
    transposed: bool = False

    @property
    def shape(self) -> tuple[int, ...]:
        return self.tensor.shape[::-1] if self.transposed else self.tensor.shape

    @property
    def dtype(self) -> np.dtype:
        return self.tensor.dtype

    def read(self, box: Box, dtype: np.dtype) -> np.ndarray:
        """Reads `box` of the parameter (in the network's layout) into a new
        aligned `dtype` array, `CHUNK_BYTES` of stored rows at a time."""
        out = aligned_empty(tuple(stop - start for start, stop in box), dtype)
        if out.size == 0:
            return out
        if not box:
            out[()] = self.tensor.read(())
            return out
        stored_box = box[::-1] if self.transposed else box
        (first, last), rest = stored_box[0], stored_box[1:]
        row_bytes = math.prod(stop - start for start, stop in rest) * max(
            np.dtype(self.dtype).itemsize, np.dtype(dtype).itemsize
        )
        step = max(1, CHUNK_BYTES // max(1, row_bytes))
        rest_index = tuple(slice(start, stop) for start, stop in rest)
        for start in range(first, last, step):
            stop = min(start + step, last)
            block = self.tensor.read((slice(start, stop),) + rest_index)
            if not self.transposed:
                out[start - first : stop - first] = block
                continue
            for tile in range(0, stop - start, _TRANSPOSE_ROWS):
                end = min(tile + _TRANSPOSE_ROWS, stop - start)
                out[:, start - first + tile : start - first + end] = block[tile:end].T
        return out


def aligned_empty(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """An uninitialised array whose data starts on a 64-byte boundary."""
    dtype = np.dtype(dtype)
    size = math.prod(shape) * dtype.itemsize
    raw = np.empty(size + _ALIGNMENT, np.uint8)
    offset = (-raw.ctypes.data) % _ALIGNMENT
    return raw[offset : offset + size].view(dtype).reshape(shape)


def _box(index: Index, shape: tuple[int, ...]) -> Box:
    return tuple(s.indices(n)[:2] for s, n in zip(index, shape))


def _full_box(shape: tuple[int, ...]) -> Box:
    return tuple((0, n) for n in shape)


def param_shardings(config: Any, mesh: Any) -> dict[str, Any]:
    """{flat parameter name: NamedSharding} from the network's logical axes
    and the trainer's rules table (`seahorse_metrics.model.partitioning`)."""
    from seahorse_metrics.model import partitioning
    from seahorse_metrics.model.model import EncoderDecoderModel

    logical = EncoderDecoderModel(config).param_logical_axes()
    return flatten(partitioning.logical_to_sharding(logical, mesh))


def _place_sharded(source: ParamSource, dtype: np.dtype, sharding: Any):
    import jax

    read_boxes: dict[Box, np.ndarray] = {}

    def shard(index: Index) -> np.ndarray:
        box = _box(index, source.shape)
        if box not in read_boxes:
            read_boxes[box] = source.read(box, dtype)
            return read_boxes[box]
        # Replicas get their own copy: a CPU device wraps the buffer it is
        # given, and a donated buffer may be written in place.
        copy = aligned_empty(read_boxes[box].shape, dtype)
        copy[...] = read_boxes[box]
        return copy

    return jax.make_array_from_callback(source.shape, sharding, shard)


def trim_heap() -> bool:
    """Hands the C library's freed heap memory back to the system (glibc's
    `malloc_trim`); False where there is none.

    Freed blocks stay in the heap, counted in the process's memory, and a
    reader thread's arena is not reused by the next thread's read: loading
    ours int8 one tensor at a time under a busy CPU peaked at 76-113 MB
    above the start against 53-60 MB with fewer arenas, its float32 kernels
    being 113 MB."""
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
    if trim is None:
        return False
    trim(0)
    return True


def release(arrays: Iterable[Any]) -> None:
    """Deletes the device buffers of `arrays` now (host arrays are left to the collector)."""
    for array in arrays:
        delete = getattr(array, "delete", None)
        if delete is not None:
            delete()


def converted(name: str, array: Any, convert: Optional[Convert]) -> Mapping[str, Any]:
    """{name: array}, or what `convert` makes of it (the array read is
    released when `convert` does not keep it)."""
    if convert is None:
        return {name: array}
    try:
        result = convert(name, array)
    except BaseException:
        release([array])
        raise
    if all(value is not array for value in result.values()):
        release([array])
    return result


def materialise(
    sources: Mapping[str, ParamSource],
    dtype: Optional[str],
    origin: str,
    shardings: Optional[Mapping[str, Any]] = None,
    convert: Optional[Convert] = None,
) -> FlatParams:
    """Reads every parameter into `dtype` and places it, one at a time.

    Args:
      sources: {flat parameter name: ParamSource}, already checked against
        the network (`check_params`).
      dtype: Target dtype name ("float32" when None, or "bfloat16").
      origin: The checkpoint, for the log and progress bar.
      shardings: {flat name: jax Sharding}, or None for host numpy arrays.
      convert: Called with (flat name, array) as each parameter is placed;
        what it returns ({flat name: array}) is kept in its place, and the
        array read is released unless returned. Int8 scoring quantizes
        each kernel so, before the next is read (`quantize.kernel_converter`).

    Returns:
      {flat name: numpy array or jax.Array}.

    Raises:
      CheckpointError: naming the file and tensor that could not be read;
        whatever was placed before is deleted.
    """
    from tqdm.auto import tqdm

    target = numpy_dtype("float32" if dtype is None else dtype)
    # Tensors of one file together: a memory-mapped file is released sooner.
    order = sorted(sources, key=lambda name: (sources[name].tensor.path, name))
    total = sum(math.prod(sources[name].shape) for name in order) * target.itemsize
    placed: dict[str, Any] = {}
    start = time.perf_counter()
    try:
        with tqdm(
            total=total,
            unit="B",
            unit_scale=True,
            desc=f"loading {origin}",
            dynamic_ncols=True,
            disable=None,
        ) as progress:
            _place_each(sources, order, target, shardings, convert, placed, progress)
    except BaseException:
        release(placed.values())
        raise
    logger.info(
        "loaded %d parameters (%.2f GB of %s) from %s in %.1f s",
        len(placed),
        total / 1e9,
        target.name,
        origin,
        time.perf_counter() - start,
    )
    return placed


def _place_each(
    sources: Mapping[str, ParamSource],
    order: list[str],
    target: np.dtype,
    shardings: Optional[Mapping[str, Any]],
    convert: Optional[Convert],
    placed: dict[str, Any],
    progress,
) -> None:
    """Reads the parameters `order` names one at a time into `placed` (so that a
    caller can release what was placed if one fails)."""
    for name in order:
        source = sources[name]
        if shardings is None:
            array = source.read(_full_box(source.shape), target)
        else:
            array = _place_sharded(source, target, shardings[name])
        placed.update(converted(name, array, convert))
        progress.update(math.prod(source.shape) * target.itemsize)
