"""The training loop: `train(TrainConfig)` fine-tunes one metric.

A run, in order: resolve the model config and the data (`_prepare_run`, from
`run_inputs`),
restore the latest checkpoint of MODEL_DIR or initialise the state
(`_start`), then loop: draw the next batch, apply the jitted step, check the
loss, and every so often log, validate (keeping the best checkpoint by
validation ROC-AUC) and save a resumable checkpoint. Compiled steps are
cached per configuration, so calling `train` again in the same process with
equal shapes does not recompile.

A run holds an exclusive lock on MODEL_DIR (`MODEL_DIR.lock`, the lock
`score` takes on its outputs) from before it checks the saved settings until
it ends: a second run on the same MODEL_DIR refuses, naming the first one's
PID; the lock of a killed run is released with its process and taken over.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import os
from typing import Any, Mapping, Optional, Sequence

import jax
import numpy as np

import gin
from seahorse_metrics.checkpoints import layout
from seahorse_metrics.io.atomic import write_text_atomically
from seahorse_metrics.io.json_files import read_json
from seahorse_metrics.model import T5Config, stacks
from seahorse_metrics.model.partitioning import make_mesh, sharding_context
from seahorse_metrics.training import (
    checkpointing,
    multi_question,
    optimizers,
    soft_targets,
    summaries,
    validation,
)
from seahorse_metrics.training import sharding as sharding_lib
from seahorse_metrics.training import step as step_lib
from seahorse_metrics.training.batches import StreamPosition, batch_stats
from seahorse_metrics.training.config import (
    CHANGEABLE_ON_RESUME,
    TrainConfig,
    config_differences,
    config_from_gin,
)
from seahorse_metrics.training.data import ExampleSet
from seahorse_metrics.training.run_inputs import (
    TRAIN_SPLIT,
    VALIDATION_SPLIT,
    check_vocab_size,
    load_examples,
    resolve_model,
    resolve_vocabulary,
    target_ids,
)

logger = logging.getLogger(__name__)

CHECKPOINTS_DIR = layout.RUN_CHECKPOINTS_DIR
# The run's settings, compared on resume (config.gin holds them as gin).
CONFIG_JSON = "train_config.json"


class NonFiniteLossError(FloatingPointError):
    """The training loss became NaN or infinite; the message names the step."""


@dataclasses.dataclass(frozen=True)
class TrainResult:
    """What a finished run produced.

    Attributes:
      model_dir: The run directory.
      final_step: Steps trained in all (including before a resume).
      final_loss: Training loss of the last step (None if no step ran now).
      best_step: Step of the best validation ROC-AUC (None without validation).
      best_metrics: Validation metrics of that step.
      best_checkpoint: MODEL_DIR/best, loadable by `Scorer.load` (None if none).
      last_validation: Validation metrics of the final step.
      summary: One line naming the best checkpoint.
    """

    model_dir: str
    final_step: int
    final_loss: Optional[float]
    best_step: Optional[int]
    best_metrics: Optional[dict[str, Any]]
    best_checkpoint: Optional[str]
    last_validation: Optional[dict[str, Any]]
    summary: str


@dataclasses.dataclass
class _Run:
    """What `_prepare_run` resolves before the loop starts."""

    config: TrainConfig
    model_config: T5Config
    vocabulary_path: Optional[str]
    token_ids: Optional[tuple[int, int]]
    train_examples: ExampleSet
    validation_examples: Optional[ExampleSet]
    plan: step_lib.CompiledStep


# --------------------------------------------------------------------------
# Setup.


def _prepare_run(config: TrainConfig, examples: Optional[Mapping[str, ExampleSet]]) -> _Run:
    # The initial parameters are read in `_start`, only when the run does not resume.
    model_config, _ = resolve_model(config, load_params=False)
    vocabulary_path = resolve_vocabulary(config)
    if config.vocabulary is None and model_config.vocab_size > 4096 and not config.init_checkpoint:
        logger.warning(
            "No vocabulary given: using the sample vocabulary %s with a %d-piece model; "
            "set VOCABULARY to mT5's spiece.model.",
            vocabulary_path,
            model_config.vocab_size,
        )
    given = dict(examples or {})
    wanted = [TRAIN_SPLIT] + ([VALIDATION_SPLIT] if config.eval_every else [])
    if any(split not in given for split in wanted):
        given = {**load_examples(config), **given}
    train_examples = given[TRAIN_SPLIT]
    validation_examples = given.get(VALIDATION_SPLIT) if config.eval_every else None
    if validation_examples is not None and config.eval_max_examples:
        validation_examples = validation_examples.take(config.eval_max_examples)
    for split, subset in ((TRAIN_SPLIT, train_examples), (VALIDATION_SPLIT, validation_examples)):
        if subset is not None:
            check_vocab_size(subset, model_config, split)
    mesh = make_mesh(config.model_parallel)
    sharding_lib.check_batch_size(config.batch_size, mesh)
    sharding_lib.check_batch_size(config.eval_batch_size, mesh)
    step_lib.check_microbatches(config.microbatches, config.batch_size, mesh)
    plan = step_lib.compiled_step(
        model_config,
        config.optimizer,
        optimizers.schedule_horizon(config.optimizer, config.train_steps),
        config.z_loss,
        config.loss_normalizing_factor,
        mesh,
        config.microbatches,
    )
    return _Run(
        config=config,
        model_config=model_config,
        vocabulary_path=vocabulary_path,
        token_ids=target_ids(vocabulary_path) if validation_examples is not None else None,
        train_examples=train_examples,
        validation_examples=validation_examples,
        plan=plan,
    )


def _start(run: _Run, run_checkpoints: checkpointing.RunCheckpoints):
    """The state, stream position and best record to start from."""
    config, plan = run.config, run.plan
    restored = run_checkpoints.restore_latest(plan.abstract_state)
    if restored is not None:
        step, state, record = restored
        logger.info("Resuming from step %d of %s.", step, run_checkpoints.directory)
        return state, StreamPosition.from_json(record["stream"]), record.get("best")
    params = None
    if config.init_checkpoint is not None:
        params = resolve_model(config, plan.mesh)[1]
        if run.model_config.scan_layers:  # the files are per layer
            params = stacks.stack_layers(params, plan.state_shardings.params, release=True)
    return plan.init_state(config.seed, params), StreamPosition(), None


# --------------------------------------------------------------------------
# The loop.


class _Loop:
    """The mutable bookkeeping of one run's loop (kept out of `train`)."""

    def __init__(self, run: _Run, run_checkpoints, writer, best_keeper, state, position, best):
        self.run, self.config, self.plan = run, run.config, run.plan
        self.checkpoints, self.writer, self.best_keeper = run_checkpoints, writer, best_keeper
        self.state, self.best = state, best
        self.step = int(jax.device_get(state.step))
        self.stream = soft_targets.make_stream(
            run.train_examples,
            self.config.batch_size,
            self.config.input_length,
            self.config.row_target_length,
            run.model_config.decoder_start_id,
            self.config.seed,
            pack=self.config.pack,
            position=position,
        )
        self.throughput = summaries.Throughput()
        self.window: list[dict[str, float]] = []
        self.last_loss: Optional[float] = None
        self.last_validation: Optional[dict[str, Any]] = None

    def _due(self, every: int) -> bool:
        return every > 0 and (self.step % every == 0 or self.step == self.config.train_steps)

    def _check(self, step: int, metrics) -> dict[str, float]:
        values = {k: float(v) for k, v in jax.device_get(metrics).items()}
        if not math.isfinite(values["loss"]):
            self.writer.write(step, "train", values)
            last = self.checkpoints.latest_step()
            raise NonFiniteLossError(
                f"Training loss is {values['loss']} at step {step} of {self.config.model_dir}; "
                f"that update was not saved (last checkpoint: "
                f"{'none' if last is None else f'step {last}'}). Lower the learning rate, "
                "check the data, or change the seed."
            )
        return values

    def _record(self) -> dict[str, Any]:
        return {"stream": self.stream.position.to_json(), "best": self.best}

    def _log(self, bar) -> None:
        if not self.window:
            return
        means = {k: float(np.mean([w[k] for w in self.window])) for k in self.window[0]}
        means["learning_rate"] = float(self.plan.schedule(self.step - 1))
        means.update(self.throughput.read())
        means["epoch"] = self.stream.position.epoch
        self.writer.write(self.step, "train", means)
        if bar is not None:
            bar.set_postfix(
                loss=f"{means['loss']:.4f}",
                ex_s=f"{means['examples_per_sec']:.1f}",
                tok_s=f"{means['tokens_per_sec']:.0f}",
            )
        self.window = []

    def _validate(self) -> None:
        run = self.run
        metrics = self._validation_metrics()
        self.writer.write(self.step, "validation", metrics)
        self.last_validation = metrics
        logger.info("Validation at step %d: %s", self.step, metrics)
        selected_by = self.best_keeper.metric  # roc_auc; agreement with a distilled teacher
        best_value = None if self.best is None else self.best[selected_by]
        if checkpointing.is_better(metrics[selected_by], best_value):
            self.best_keeper.save(self.step, run.model_config, self.state.params, metrics)
            self.best = {"step": self.step, selected_by: metrics[selected_by], "metrics": metrics}

    def _validation_metrics(self) -> dict[str, Any]:
        run, examples = self.run, self.run.validation_examples
        scoring = (
            self.plan.model,
            self.state.params,
            examples,
            run.token_ids,
            self.config.eval_batch_size,
            self.config.input_length,
            self.plan.mesh,
        )
        with sharding_context(self.plan.mesh):
            if isinstance(examples, multi_question.QuestionExampleSet):
                return multi_question.validate(*scoring)
            probs = validation.first_token_probabilities(*scoring)
        metrics = validation.validation_metrics(examples.labels, probs[:, 0])
        metrics.update(soft_targets.agreement_metrics(examples, probs))
        return metrics

    def run_steps(self) -> None:
        config, plan = self.config, self.plan
        bar = summaries.progress_bar(config.train_steps, self.step, jax.process_index() == 0)
        # (step, metrics) not yet checked: checked one step late to keep the device busy.
        pending = None
        try:
            with sharding_context(plan.mesh):
                while self.step < config.train_steps:
                    host_batch = next(self.stream)
                    stats = batch_stats(host_batch)
                    batch = sharding_lib.global_batch(host_batch, plan.batch_sharding)
                    self.state, metrics = plan.step_fn(self.state, batch)
                    self.step += 1
                    self.throughput.add(stats["examples"], stats["tokens"])
                    if pending is not None:
                        self.window.append(self._check(*pending))
                    pending = (self.step, metrics)
                    if bar is not None:
                        bar.update(1)
                    boundary = any(
                        self._due(e)
                        for e in (config.log_every, config.eval_every, config.checkpoint_every)
                    )
                    if boundary:
                        self.window.append(self._check(*pending))
                        self.last_loss, pending = self.window[-1]["loss"], None
                    if self._due(config.log_every):
                        self._log(bar)
                    if self.run.validation_examples is not None and self._due(config.eval_every):
                        self._validate()
                    if self._due(config.checkpoint_every):
                        self.checkpoints.save(self.step, self.state, self._record())
                    if boundary:
                        self.throughput.read()  # rates count training steps only
        finally:
            if bar is not None:
                bar.close()


