"""The text objectives' training: span corruption, grounded-token
replacement and noise detection, sequence to sequence on the train split's
pairs, with ELECTRA's per-piece discriminator as an option."""

from __future__ import annotations

import argparse
import logging
import time
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax
from tqdm import tqdm

from demo_data.backbone.noise_detection import detect_noise
from demo_data.backbone.text_objectives import span_corrupt, swap_grounded
from demo_data.backbone.texts import Texts, pad
from demo_data.backbone.vocabulary import Vocabulary

logger = logging.getLogger("demo_data.backbone")


def train_text(
    model, params, args: argparse.Namespace, split_texts: Texts, vocab: Vocabulary, export: Callable
) -> tuple[dict, list[tuple[float, float, float]]]:
    """`args.steps` AdamW steps (warm-up and cosine decay) of the text
    objectives on `split_texts`; `export(params)` every `args.export_every`
    steps. The discriminator's head (a projection of the encoder's outputs
    to one logit per piece) trains with the backbone and is dropped.

    Returns:
      (params, history): the backbone, and (loss, token accuracy,
      discriminator loss) per step.
    """
    warmup = min(100, args.steps // 10)
    schedule = optax.warmup_cosine_decay_schedule(
        0.0, args.learning_rate, warmup, max(args.steps, 1), args.learning_rate * 0.1
    )
    optimizer = optax.adamw(schedule, weight_decay=1e-4)
    trained = {
        "backbone": params,
        "discriminator": {
            "w": np.zeros(model.config.d_model, np.float32),
            "b": np.zeros((), np.float32),
        },
    }
    opt_state = optimizer.init(trained)
    train_step = _step(model, optimizer, args.rtd_weight)
    rng = np.random.default_rng(args.seed)
    start, history = time.time(), []
    with tqdm(range(args.steps), desc="pretrain", mininterval=10) as bar:
        for step in bar:
            batch = _batch(rng, step, args, split_texts, vocab, model.config.vocab_size)
            trained, opt_state, loss, accuracy, rtd = train_step(trained, opt_state, batch)
            params = trained["backbone"]
            history.append((float(loss), float(accuracy), float(rtd)))
            if (step + 1) % 100 == 0:
                recent = np.mean(history[-100:], axis=0)
                bar.set_postfix(loss=f"{recent[0]:.3f}", acc=f"{recent[1]:.3f}")
                logger.info(
                    "step %d loss %.3f token accuracy %.3f discriminator loss %.3f (%.0f s)",
                    step + 1,
                    recent[0],
                    recent[1],
                    recent[2],
                    time.time() - start,
                )
            if args.export_every and (step + 1) % args.export_every == 0 and step + 1 < args.steps:
                export(jax.device_get(params))
    return params, history


def _step(model, optimizer, rtd_weight: float) -> Callable:
    """The jitted train_step(trained, opt_state, batch): the model's loss,
    plus `rtd_weight` times the discriminator's masked cross-entropy."""

    def objective(trained, batch):
        loss, aux = model.loss(trained["backbone"], batch)
        if rtd_weight:
            encoded = model.encode(trained["backbone"], batch["encoder_input_tokens"])
            head = trained["discriminator"]
            logits = encoded @ head["w"] + head["b"]
            labels = batch["noise_labels"]
            mask = (labels >= 0).astype(jnp.float32)
            bce = optax.sigmoid_binary_cross_entropy(
                logits, jnp.maximum(labels, 0).astype(jnp.float32)
            )
            rtd = (bce * mask).sum() / jnp.maximum(mask.sum(), 1.0)
            loss = loss + rtd_weight * rtd
        else:
            rtd = jnp.zeros(())
        return loss, dict(aux, rtd=rtd)

    @jax.jit
    def train_step(trained, opt_state, batch):
        (loss, aux), grads = jax.value_and_grad(objective, has_aux=True)(trained, batch)
        updates, opt_state = optimizer.update(grads, opt_state, trained)
        return optax.apply_updates(trained, updates), opt_state, loss, aux["accuracy"], aux["rtd"]

    return train_step


def _batch(
    rng: np.random.Generator,
    step: int,
    args: argparse.Namespace,
    split_texts: Texts,
    vocab: Vocabulary,
    vocab_size: int,
) -> dict[str, np.ndarray]:
    """One batch of the text objectives for `step` (noise detection's
    strength follows the step)."""
    chosen = rng.integers(0, len(split_texts.whole), args.batch_size)
    strength = float(np.interp(step, [0, max(args.steps - 1, 1)], args.noise_strength))
    examples = [_example(rng, i, args, split_texts, vocab, vocab_size, strength) for i in chosen]
    targets = pad([t for _, t, _ in examples], args.target_length)
    return {
        "encoder_input_tokens": pad([i for i, _, _ in examples], args.input_length),
        "decoder_target_tokens": targets,
        "decoder_input_tokens": np.concatenate(
            [np.zeros((len(targets), 1), np.int32), targets[:, :-1]], axis=1
        ),
        "noise_labels": pad(
            [[-1] * len(i) if labels is None else labels for i, _, labels in examples],
            args.input_length,
            fill=-1,
        ),
    }


def _example(
    rng: np.random.Generator,
    index: int,
    args: argparse.Namespace,
    split_texts: Texts,
    vocab: Vocabulary,
    vocab_size: int,
    strength: float,
) -> tuple[list[int], list[int], list[int] | None]:
    """(inputs, targets, noise labels or None) of the pair `index`: noise
    detection (`args.detect_rate` of the time), grounded-token replacement
    (`args.replace_rate`) or span corruption."""
    pairs, prefix = split_texts.pairs, vocab.hypothesis_prefix
    # Draws in this order so that runs without noise detection repeat those
    # made before it existed (the shipped backbone).
    draw = rng.random()
    if draw < args.detect_rate:
        donor = pairs[rng.integers(len(split_texts.whole))]
        return detect_noise(
            pairs[index],
            donor,
            prefix,
            rng,
            vocab.word_start,
            vocab.is_value,
            vocab.similar,
            args.input_length,
            args.target_length,
            strength=strength,
            kinds=args.noise_kinds,
        )
    if draw < args.detect_rate + args.replace_rate:
        donor = pairs[rng.integers(len(split_texts.whole))]
        return swap_grounded(pairs[index], donor, prefix, rng) + (None,)
    return span_corrupt(split_texts.whole[index], rng, vocab_size) + (None,)
