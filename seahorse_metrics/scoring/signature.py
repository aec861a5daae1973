"""A signature on every score: one short string that says what produced it.

    seahorse:0.1.0|engine:jax-0.10.2|isa:avx512_bf16|dtype:float32|quant:none|ckpt:3f2a9c1e|
    len:2048|trunc:summary_first|long:truncate|unit:summary|norm:full|cut:error|tmpl:5b1e

(one line). Like sacrebleu's, it names everything the number depends on:
this package's version, the engine and its library's version, the
instruction set its kernels run on (or the accelerator), the compute dtype,
the quantization (JAX's int8 product dtype; CTranslate2's int8 weight bits
and smoothing), a short hash of the checkpoint's and vocabulary's content,
and the input settings (length budget, truncation, long inputs, summary or
sentence units, normalisation, over-long summaries, question template).
Two runs whose signatures match give the same scores to float rounding;
batch sizes, buckets, packing and device counts change the order of float
sums only, so they are not in it. `score` prints one per metric and writes
them to `meta.json`, `evaluate` shows them in its reports, `serve` returns
them (`/healthz`, and the `X-Seahorse-Signature` header).
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Mapping, Optional

UNSAVED = "unsaved"  # A model scored from memory, with no checkpoint to hash.


def format_signature(parts: Mapping[str, Any]) -> str:
    """`key:value|key:value...` in the given order."""
    return "|".join(f"{key}:{value}" for key, value in parts.items())


def parse_signature(signature: str) -> dict[str, str]:
    """The parts of `format_signature`'s string."""
    return dict(part.split(":", 1) for part in signature.split("|"))


def _short_hash(*values: Any) -> str:
    text = json.dumps(values, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]


def checkpoint_hash(checkpoint: Optional[str], vocab_path: str) -> str:
    """8 hex digits of the checkpoint's and vocabulary's content (`UNSAVED`
    for a model given without a checkpoint directory)."""
    from seahorse_metrics.checkpoints.content import content_digest

    if not checkpoint or not os.path.isdir(checkpoint):
        return UNSAVED
    return _short_hash(content_digest(checkpoint), content_digest(vocab_path))


def metric_signature(engine: Any, settings: Any, checkpoint: Optional[str], vocab_path: str) -> str:
    """The signature of one metric's scores (see the module docstring).

    Args:
      engine: Its engine (`engines.base.Engine`).
      settings: The scorer's `InputSettings`.
      checkpoint: The checkpoint directory, or None.
      vocab_path: The vocabulary.
    """
    import seahorse_metrics
    from seahorse_metrics.engines.isa import engine_isa

    units = f"sentence-{settings.sentence_aggregate}" if settings.per_sentence else "summary"
    long_inputs = (
        f"chunk-{settings.chunk_overlap}"
        if settings.long_inputs == "chunk"
        else settings.long_inputs
    )
    # A multi-question metric's columns share a checkpoint: the question tells them apart.
    question = {"q": engine.question} if getattr(engine, "question", None) else {}
    return format_signature(
        {
            "seahorse": seahorse_metrics.__version__,
            "engine": f"{engine.name}-{engine.library_version()}",
            "isa": engine_isa(engine.name).replace(" ", "_"),
            "dtype": engine.model.config.dtype,
            "quant": engine.quantization(),
            "ckpt": checkpoint_hash(checkpoint, vocab_path),
            "len": settings.max_input_length,
            "trunc": settings.truncation,
            "long": long_inputs,
            "unit": units,
            "norm": settings.normalize,
            "cut": settings.long_summaries,
            "tmpl": _short_hash(settings.question_template)[:4],
            **question,
        }
    )