def _summary(model_dir: str, final_step: int, best_record: Optional[dict[str, Any]]) -> str:
    if best_record is None:
        return f"Trained {final_step} steps in {model_dir}; no validation, so no best checkpoint."
    metrics = best_record["metrics"]
    shown = {
        "Spearman with the teacher": metrics.get(soft_targets.AGREEMENT),
        "ROC-AUC": metrics.get("roc_auc"),
        "Pearson": metrics.get("pearson"),
    }
    return (
        f"Trained {final_step} steps in {model_dir}. Best checkpoint: "
        f"{os.path.join(model_dir, 'best')} (step {best_record['step']}, validation "
        + ", ".join(
            f"{name} {'n/a' if value is None else f'{value:.4f}'}"
            for name, value in shown.items()
            if value is not None or name != "Spearman with the teacher"
        )
        + ")."
    )


def _write_run_file(config: TrainConfig, name: str, text: str) -> None:
    """Writes MODEL_DIR/name atomically, from process 0 only."""
    if jax.process_index() != 0:
        return
    os.makedirs(config.model_dir, exist_ok=True)
    path = os.path.join(config.model_dir, name)
    write_text_atomically(path, text)


def _write_config(config: TrainConfig) -> None:
    _write_run_file(
        config, CONFIG_JSON, json.dumps(config.to_json(), indent=2, sort_keys=True, default=str)
    )


