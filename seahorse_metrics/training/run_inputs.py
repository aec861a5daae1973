"""What a training run starts from: its network (`resolve_model`), its
vocabulary (`resolve_vocabulary`) and its examples (`load_examples`), read
from the seqio tasks once and cached beside the run.
"""

from __future__ import annotations

import functools
import logging
import os
from typing import Any, Optional

import jax

from seahorse_metrics.checkpoints.layout import VOCAB_FILE
from seahorse_metrics.model import T5Config, get_config
from seahorse_metrics.training import data as data_lib
from seahorse_metrics.training import multi_question
from seahorse_metrics.training.config import TrainConfig
from seahorse_metrics.training.data import ExampleSet

logger = logging.getLogger(__name__)

TRAIN_SPLIT, VALIDATION_SPLIT = "train", "validation"
# Embedding rows are rounded up to a multiple of this (as mT5's 250112).
VOCAB_MULTIPLE = 128


def resolve_model(
    config: TrainConfig, mesh: Optional[Any] = None, load_params: bool = True
) -> tuple[T5Config, Optional[Any]]:
    """The network config and, with `init_checkpoint`, its float32 parameters.

    The checkpoint's architecture replaces the preset; dropout and dtype
    come from `config`. The parameters are read tensor by tensor straight
    into their shardings on `mesh` (host numpy arrays without a mesh), so a
    large checkpoint never sits whole in host memory; `load_params=False`
    reads the architecture only.
    """
    overrides = dict(config.model_overrides)
    overrides["dropout_rate"] = config.dropout_rate
    overrides["remat"] = config.remat
    overrides["scan_layers"] = config.scan_layers
    if config.dtype:
        overrides["dtype"] = config.dtype
    if config.init_checkpoint is None:
        if config.vocab_size_from_vocabulary:
            from seahorse_metrics.data import vocab  # pylint: disable=g-import-not-at-top

            pieces = vocab.SentencePieceTokenizer(resolve_vocabulary(config)).vocab_size
            overrides["vocab_size"] = -(-pieces // VOCAB_MULTIPLE) * VOCAB_MULTIPLE
        return get_config(config.model, **overrides), None
    from seahorse_metrics import checkpoints  # pylint: disable=g-import-not-at-top

    if not load_params:
        return checkpoints.checkpoint_config(config.init_checkpoint).replace(**overrides), None
    logger.info(
        "Initialising from %s (its architecture replaces the preset).", config.init_checkpoint
    )
    model_config, params = checkpoints.load_checkpoint(
        config.init_checkpoint, dtype="float32", mesh=mesh
    )
    return model_config.replace(**overrides), params


def resolve_vocabulary(config: TrainConfig) -> str:
    """The SentencePiece model: configured, else the initial checkpoint's, else the sample's.

    Raises:
      FileNotFoundError: If the configured vocabulary does not exist.
    """
    from seahorse_metrics.data import vocab  # pylint: disable=g-import-not-at-top

    if config.vocabulary:
        if not os.path.isfile(config.vocabulary):
            raise FileNotFoundError(f"TrainConfig.vocabulary {config.vocabulary} does not exist.")
        return config.vocabulary
    if config.init_checkpoint:
        bundled = os.path.join(config.init_checkpoint, VOCAB_FILE)
        if os.path.isfile(bundled):
            return bundled
    return vocab.default_vocab_path()


def target_ids(vocabulary_path: str) -> tuple[int, int]:
    """The ids the metric reads, of "1" then "0" (`vocab.target_token_ids`)."""
    from seahorse_metrics.data import vocab  # pylint: disable=g-import-not-at-top

    return vocab.target_token_ids(vocab.SentencePieceTokenizer(vocabulary_path))


def _register_tasks(config: TrainConfig, vocabulary_path: str) -> None:
    """Registers the SEAHORSE tasks over `config.data_dir` unless they already are
    (for this package's readers only: seqio and TensorFlow stay unimported)."""
    if config.data_dir is None:
        return
    from seahorse_metrics import tasks  # pylint: disable=g-import-not-at-top

    wanted = (
        os.path.abspath(config.data_dir),
        os.path.abspath(vocabulary_path),
        config.input_length,
        config.truncation,
    )
    registered = tasks.registered_config()
    if registered is not None:
        if (
            registered.data_dir,
            registered.vocab_path,
            registered.input_length,
            registered.truncation,
        ) == wanted:
            return
        logger.warning(
            "Re-registering the seqio tasks for data_dir=%s, input_length=%d "
            "(they were registered with other settings).",
            wanted[0],
            wanted[2],
        )
        tasks.unregister()
    tasks.register(
        config.data_dir,
        vocabulary=vocabulary_path,
        input_length=config.input_length,
        truncation=config.truncation,
        with_seqio=False,  # the trainer reads its own tasks without TensorFlow
    )


def _load_split(
    config: TrainConfig, vocabulary_path: str, split: str, task: Optional[str] = None
) -> ExampleSet:
    task = task or config.task
    fingerprint = {
        "data_dir": os.path.abspath(config.data_dir) if config.data_dir else None,
        "vocabulary": os.path.abspath(vocabulary_path),
        "truncation": config.truncation,
    }
    cached = data_lib.cached_split_path(
        config.cache_dir, task, split, config.input_length, config.target_length, fingerprint
    )
    if not os.path.exists(cached):
        _register_tasks(config, vocabulary_path)
    return data_lib.load_split(
        task,
        split,
        config.input_length,
        config.target_length,
        cache_dir=config.cache_dir,
        fingerprint=fingerprint,
        write_cache=jax.process_index() == 0,
    )


def load_examples(config: TrainConfig) -> dict[str, ExampleSet]:
    """The run's training (and, when it validates, validation) examples.

    Splits are read from `config.task` once and cached in
    `config.cache_dir`; later runs (a resume, other processes, a run with the
    same data settings and the same cache directory) read the cache without
    touching seqio/TensorFlow.

    Returns:
      {"train": ExampleSet} plus "validation" when `config.eval_every` > 0.
    """
    vocabulary_path = resolve_vocabulary(config)
    splits = [TRAIN_SPLIT] + ([VALIDATION_SPLIT] if config.eval_every else [])
    if config.task == multi_question.MULTI_QUESTION_TASK:
        return multi_question.load_question_examples(
            functools.partial(_load_split, config, vocabulary_path),
            vocabulary_path,
            splits,
            config.question_rates,
        )
    return {split: _load_split(config, vocabulary_path, split) for split in splits}


def check_vocab_size(examples: ExampleSet, model_config: T5Config, split: str) -> None:
    """Refuses examples holding a token id beyond the model's embedding.

    Raises:
      ValueError: naming the split, the id and the model's `vocab_size`.
    """
    top = max(int(examples.input_tokens.max(initial=0)), int(examples.target_tokens.max(initial=0)))
    if top >= model_config.vocab_size:
        raise ValueError(
            f"The {split} examples hold token id {top} but the model's vocab_size is "
            f"{model_config.vocab_size}: the vocabulary and the model do not match."
        )
