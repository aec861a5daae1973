"""What a zarr array needs on disk before it is read: every chunk, and bytes
enough for the shape it claims.

TensorStore reads a chunk that is not there as the array's fill value, so an
array whose chunk files were lost (a copy cut short) reads as zeros without
an error. T5X and Orbax store every chunk (T5X's arrays have no fill value;
Orbax records `store_array_data_equal_to_fill_value`), so a missing chunk is
damage: `check_chunks` names the array and the first missing chunk. Only an
array whose metadata declares a fill value and whose writer says it leaves
fill-valued chunks out may lack chunks.

A shape is only a claim until the data is read; `check_claimed_bytes` caps
it by the bytes on disk and the compressor's largest expansion, so a
manifest claiming a vocabulary of 10^10 is refused before memory is
allocated for it.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Iterable, Iterator, Mapping, Optional

from seahorse_metrics.checkpoints.params import CheckpointError

# How far a codec can expand what it stores: DEFLATE (gzip, zlib) at most
# 1032:1; zstd (Orbax's default) at most 32768:1 (an RLE block: a 3-byte
# header and one byte for 128 KiB); zarr's "none" not at all. Other codecs
# (blosc) are not capped.
_MAX_EXPANSION = {None: 1, "gzip": 1032, "zlib": 1032, "zstd": 32768}


def chunk_grid(metadata: Mapping[str, Any]) -> tuple[list[int], list[int], str, str]:
    """(shape, chunk shape, key prefix, separator) of a zarr v2 `.zarray` or
    zarr v3 `zarr.json` dict; v3's default key encoding names chunks `c/0/1`.

    Raises:
      CheckpointError: if the metadata has no usable shape or chunk shape.
    """
    if metadata.get("zarr_format") == 3:
        grid = metadata.get("chunk_grid", {}).get("configuration", {})
        chunks = grid.get("chunk_shape")
        encoding = metadata.get("chunk_key_encoding", {})
        separator = encoding.get("configuration", {}).get(
            "separator", "/" if encoding.get("name", "default") == "default" else "."
        )
        prefix = ("c" + separator) if encoding.get("name", "default") == "default" else ""
    else:
        chunks = metadata.get("chunks")
        separator, prefix = metadata.get("dimension_separator") or ".", ""
    shape = metadata.get("shape")
    if (
        not isinstance(shape, list)
        or not isinstance(chunks, list)
        or len(shape) != len(chunks)
        or not all(isinstance(n, int) and n >= 0 for n in shape)
        or not all(isinstance(n, int) and n > 0 for n in chunks)
    ):
        raise CheckpointError(f"zarr metadata with unusable shape {shape!r} / chunks {chunks!r}")
    return shape, chunks, prefix, separator


def chunk_count(metadata: Mapping[str, Any]) -> int:
    """How many chunks tile the array."""
    shape, chunks, _, _ = chunk_grid(metadata)
    return math.prod(-(-size // chunk) for size, chunk in zip(shape, chunks))


def chunk_keys(metadata: Mapping[str, Any]) -> Iterator[str]:
    """The key of every chunk of the array, in C order (a scalar has one, `0`)."""
    shape, chunks, prefix, separator = chunk_grid(metadata)
    if not shape:
        yield prefix + "0"
        return
    counts = [-(-size // chunk) for size, chunk in zip(shape, chunks)]
    for index in itertools.product(*(range(count) for count in counts)):
        yield prefix + separator.join(map(str, index))


def may_omit_chunks(metadata: Mapping[str, Any], stores_fill_chunks: bool) -> bool:
    """Whether missing chunks are legitimate: the array declares a fill value
    and its writer leaves chunks equal to it out."""
    return metadata.get("fill_value") is not None and not stores_fill_chunks


def check_chunks(
    name: str,
    where: str,
    metadata: Mapping[str, Any],
    present: Iterable[str],
    stores_fill_chunks: bool = True,
) -> None:
    """Raises unless every chunk of the array is among the `present` keys.

    Args:
      name: The parameter, for the message.
      where: The array's directory or key, for the message.
      metadata: Its `.zarray` / `zarr.json` dict.
      present: The chunk keys stored for it (relative to the array).
      stores_fill_chunks: Whether its writer stores chunks equal to the fill value.

    Raises:
      CheckpointError: naming the array and the first missing chunk.
    """
    if may_omit_chunks(metadata, stores_fill_chunks):
        return
    present = set(present)
    needed = chunk_count(metadata)
    if needed <= len(present) and all(key in present for key in chunk_keys(metadata)):
        return
    missing = next(key for key in chunk_keys(metadata) if key not in present)
    raise CheckpointError(
        f"parameter {name}: zarr array {where} lacks chunk {missing!r} ({needed:,} chunks "
        f"needed, {len(present):,} stored); the checkpoint is incomplete (a copy cut short?): "
        "copy it again"
    )


def claimed_bytes(metadata: Mapping[str, Any], itemsize: int) -> int:
    """The bytes the array's shape claims."""
    shape, _, _, _ = chunk_grid(metadata)
    return math.prod(shape) * itemsize


def compressor_of(metadata: Mapping[str, Any]) -> Optional[str]:
    """The compressor id of a zarr v2 array ("gzip", ...), None for none, and
    "?" for v3 codecs or anything else whose expansion is not bounded here."""
    if metadata.get("zarr_format") == 3:
        codecs = [
            codec.get("name") for codec in metadata.get("codecs", []) if isinstance(codec, dict)
        ]
        compressing = [codec for codec in codecs if codec not in ("bytes", "transpose", "crc32c")]
        if not compressing:
            return None
        return compressing[0] if len(compressing) == 1 and compressing[0] in _MAX_EXPANSION else "?"
    compressor = metadata.get("compressor")
    return None if compressor is None else str(compressor.get("id", "?"))


def max_expansion(compressor: Optional[str]) -> Optional[int]:
    """How many times its stored size `compressor` can expand to, or None when unbounded."""
    return _MAX_EXPANSION.get(compressor)


def check_claimed_bytes(
    name: str, where: str, claimed: int, stored: int, compressor: Optional[str]
) -> None:
    """Raises if `claimed` bytes cannot come out of `stored` bytes compressed
    with `compressor` (unbounded compressors are not checked).

    Raises:
      CheckpointError: naming the parameter, its claim and what is on disk.
    """
    expansion = _MAX_EXPANSION.get(compressor)
    if expansion is None or claimed <= stored * expansion:
        return
    raise CheckpointError(
        f"parameter {name}: {where} claims {claimed:,} bytes but holds {stored:,} bytes on disk "
        f"({compressor or 'uncompressed'}, at most {expansion}x): the shape in its metadata is "
        "wrong or the checkpoint is damaged"
    )