def _write_operative_config(config: TrainConfig) -> None:
    _write_run_file(config, "config.gin", gin.operative_config_str())


def _has_checkpoints(model_dir: str) -> bool:
    directory = os.path.join(model_dir, CHECKPOINTS_DIR)
    return os.path.isdir(directory) and any(name.isdigit() for name in os.listdir(directory))


def check_resume(config: TrainConfig) -> None:
    """Refuses to resume MODEL_DIR under settings other than its saved ones.

    The run's settings are saved in MODEL_DIR/train_config.json (and as gin
    in config.gin). A resume that would train another task, model,
    vocabulary, data layout, optimizer, ... is refused; a change of
    `CHANGEABLE_ON_RESUME` (train_steps, ...) needs `allow_config_change`.

    Raises:
      ValueError: listing the differences and what to do.
    """
    saved_path = os.path.join(config.model_dir, CONFIG_JSON)
    if not _has_checkpoints(config.model_dir):
        return
    if not os.path.isfile(saved_path):
        logger.warning(
            "%s has checkpoints but no %s; resuming without checking that the "
            "settings are the same.",
            config.model_dir,
            CONFIG_JSON,
        )
        return
    differences = config_differences(read_json(saved_path, "run config"), config)
    refuse_other_settings(
        config.model_dir,
        differences,
        CHANGEABLE_ON_RESUME,
        config.allow_config_change,
        os.path.join(config.model_dir, "config.gin"),
    )


