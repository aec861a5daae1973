"""seqio tasks for training and evaluating SEAHORSE metrics.

Nothing is registered at import. An explicit call (from gin, the CLI or a
test) registers the tasks::

    from seahorse_metrics import tasks
    tasks.register(data_dir="prepared/", vocabulary="spiece.model")
    seqio.get_mixture_or_task("seahorse_q4").get_dataset(
        {"inputs": 2048, "targets": 2}, split="validation", shuffle=False)

Tasks (see `specs.py`): `seahorse_q1` ... `seahorse_q6` (train, validation,
test; Yes/No ratings of that question only), the mixture `seahorse_all`,
`mface_{quality,attribution,informativeness}`, `true_<name>` and
`ratings_<name>` (split `test`). Inputs are `premise: {article} hypothesis:
{summary}` (a query-focused pair, whose file has a `question` column or
field: `question: {question} premise: {article} hypothesis: {summary}`),
targets `1`/`0`. Each example also carries `id`, `lang`,
`source`, `system` (strings), `rating` (float32, NaN when unknown),
`label`, `question` (the SEAHORSE question number) and `truncated`
(int32): `METADATA_FEATURES`. seqio's
feature converters drop them; a seqio Mixture keeps them only when asked
(`get_dataset(..., passthrough_features=METADATA_FEATURES)`).

Inputs are tokenised to `input_length` when a split is first used,
shortening the article so the whole summary fits (`truncation=
"summary_first"`) or cutting the whole string (`"joint"`, as the released
checkpoints saw it); the truncation counts by language are logged and
available from `length_report`.

With `eval_targets="positive"` the evaluation splits are laid out for
scoring instead (target `1` for every example, the label beside it) and the
tasks carry ROC-AUC and Pearson score metrics (`tasks.metrics`); importing
`seahorse_metrics.tasks.t5x` registers them so for T5X's train.py and eval.py.

`seahorse_all` mixes the six questions by number of training examples. Its
inputs carry no question marker, so a model trained on it learns whether
raters said yes to any question; use it for pipeline-wide iteration, the
per-question tasks for per-question metrics.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any, Optional, Sequence

from seahorse_metrics.data.mface import DEFAULT_THRESHOLD as DEFAULT_MFACE_THRESHOLD
from seahorse_metrics.data.vocab import SentencePieceTokenizer, default_vocab_path
from seahorse_metrics.tasks.examples import METADATA_FEATURES, ExampleEncoder
from seahorse_metrics.tasks.specs import (
    SEAHORSE_MIXTURE,
    RatingsFiles,
    TaskSpec,
    mface_specs,
    mixture_specs,
    normalise_ratings_files,
    ratings_specs,
    seahorse_specs,
    true_specs,
)

logger = logging.getLogger(__name__)

DEFAULT_SEED = 0

__all__ = [
    "DEFAULT_SEED",
    "METADATA_FEATURES",
    "TaskConfig",
    "examples_for_task",
    "length_report",
    "register",
    "registered_config",
    "task_names_of",
    "task_splits",
    "unregister",
]


@dataclasses.dataclass(frozen=True)
class TaskConfig:
    """The arguments of a registration, normalised so equal setups compare equal."""

    data_dir: Optional[str]
    vocab_path: str
    extra_ids: int
    input_length: int
    truncation: str
    mface_path: Optional[str]
    mface_threshold: float
    mface_languages: Optional[tuple[str, ...]]
    true_dir: Optional[str]
    ratings: tuple
    seed: int
    eval_targets: str


@dataclasses.dataclass
class _Registration:
    config: TaskConfig
    specs: dict[str, TaskSpec]
    encoder: ExampleEncoder
    names: list[str]
    vocabulary: Any  # as given: a path, None, or a seqio vocabulary
    in_seqio: bool


_REGISTRATION: Optional[_Registration] = None


def _abspath(path) -> Optional[str]:
    return os.path.abspath(os.fspath(path)) if path is not None else None


def _vocabulary_config(vocabulary) -> tuple[str, int]:
    if vocabulary is None:
        return default_vocab_path(), 0
    if isinstance(vocabulary, (str, os.PathLike)):
        return _abspath(vocabulary), 0
    model_file = getattr(vocabulary, "sentencepiece_model_file", None)
    if model_file is None:
        raise TypeError(
            f"vocabulary must be a path or a seqio.SentencePieceVocabulary, got {type(vocabulary)}"
        )
    return model_file, int(getattr(vocabulary, "extra_ids", 0))


def register(
    data_dir: Optional[str | os.PathLike],
    vocabulary=None,
    input_length: int = 2048,
    truncation: str = "summary_first",
    mface_path: Optional[str | os.PathLike] = None,
    true_dir: Optional[str | os.PathLike] = None,
    ratings_files: Optional[RatingsFiles] = None,
    seed: int = DEFAULT_SEED,
    mface_threshold: float = DEFAULT_MFACE_THRESHOLD,
    mface_languages: Optional[Sequence[str]] = None,
    eval_targets: str = "label",
    with_seqio: bool = True,
) -> list[str]:
    """Registers the seqio tasks (and the `seahorse_all` mixture).

    Calling it again with the same arguments does nothing (but add the
    seqio tasks to a registration made without them); with different
    arguments it raises (call `unregister()` first).

    Args:
      data_dir: Directory of prepared SEAHORSE JSONL splits (the output of
        `seahorse-metrics prepare`); None registers no SEAHORSE tasks.
      vocabulary: A SentencePiece model path or a
        `seqio.SentencePieceVocabulary`; None: the shipped sample model.
      input_length: Maximum input length in tokens, EOS included.
      truncation: `summary_first` or `joint` (see `seahorse_metrics.data.inputs`).
      mface_path: The mFACE sheet (CSV/TSV/XLSX), or None.
      true_dir: A directory of TRUE CSVs (or one CSV), or None.
      ratings_files: Generic rated files (paths, or a mapping name -> path or
        name -> {"path": ..., **read_ratings kwargs}), or None.
      seed: Shuffling seed used when `get_dataset` gets none.
      mface_threshold: Binarisation threshold of the mFACE rater average.
      mface_languages: Keep only these mFACE languages; None keeps all.
      eval_targets: `label` (targets `1`/`0` + EOS in every split) or
        `positive` (outside `train`, every target is `1` with the label in
        the `label` feature, and the tasks carry ROC-AUC and Pearson score
        metrics: T5X's evaluation, see `seahorse_metrics.tasks.t5x`).
      with_seqio: False registers the tasks for this package's TensorFlow-free
        readers only (`examples_for_task`, `task_names_of`: what the trainer
        reads), without importing seqio and TensorFlow (seconds at start-up).

    Returns:
      The registered task and mixture names.

    Raises:
      ValueError: on a conflicting re-registration, an unknown truncation
        mode, or a vocabulary without whole `▁1`/`▁0` pieces.
      FileNotFoundError: for a missing data directory or file.
    """
    encoding = _encoding_fields(vocabulary, input_length, truncation, seed, eval_targets)
    sources = _data_sources(
        data_dir, mface_path, true_dir, ratings_files, mface_threshold, mface_languages
    )
    return _register_config(TaskConfig(**encoding, **sources), vocabulary, with_seqio)


def _encoding_fields(vocabulary, input_length, truncation, seed, eval_targets) -> dict[str, Any]:
    """`TaskConfig`'s fields of how examples are encoded, from `register`'s
    arguments, normalised to compare equal."""
    vocab_path, extra_ids = _vocabulary_config(vocabulary)
    return dict(
        vocab_path=vocab_path,
        extra_ids=extra_ids,
        input_length=int(input_length),
        truncation=truncation,
        seed=int(seed),
        eval_targets=eval_targets,
    )


def _data_sources(
    data_dir, mface_path, true_dir, ratings_files, mface_threshold, mface_languages
) -> dict[str, Any]:
    """`TaskConfig`'s fields of where the examples come from, from `register`'s
    arguments, normalised to compare equal (absolute paths, sorted languages)."""
    return dict(
        data_dir=_abspath(data_dir),
        mface_path=_abspath(mface_path),
        mface_threshold=float(mface_threshold),
        mface_languages=tuple(sorted(mface_languages)) if mface_languages is not None else None,
        true_dir=_abspath(true_dir),
        ratings=normalise_ratings_files(ratings_files) if ratings_files else (),
    )


def _register_config(config: TaskConfig, vocabulary, with_seqio: bool) -> list[str]:
    """`register` of a normalised `config`: nothing new when it is the one
    registered (but its seqio tasks when they are asked for now), else the
    tasks and the mixture it makes."""
    global _REGISTRATION
    if _REGISTRATION is not None:
        names = _same_registration(config)
        if with_seqio and not _REGISTRATION.in_seqio:
            _add_to_seqio(_REGISTRATION)
        return names
    specs = _build_specs(config)
    encoder = ExampleEncoder(
        _tokenizer(config, vocabulary), config.input_length, config.truncation, config.eval_targets
    )
    names = [s.name for s in specs]
    if mixture_specs(specs):
        names.append(SEAHORSE_MIXTURE)
    registration = _Registration(
        config, {s.name: s for s in specs}, encoder, names, vocabulary, in_seqio=False
    )
    if with_seqio:
        _add_to_seqio(registration)
    _REGISTRATION = registration
    logger.info(
        "registered %d %stasks: %s", len(names), "seqio " if with_seqio else "", ", ".join(names)
    )
    return list(names)


def _add_to_seqio(registration: _Registration) -> None:
    """Adds a registration's tasks and mixture to seqio's registries."""
    from seahorse_metrics.tasks import registry  # Lazy: imports seqio and TensorFlow.

    vocabulary = registration.vocabulary
    if not _is_seqio_vocabulary(vocabulary):
        vocabulary = _seqio_vocabulary(registration.config)
    specs = list(registration.specs.values())
    seed = registration.config.seed
    names = registry.register_tasks(specs, registration.encoder, vocabulary, seed)
    assert names == registration.names, (names, registration.names)
    registration.in_seqio = True


def _same_registration(config: TaskConfig) -> list[str]:
    """The registered names when `config` is the registered one; raises otherwise."""
    if _REGISTRATION.config == config:
        return list(_REGISTRATION.names)
    raise ValueError(
        "seahorse tasks are already registered with different arguments:\n"
        f"  registered: {_REGISTRATION.config}\n  requested:  {config}\n"
        "call seahorse_metrics.tasks.unregister() first"
    )


def _build_specs(config: TaskConfig) -> list[TaskSpec]:
    if config.truncation not in ("summary_first", "joint"):
        raise ValueError(f"unknown truncation {config.truncation!r}; choose summary_first or joint")
    specs: list[TaskSpec] = []
    if config.data_dir is not None:
        specs += seahorse_specs(config.data_dir)
    if config.mface_path is not None:
        specs += mface_specs(config.mface_path, config.mface_threshold, config.mface_languages)
    if config.true_dir is not None:
        specs += true_specs(config.true_dir)
    specs += ratings_specs(config.ratings)
    names = [s.name for s in specs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"two task sources map to the same task names {duplicates}; rename one")
    if not specs:
        raise ValueError(
            "nothing to register: give data_dir, mface_path, true_dir or ratings_files"
        )
    return specs


def _is_seqio_vocabulary(vocabulary) -> bool:
    return vocabulary is not None and not isinstance(vocabulary, (str, os.PathLike))


def _seqio_vocabulary(config: TaskConfig):
    from seahorse_metrics.data.vocab import seqio_vocabulary

    return seqio_vocabulary(config.vocab_path, extra_ids=config.extra_ids)


def _tokenizer(config: TaskConfig, vocabulary) -> SentencePieceTokenizer:
    if os.path.isfile(config.vocab_path) or not _is_seqio_vocabulary(vocabulary):
        return SentencePieceTokenizer(config.vocab_path)
    # A remote vocabulary (gs://...): seqio reads it.
    return SentencePieceTokenizer(config.vocab_path, model_proto=vocabulary.sp_model)


def unregister() -> None:
    """Removes the registered tasks from seqio, so `register` can be called anew."""
    global _REGISTRATION
    if _REGISTRATION is None:
        return
    if _REGISTRATION.in_seqio:
        from seahorse_metrics.tasks import registry

        registry.unregister_tasks(_REGISTRATION.names)
    _REGISTRATION = None


def registered_config() -> Optional[TaskConfig]:
    """The configuration of the current registration, or None."""
    return _REGISTRATION.config if _REGISTRATION is not None else None


def _registered_spec(task: str) -> tuple[TaskSpec, ExampleEncoder]:
    if _REGISTRATION is None:
        raise ValueError(
            "no seahorse tasks are registered; call seahorse_metrics.tasks.register() first"
        )
    if task not in _REGISTRATION.specs:
        raise ValueError(f"unknown task {task!r}; registered: {sorted(_REGISTRATION.specs)}")
    return _REGISTRATION.specs[task], _REGISTRATION.encoder


def examples_for_task(task: str, split: str) -> list[dict[str, Any]]:
    """The tokenised examples of a registered task split, without TensorFlow.

    Each example is a dict of numpy values with the same features as the
    seqio dataset (`inputs`, `targets`, `id`, `lang`, `source`, `system`,
    `rating`, `label`, `question`, `truncated`), in source order.
    """
    spec, encoder = _registered_spec(task)
    examples = encoder.examples(spec, split)
    return [examples.example(i) for i in range(len(examples))]


def task_names_of(name: str) -> Optional[tuple[str, ...]]:
    """The registered tasks that `name` reads: itself when it is a task, the
    `seahorse_all` mixture's tasks in seqio's order (by name), or None when the
    current registration does not know `name`."""
    if _REGISTRATION is None or name not in _REGISTRATION.names:
        return None
    if name == SEAHORSE_MIXTURE:
        return tuple(mixture_specs(list(_REGISTRATION.specs.values())))
    return (name,)


def task_splits(task: str) -> tuple[str, ...]:
    """The splits of a registered task."""
    return _registered_spec(task)[0].splits


def length_report(task: str, split: Optional[str] = None) -> dict[str, Any]:
    """How many inputs of a registered task were truncated, overall and by language."""
    spec, encoder = _registered_spec(task)
    return encoder.length_report(spec, split)
