"""`seahorse-metrics distill`: a small student metric learns a teacher's scores.

A distillation run is an ordinary training run of the trainer (same
checkpoints, resume and MODEL_DIR/best, loadable by `score`, `evaluate` and
`export`) whose examples carry soft targets (`soft_targets.py`):

1. pairs (`distill_pairs.py`): the prepared splits' (article, summary)
   pairs (ratings ignored, except to mix with the teacher when
   `label_weight` > 0) plus any `pairs` files (JSONL/CSV/TSV with article
   and summary columns; globs); the validation split's pairs are held out
   to measure agreement;
2. the teacher's P("1") over {"0", "1"} for every pair (`normalize="pair"`:
   the distribution the student learns): scored with the scorer from a
   checkpoint or hub id, cached in MODEL_DIR/teacher/scores.jsonl (appended
   as it goes, so an interrupted run resumes and a cached pair is never
   scored again; MODEL_DIR/teacher/teacher.json ties the cache to the
   teacher's content and scoring settings, so a teacher replaced at the same
   path is refused, never mixed in), or read from a scores file written by
   `score`;
3. the student: `TrainConfig.model` (+ `model_overrides`, e.g. fewer
   layers), or `TrainConfig.init_checkpoint`, optionally cut to its first
   `student_layers` encoder and decoder layers (written to
   MODEL_DIR/student_init), trained on the soft-label cross-entropy with
   the best checkpoint chosen by Spearman with the teacher on held-out pairs;
4. a table (`distill_report.md` / `.json`, `distill_report.py`).

A run holds `train`'s lock on MODEL_DIR from before it writes anything, and
MODEL_DIR/distill_config.json records its settings, the student's training
settings and the content of the teacher (and, with `student_layers`, of
`init_checkpoint`): a resume of a MODEL_DIR that holds work (teacher
scores, the cut student, checkpoints) under other settings is refused as
`train` refuses one.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from typing import Any, Optional, Sequence

import numpy as np

import gin
from seahorse_metrics.io.atomic import staged_path, write_json_atomically
from seahorse_metrics.training import soft_targets
from seahorse_metrics.training.config import (
    CHANGEABLE_ON_RESUME,
    TrainConfig,
    config_differences,
    parse_gin,
)
from seahorse_metrics.training.data import ExampleSet
from seahorse_metrics.training.distill_pairs import (
    Pairs,
    concatenate,
    first,
    pair_key,
    read_pair_files,
    read_split,
)

logger = logging.getLogger(__name__)

DISTILL_CONFIG_JSON = "distill_config.json"
TEACHER_DIR = "teacher"
# What the teacher cache's scores were computed with (beside scores.jsonl).
TEACHER_RECORD = "teacher.json"
STUDENT_INIT_DIR = "student_init"
# Teacher scores are appended to the cache after every this many pairs.
TEACHER_CHUNK = 256


@dataclasses.dataclass(frozen=True)
class DistillConfig:
    """A distillation run (gin: `DistillConfig.*`, the student's run: `TrainConfig.*`).

    Attributes:
      train: The student's training run (MODEL_DIR, DATA_DIR, model or
        init_checkpoint, steps, ...). `task` only names the run.
      teacher: Checkpoint directory or hub id, or a scores file from `score`
        (JSONL/CSV/TSV with article, summary and `teacher_column`).
      question: The SEAHORSE question whose human labels the test split (and
        `label_weight`) uses.
      pairs: Extra unlabelled pair files or globs.
      premise_field, hypothesis_field: Their text columns.
      teacher_column: Score column of a teacher scores file.
      temperature: Softmax temperature of the loss (and of the teacher's log-odds).
      label_weight: Weight of the human label in a pair's target (0: the teacher only).
      teacher_batch_size: Rows per teacher scoring batch.
      teacher_max_input_length: The teacher's input budget (tokens).
      held_out: Most validation pairs used to measure agreement.
      max_train_pairs: Train on the first this many pairs only (None: all),
        e.g. for a quick trial of the settings.
      student_layers: (encoder, decoder) layers of `init_checkpoint` the
        student keeps (its first ones); None keeps them all.
    """

    train: TrainConfig
    teacher: str
    question: int = 4
    pairs: tuple = ()
    premise_field: str = "article"
    hypothesis_field: str = "summary"
    teacher_column: str = "score"
    temperature: float = 1.0
    label_weight: float = 0.0
    teacher_batch_size: int = 32
    teacher_max_input_length: int = 2048
    held_out: int = 500
    max_train_pairs: Optional[int] = None
    student_layers: Optional[tuple] = None

    def __post_init__(self):
        if not self.teacher or self.teacher is gin.REQUIRED:
            raise ValueError(
                "DistillConfig.teacher is required (--gin.TEACHER=checkpoint, hub "
                "id or scores file)"
            )
        if not self.temperature > 0 or not 0.0 <= self.label_weight <= 1.0:
            raise ValueError("DistillConfig.temperature must be > 0 and label_weight in [0, 1]")
        if self.train.data_dir is None:
            raise ValueError(
                "TrainConfig.data_dir is required: the prepared splits give the "
                "held-out and test pairs"
            )

    def to_json(self) -> dict[str, Any]:
        values = dataclasses.asdict(self)
        values.pop("train")
        values["pairs"] = list(self.pairs)
        return json.loads(json.dumps(values))


_GIN_DISTILL_CONFIG = gin.external_configurable(DistillConfig, name="DistillConfig")


# --------------------------------------------------------------------------
# Teacher scores.


class TeacherScores:
    """The teacher's P("1") per pair, from a checkpoint (scored once, cached)
    or from a scores file.

    Args:
      teacher: Checkpoint directory / hub id, or a scores file.
      cache_dir: Where a checkpoint teacher's scores are cached.
      config: The run's `DistillConfig` (fields, batch size, input budget).
      content: The teacher's `content_digest` when the caller has it
        (computed otherwise).

    Raises:
      ValueError: a cache that holds scores of another teacher or of other
        scoring settings (written by an earlier version included).
    """

    def __init__(
        self, teacher: str, cache_dir: str, config: DistillConfig, content: Optional[str] = None
    ):
        self.teacher, self.config = teacher, config
        self.cache_path = os.path.join(cache_dir, "scores.jsonl")
        self.record_path = os.path.join(cache_dir, TEACHER_RECORD)
        self.is_file = os.path.isfile(teacher)
        self.scored = 0  # Pairs the teacher scored in this process.
        self._scorer = None
        if self.is_file:
            self._known: dict[str, float] = self._read_file()
            return
        from seahorse_metrics.checkpoints.content import content_digest_or_none

        self.identity = {
            "teacher": content or content_digest_or_none(teacher) or teacher,
            "max_input_length": config.teacher_max_input_length,
            "normalize": "pair",
            "long_summaries": soft_targets.LONG_SUMMARIES,
        }
        self._known = self._read_cache()

    def _read_file(self) -> dict[str, float]:
        from seahorse_metrics.data import tables

        known, column = {}, self.config.teacher_column
        for row in tables.iter_table(self.teacher):
            record = row.record or {}
            value = record.get(column)
            try:
                score = float(value)
            except (TypeError, ValueError):
                continue  # A row `score` could not score (it has an `error`).
            premise = record.get(self.config.premise_field)
            hypothesis = record.get(self.config.hypothesis_field)
            if isinstance(premise, str) and isinstance(hypothesis, str):
                known[pair_key(premise, hypothesis)] = score
        if not known:
            raise ValueError(
                f"{self.teacher}: no row with {self.config.premise_field}, "
                f"{self.config.hypothesis_field} and a numeric {column!r}"
            )
        return known

    def _read_cache(self) -> dict[str, float]:
        """The cached scores; `_cache_bytes` is where the whole entries end (a
        line cut by an interruption, and whatever follows it, is dropped)."""
        known, self._cache_bytes = {}, 0
        if os.path.isfile(self.cache_path):
            with open(self.cache_path, "rb") as handle:
                for line in handle:
                    try:
                        entry = json.loads(line)
                        known[entry["key"]] = float(entry["p"])
                    except (ValueError, KeyError, TypeError):
                        break
                    if not line.endswith(b"\n"):
                        break
                    self._cache_bytes += len(line)
        if known:
            self._check_cache_record()
        return known

    def _check_cache_record(self) -> None:
        """Refuses cached scores that another teacher (or other settings) gave."""
        from seahorse_metrics.io.json_files import read_json

        saved = read_json(self.record_path) if os.path.isfile(self.record_path) else {}
        changed = {
            name: (saved.get(name), value)
            for name, value in self.identity.items()
            if saved.get(name) != value
        }
        if not changed:
            return
        listed = "; ".join(f"{name}: {old!r} -> {new!r}" for name, (old, new) in changed.items())
        which = (
            f"of another teacher or of other scoring settings ({listed}; the teacher by "
            "its content)"
            if saved
            else f"without a {TEACHER_RECORD} saying whose they are (an earlier version's)"
        )
        raise ValueError(
            f"{self.cache_path} holds scores {which}; they are not mixed with "
            f"{self.teacher}'s: distil into a new MODEL_DIR, or remove "
            f"{os.path.dirname(self.cache_path)} to score the teacher again"
        )

    def _score(self, premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
        if self._scorer is None:
            from seahorse_metrics.scoring.single import Scorer

            self._scorer = Scorer.load(
                self.teacher,
                batch_size=self.config.teacher_batch_size,
                max_input_length=self.config.teacher_max_input_length,
                normalize="pair",
                long_summaries=soft_targets.LONG_SUMMARIES,
            )
        return self._scorer.score(premises, hypotheses, show_progress=False)

    def scores(self, pairs: Pairs) -> np.ndarray:
        """P("1") of every pair; scores (and caches) the pairs not yet known.

        Raises:
          ValueError: a scores-file teacher without a score for some pair.
        """
        keys = pairs.keys()
        todo = {}
        for key, premise, hypothesis in zip(keys, pairs.premises, pairs.hypotheses):
            if key not in self._known:
                todo.setdefault(key, (premise, hypothesis))
        if todo and self.is_file:
            raise ValueError(
                f"{self.teacher} has no {self.config.teacher_column!r} for "
                f"{len(todo)} of the {len(keys)} pairs (e.g. "
                f"{next(iter(todo.values()))[1][:60]!r}); score them with "
                "`seahorse-metrics score`"
            )
        if todo:
            self._score_and_cache(list(todo.items()))
        return np.asarray([self._known[key] for key in keys], np.float64)

    def _score_and_cache(self, todo: list) -> None:
        logger.info(
            "teacher %s: scoring %d pairs (%d cached)", self.teacher, len(todo), len(self._known)
        )
        os.makedirs(os.path.dirname(self.cache_path), exist_ok=True)
        if not self._cache_bytes:  # A new cache: say first whose scores it holds.
            write_json_atomically(self.record_path, self.identity)
        if os.path.isfile(self.cache_path):
            os.truncate(self.cache_path, self._cache_bytes)
        with open(self.cache_path, "a", encoding="utf-8") as handle:
            for start in range(0, len(todo), TEACHER_CHUNK):
                chunk = todo[start : start + TEACHER_CHUNK]
                values = self._score([p for _, (p, _) in chunk], [h for _, (_, h) in chunk])
                for (key, _), value in zip(chunk, values):
                    self._known[key] = float(value)
                    handle.write(json.dumps({"key": key, "p": float(value)}) + "\n")
                handle.flush()
                os.fsync(handle.fileno())
                self._cache_bytes = handle.tell()
                self.scored += len(chunk)


# --------------------------------------------------------------------------
# The student's examples.


def student_examples(
    pairs: Pairs, vocabulary_path: str, input_length: int, truncation: str
) -> tuple[ExampleSet, tuple[int, int]]:
    """Tokenised pairs (targets "1"/"0" by the label, else "1") in the
    student's vocabulary, and the ids of "1" and "0"."""
    from seahorse_metrics.data import vocab
    from seahorse_metrics.data.inputs import encode_pair

    tokenizer = vocab.SentencePieceTokenizer(vocabulary_path)
    token_ids = vocab.target_token_ids(tokenizer)
    targets = {
        True: tokenizer.encode("1") + [tokenizer.eos_id],
        False: tokenizer.encode("0") + [tokenizer.eos_id],
    }
    inputs = [
        encode_pair(
            tokenizer, p, h, input_length, truncation, long_summaries=soft_targets.LONG_SUMMARIES
        ).ids
        for p, h in zip(pairs.premises, pairs.hypotheses)
    ]
    return ExampleSet.from_examples(
        inputs,
        [targets[not label == 0.0] for label in pairs.labels],
        [None if np.isnan(label) else float(label) for label in pairs.labels],
        pairs.ids,
    ), token_ids


def _cut_layers(params: dict, stack: str, keep: int, available: int) -> dict:
    if not 0 < keep <= available:
        raise ValueError(
            f"student_layers: keep {keep} of the {available} {stack} layers (1 to {available})"
        )
    return {
        name: value
        for name, value in params[stack].items()
        if not name.startswith("layers_") or int(name[len("layers_") :]) < keep
    }


def write_student_init(config: DistillConfig, directory: str) -> str:
    """`init_checkpoint` cut to its first `student_layers` (encoder, decoder)
    layers, saved in `directory` (reused when there)."""
    from seahorse_metrics import checkpoints
    from seahorse_metrics.checkpoints.orbax_io import save_checkpoint

    if os.path.isdir(directory):
        return directory
    source = config.train.init_checkpoint
    if source is None:
        raise ValueError("DistillConfig.student_layers cuts TrainConfig.init_checkpoint: set one")
    model_config, params = checkpoints.load_checkpoint(source, dtype="float32")
    encoder, decoder = (int(n) for n in config.student_layers)
    params = dict(
        params,
        encoder=_cut_layers(params, "encoder", encoder, model_config.num_encoder_layers),
        decoder=_cut_layers(params, "decoder", decoder, model_config.num_decoder_layers),
    )
    model_config = model_config.replace(num_encoder_layers=encoder, num_decoder_layers=decoder)
    with staged_path(directory) as staging:
        save_checkpoint(staging, model_config, params)
        vocabulary = os.path.join(source, "spiece.model")
        if os.path.isfile(vocabulary):
            import shutil

            shutil.copyfile(vocabulary, os.path.join(staging, "spiece.model"))
    return directory


# --------------------------------------------------------------------------
# The run.


@dataclasses.dataclass(frozen=True)
class DistillResult:
    """What a distillation produced.

    Attributes:
      train: The student's `TrainResult` (its best checkpoint is the student).
      teacher_scored: Pairs the teacher scored in this process (0 when all
        came from the cache or a scores file).
      report: The comparison table's numbers (`distill_report.compare`).
      table: The same as Markdown.
    """

    train: Any
    teacher_scored: int
    report: dict
    table: str


# Settings a resumed distillation may change (with allow_config_change): the
# student's as `train` allows, and how many pairs the teacher scores at once.
CHANGEABLE = tuple(f"TrainConfig.{name}" for name in CHANGEABLE_ON_RESUME) + (
    "DistillConfig.teacher_batch_size",
)


def run_record(config: DistillConfig) -> dict[str, Any]:
    """What a distillation in MODEL_DIR is tied to (distill_config.json): its
    settings, the student's training settings (`train`), and the content of
    the teacher and, with `student_layers`, of the `init_checkpoint` cut."""
    from seahorse_metrics.checkpoints.content import content_digest_or_none

    record = config.to_json()
    record["teacher_content"] = content_digest_or_none(config.teacher)
    record["init_checkpoint_content"] = (
        None
        if config.student_layers is None
        else content_digest_or_none(config.train.init_checkpoint)
    )
    record["train"] = json.loads(json.dumps(config.train.to_json(), default=str))
    return record


def _has_progress(model_dir: str) -> bool:
    """Whether MODEL_DIR holds work a change of settings would mix with new work."""
    return any(
        os.path.exists(os.path.join(model_dir, name))
        for name in (
            os.path.join(TEACHER_DIR, "scores.jsonl"),
            STUDENT_INIT_DIR,
            "checkpoints",
            "best",
        )
    )


def _differences(
    saved: dict[str, Any], record: dict[str, Any], config: DistillConfig
) -> dict[str, tuple]:
    """{setting: (saved, now)}, named as gin binds them (DistillConfig.*, TrainConfig.*)."""
    differences = {
        f"DistillConfig.{name}": (saved.get(name), value)
        for name, value in record.items()
        if name != "train" and saved.get(name) != value
    }
    if "train" not in saved:  # Written by an earlier version.
        differences["TrainConfig"] = ("not recorded", "recorded now")
    else:
        differences.update(
            {
                f"TrainConfig.{name}": values
                for name, values in config_differences(saved["train"], config.train).items()
            }
        )
    return differences


def check_resume(config: DistillConfig, record: Optional[dict[str, Any]] = None) -> None:
    """Refuses a MODEL_DIR that holds a distillation under other settings;
    records the settings otherwise.

    A MODEL_DIR without work done (no teacher scores, cut student or
    checkpoints) takes the new settings. The student's settings follow
    `train`'s rule: `CHANGEABLE_ON_RESUME` ones with `allow_config_change`.

    Args:
      config: The run about to start.
      record: Its `run_record` (computed when None).

    Raises:
      ValueError: naming the settings that differ.
    """
    from seahorse_metrics.io.json_files import read_json
    from seahorse_metrics.training import trainer

    model_dir = config.train.model_dir
    path = os.path.join(model_dir, DISTILL_CONFIG_JSON)
    record = run_record(config) if record is None else record
    if os.path.isfile(path) and _has_progress(model_dir):
        trainer.refuse_other_settings(
            model_dir,
            _differences(read_json(path), record, config),
            CHANGEABLE,
            config.train.allow_config_change,
            path,
            run="distillation",
        )
    write_json_atomically(path, record)


def _student_config(config: DistillConfig) -> TrainConfig:
    train = config.train
    if config.student_layers is not None:
        init = write_student_init(config, os.path.join(train.model_dir, STUDENT_INIT_DIR))
        train = dataclasses.replace(train, init_checkpoint=init)
    return train


def soft_splits(
    config: DistillConfig, train_config: TrainConfig, teacher: TeacherScores
) -> dict[str, soft_targets.SoftExampleSet]:
    """The student's train and held-out examples with the teacher's scores."""
    from seahorse_metrics.training import run_inputs

    data_dir = train_config.data_dir
    train_pairs = read_split(data_dir, "train", config.question)
    if config.pairs:
        train_pairs = concatenate(
            [
                train_pairs,
                read_pair_files(config.pairs, config.premise_field, config.hypothesis_field),
            ]
        )
    if config.max_train_pairs is not None:
        train_pairs = first(train_pairs, config.max_train_pairs)
    held_out = first(read_split(data_dir, "validation", config.question), config.held_out)
    vocabulary = run_inputs.resolve_vocabulary(train_config)
    splits = {}
    for name, pairs in (("train", train_pairs), ("validation", held_out)):
        examples, token_ids = student_examples(
            pairs, vocabulary, train_config.input_length, train_config.truncation
        )
        splits[name] = soft_targets.SoftExampleSet.build(
            examples, teacher.scores(pairs), config.temperature, config.label_weight, token_ids
        )
        logger.info("%s: %d pairs with teacher scores", name, len(pairs))
    return splits


def distill(config: DistillConfig, *, report: bool = True) -> DistillResult:
    """Trains the student on the teacher's scores (resuming MODEL_DIR), then
    compares the two (`distill_report.compare`) unless `report` is False.

    Raises:
      ValueError: a MODEL_DIR distilled with other settings (or another
        teacher), a scores-file teacher without scores for some pairs, bad
        student layers.
      OutputInUseError: another run (`distill` or `train`) works in MODEL_DIR.
    """
    from seahorse_metrics.training import trainer

    with trainer.model_dir_lock(config.train.model_dir):
        record = run_record(config)
        check_resume(config, record)
        train_config = _student_config(config)
        teacher = TeacherScores(
            config.teacher,
            os.path.join(train_config.model_dir, TEACHER_DIR),
            config,
            content=record["teacher_content"],
        )
        splits = soft_splits(config, train_config, teacher)
        result = trainer.train_locked(train_config, splits)
        numbers, table = _report(config, train_config, teacher, result) if report else ({}, "")
    return DistillResult(result, teacher.scored, numbers, table)


def _report(
    config: DistillConfig, train_config: TrainConfig, teacher: TeacherScores, result
) -> tuple[dict, str]:
    """The teacher/student table's numbers and Markdown, written to MODEL_DIR."""
    from seahorse_metrics.training import distill_report

    if result.best_checkpoint is None:
        return {}, ""
    data_dir = train_config.data_dir
    held_out = first(read_split(data_dir, "validation", config.question), config.held_out)
    numbers = distill_report.compare(
        config,
        teacher,
        result.best_checkpoint,
        held_out,
        read_split(data_dir, "test", config.question),
    )
    table = distill_report.markdown(numbers)
    distill_report.write(train_config.model_dir, numbers, table)
    return numbers, table


def config_from_gin(gin_files: Sequence[str], bindings: Sequence[str] = ()) -> DistillConfig:
    """The `DistillConfig` that gin files and bindings describe."""
    parse_gin(gin_files, bindings)
    try:
        return _GIN_DISTILL_CONFIG()  # pylint: disable=no-value-for-parameter
    except (TypeError, ValueError) as error:
        raise ValueError(f"Invalid distillation configuration: {error}") from error


def distill_from_gin(
    gin_files: Sequence[str], bindings: Sequence[str] = (), pairs: Sequence[str] = ()
) -> DistillResult:
    """`distill` as gin files say; `pairs` are added to `DistillConfig.pairs`."""
    config = config_from_gin(gin_files, bindings)
    if pairs:
        config = dataclasses.replace(config, pairs=tuple(config.pairs) + tuple(pairs))
    return distill(config)