def refuse_other_settings(
    model_dir: str,
    differences: Mapping[str, tuple],
    changeable: Sequence[str],
    allow_change: bool,
    settings_file: str,
    run: str = "run",
) -> None:
    """The resume rule of a run whose settings differ from its saved ones.

    Args:
      model_dir: The run's MODEL_DIR.
      differences: {setting: (saved value, value now)}.
      changeable: The settings a resume may change, given `allow_change`
        (how long and how often the run works, not what a step computes).
      allow_change: `TrainConfig.allow_config_change`.
      settings_file: Where the saved settings are, for the message.
      run: What MODEL_DIR holds, for the message ("run", "distillation").

    Raises:
      ValueError: for a difference outside `changeable`, or any without
        `allow_change`; the message lists them and says what to do.
    """
    listed = "; ".join(f"{name}: {old!r} -> {new!r}" for name, (old, new) in differences.items())
    fixed = [name for name in differences if name not in changeable]
    if fixed:
        verb, them = ("changes", "it") if len(fixed) == 1 else ("change", "them")
        raise ValueError(
            f"{model_dir} holds a {run} with other settings ({listed}); {', '.join(fixed)} "
            f"{verb} what is trained, so it cannot resume with {them}: start in a new "
            f"MODEL_DIR, or rerun with the settings in {settings_file}"
        )
    if differences and not allow_change:
        raise ValueError(
            f"{model_dir} holds a {run} started with other settings ({listed}); to resume it "
            "with these, pass --gin.TrainConfig.allow_config_change=True"
        )
    if differences:
        logger.warning("Resuming %s with changed settings: %s.", model_dir, listed)


