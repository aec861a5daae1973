"""The first decoder step: log P(token) for the scorer, validation and `first_token_probs`.

A metric's score is read at the first decoder step: the encoder runs over
the input, the decoder is fed `config.decoder_start_id` once, and the
log-softmax over the full vocabulary is read at a few token ids (those of
"1" and "0"). This module is that program, once: the JAX engine compiles it
per batch shape (`engines.jax_engine`), training's validation scores with
that engine, and `EncoderDecoderModel.first_token_probs` runs it directly.

A packed batch holds several inputs per row (`encoder_segment_ids` 1..slots);
segment s gets decoder position s - 1, fed the start token, and the
network's segment masks keep each position to its own segment's encoder
tokens, so every slot scores as if it were alone.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Mapping, Optional

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from seahorse_metrics.model import partitioning


def log_probs(
    model: Any, token_ids: tuple[int, ...], params: Any, encoder_input_tokens: jax.Array
) -> jax.Array:
    """float32 [rows, len(token_ids)]: log P(token_ids) at the first decoder step.

    Args:
      model: The `EncoderDecoderModel`.
      token_ids: Vocabulary ids to read.
      params: Its parameters.
      encoder_input_tokens: int [rows, length], padded with `config.pad_id`.
    """
    rows = encoder_input_tokens.shape[0]
    batch = {
        "encoder_input_tokens": encoder_input_tokens,
        "decoder_input_tokens": jnp.full((rows, 1), model.config.decoder_start_id, jnp.int32),
    }
    return _read_log_probs(model.logits(params, batch)[:, 0], token_ids)


def packed_log_probs(
    model: Any,
    token_ids: tuple[int, ...],
    slots: int,
    params: Any,
    encoder_input_tokens: jax.Array,
    encoder_segment_ids: jax.Array,
) -> jax.Array:
    """float32 [rows, slots, len(token_ids)]: the first step of each packed
    segment (see the module docstring)."""
    rows = encoder_input_tokens.shape[0]
    batch = {
        "encoder_input_tokens": encoder_input_tokens,
        "encoder_segment_ids": encoder_segment_ids,
        "decoder_input_tokens": jnp.full((rows, slots), model.config.decoder_start_id, jnp.int32),
        "decoder_segment_ids": jnp.broadcast_to(
            jnp.arange(1, slots + 1, dtype=jnp.int32), (rows, slots)
        ),
    }
    return _read_log_probs(model.logits(params, batch), token_ids)


def question_log_probs(
    model: Any,
    token_ids: tuple[int, ...],
    questions: Any,
    params: Any,
    encoder_input_tokens: jax.Array,
) -> jax.Array:
    """float32 [rows, questions, len(token_ids)]: log P(token_ids) after each
    question's decoder prefix, all questions against one encoder pass per row.

    Args:
      model: The `EncoderDecoderModel`.
      token_ids: Vocabulary ids to read.
      questions: The `model.questions.QuestionPrefixes` (their segments lie
        side by side on the decoder's length axis; see that module).
      params: Its parameters.
      encoder_input_tokens: int [rows, length], padded with `config.pad_id`.
    """
    rows = encoder_input_tokens.shape[0]
    decoder = questions.decoder_row(model.config.decoder_start_id)
    batch = {
        name: jnp.broadcast_to(jnp.asarray(row_1xS), (rows, row_1xS.shape[1]))
        for name, row_1xS in decoder.items()
    }
    batch["encoder_input_tokens"] = encoder_input_tokens
    return _read_log_probs(model.logits(params, batch), token_ids)


def _read_log_probs(logits_BxT: jax.Array, token_ids: tuple[int, ...]) -> jax.Array:
    """log P(token_ids) from the full-vocabulary softmax over the last axis."""
    logits_BxT = logits_BxT.astype(jnp.float32)
    log_z_Bx1 = jax.nn.logsumexp(logits_BxT, axis=-1, keepdims=True)
    chosen_BxN = jnp.take(logits_BxT, jnp.asarray(token_ids, jnp.int32), axis=-1)
    return chosen_BxN - log_z_Bx1


def check_token_ids(token_ids, vocab_size: int) -> tuple[int, ...]:
    """`token_ids` as a tuple of ints.

    Raises:
      ValueError: for ids outside the vocabulary.
    """
    token_ids = tuple(int(i) for i in token_ids)
    bad = [i for i in token_ids if not 0 <= i < vocab_size]
    if bad:
        raise ValueError(f"token ids {bad} are outside the vocabulary [0, {vocab_size})")
    return token_ids


def compile_first_step(
    model: Any,
    token_ids: tuple[int, ...],
    mesh: Mesh,
    abstract_params: Any,
    rows: int,
    length: int,
    compiler_options: Optional[Mapping[str, Any]] = None,
    slots: Optional[int] = None,
    questions: Optional[Any] = None,
):
    """Compiles `log_probs` (or, with `slots`, `packed_log_probs`) for
    `[rows, length]` batches ahead of time.

    Args:
      model: The `EncoderDecoderModel`.
      token_ids: Vocabulary ids whose log-probabilities are read.
      mesh: The ('data', 'model') mesh; parameters are split by their
        logical axes, the batch over 'data'.
      abstract_params: `jax.ShapeDtypeStruct`s of the parameters (their
        dtype decides the program); no weights are needed.
      rows, length: The batch shape.
      compiler_options: XLA options (see `engines.jax_engine.JaxEngine`).
      slots: None, or the inputs packed per row (the program then also
        takes the segment ids and returns `[rows, slots, len(token_ids)]`).
      questions: None, or a multi-question metric's `QuestionPrefixes` (the
        program is `question_log_probs`, `[rows, questions, len(token_ids)]`).

    Returns:
      The compiled executable `(params, tokens[, segment_ids]) -> log-probabilities`.

    Raises:
      ValueError: for `slots` with `questions` (packed inputs of a
        multi-question metric are not supported).
    """
    param_shardings = partitioning.logical_to_sharding(model.param_logical_axes(), mesh)
    program, inputs = _program(model, token_ids, rows, length, slots, questions)
    function = jax.jit(
        program,
        in_shardings=(param_shardings,) + (partitioning.data_sharding(mesh),) * len(inputs),
        out_shardings=NamedSharding(mesh, PartitionSpec(partitioning.DATA_AXIS)),
    )
    with partitioning.sharding_context(mesh):
        return function.lower(abstract_params, *inputs).compile(
            compiler_options=dict(compiler_options) if compiler_options else None
        )


def _program(
    model: Any,
    token_ids: tuple[int, ...],
    rows: int,
    length: int,
    slots: Optional[int],
    questions: Optional[Any],
) -> tuple[Callable, tuple[jax.ShapeDtypeStruct, ...]]:
    """`compile_first_step`'s function of (params, inputs...) and its abstract
    inputs: the tokens, and with `slots` their segment ids too."""
    tokens = jax.ShapeDtypeStruct((rows, length), jnp.int32)
    if questions is not None:
        if slots is not None:
            raise ValueError(
                "packing several inputs per row is not supported with a "
                "multi-question metric; score it unpacked"
            )
        program, inputs = (
            functools.partial(question_log_probs, model, token_ids, questions),
            (tokens,),
        )
    elif slots is None:
        program, inputs = functools.partial(log_probs, model, token_ids), (tokens,)
    else:
        program, inputs = (
            functools.partial(packed_log_probs, model, token_ids, slots),
            (tokens, tokens),
        )
    return program, inputs