def train_from_gin(
    gin_files: Sequence[str],
    bindings: Sequence[str] = (),
    examples: Optional[Mapping[str, ExampleSet]] = None,
) -> TrainResult:
    """Trains as the gin files and bindings say; writes MODEL_DIR/config.gin.

    Args:
      gin_files: Gin files, e.g. ["gin/runs/demo.gin"] (relative paths are
        tried in the working directory, then the repository root).
      bindings: Gin bindings applied after the files, e.g.
        ["MODEL_DIR = '/tmp/q1'", "TASK = 'seahorse_q1'"].
      examples: Optional in-memory splits, as for `train`.

    Returns:
      The TrainResult.

    Raises:
      ValueError: see `train`.
    """
    config = config_from_gin(gin_files, bindings)
    with model_dir_lock(config.model_dir):
        check_resume(config)
        _write_operative_config(config)
        return _train(config, examples)


def train(config: TrainConfig, examples: Optional[Mapping[str, ExampleSet]] = None) -> TrainResult:
    """Fine-tunes a metric as `config` says, resuming from MODEL_DIR if possible.

    Args:
      config: The run configuration.
      examples: Optional in-memory splits ("train", "validation") used
        instead of reading `config.task` (tests, custom data).

    Returns:
      The TrainResult, whose `summary` names the best checkpoint.

    Raises:
      NonFiniteLossError: The loss became NaN/inf (the message names the step).
      ValueError: Inconsistent configuration or data, or a MODEL_DIR whose
        run was started with other settings (see `check_resume`).
      CheckpointError: MODEL_DIR has checkpoints and none can be read.
      OutputInUseError: another run trains in MODEL_DIR.
    """
    with model_dir_lock(config.model_dir):
        return train_locked(config, examples)


def train_locked(
    config: TrainConfig, examples: Optional[Mapping[str, ExampleSet]] = None
) -> TrainResult:
    """`train` for a caller that already holds `model_dir_lock(config.model_dir)`
    (`distill`, which writes into MODEL_DIR before the student trains)."""
    check_resume(config)
    return _train(config, examples)


def model_dir_lock(model_dir: str) -> contextlib.AbstractContextManager:
    """The exclusive lock a training run holds on `model_dir` (process 0 takes it).

    Raises (on entry):
      OutputInUseError: while another run holds it; the message names that
        run's PID and host.
    """
    from seahorse_metrics.io.locks import OutputLock  # pylint: disable=g-import-not-at-top

    if jax.process_index() != 0:
        return contextlib.nullcontext()
    return OutputLock(os.path.normpath(model_dir))


def _train(config: TrainConfig, examples: Optional[Mapping[str, ExampleSet]]) -> TrainResult:
    _write_config(config)
    run = _prepare_run(config, examples)
    run_checkpoints = checkpointing.RunCheckpoints(
        os.path.join(config.model_dir, CHECKPOINTS_DIR), config.keep_checkpoints
    )
    best_keeper = checkpointing.BestCheckpoint(
        os.path.join(config.model_dir, layout.BEST_DIR),
        run.vocabulary_path,
        metric=soft_targets.selection_metric(run.validation_examples),
        questions=getattr(run.train_examples, "questions", None),
    )
    try:
        state, position, best = _start(run, run_checkpoints)
        start_step = int(jax.device_get(state.step))
        with summaries.MetricsWriter(
            config.model_dir, enabled=jax.process_index() == 0, start_step=start_step
        ) as writer:
            loop = _Loop(run, run_checkpoints, writer, best_keeper, state, position, best)
            loop.run_steps()
        run_checkpoints.wait()
    finally:
        run_checkpoints.close()
    best_record = loop.best
    summary = _summary(config.model_dir, loop.step, best_record)
    logger.info(summary)
    return TrainResult(
        model_dir=config.model_dir,
        final_step=loop.step,
        final_loss=loop.last_loss,
        best_step=None if best_record is None else best_record["step"],
        best_metrics=None if best_record is None else best_record["metrics"],
        best_checkpoint=None if best_record is None else best_keeper.directory,
        last_validation=loop.last_validation,
        summary=summary,
    )
