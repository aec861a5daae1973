"""What a training run does (`TrainConfig`) and how gin files set it.

Gin files bind the fields of `TrainConfig` and `OptimizerConfig` (see
`gin/runs/finetune.gin`); command lines add bindings T5X-style
(`--gin.MODEL_DIR=/path --gin.TASK=seahorse_q4`). A value that is not a gin
literal (a bare path or name) is read as a string, so shell quoting does not
matter.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
from typing import Any, Iterator, Mapping, Optional, Sequence

import gin.config_parser

import gin
from seahorse_metrics.model.config import REMAT_POLICIES
from seahorse_metrics.training.optimizers import OptimizerConfig

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The wheel carries gin/ as seahorse_metrics/gin (setup.py); a checkout has it
# at the repository root. Either way a gin file is found by name, as T5X
# finds t5x/configs: `runs/demo.gin`, `gin/runs/demo.gin` (and `include
# 'gin/models/tiny.gin'`) resolve from any working directory.
REPO_ROOT = os.path.dirname(_PACKAGE_DIR)
GIN_ROOTS = tuple(
    root for root in (_PACKAGE_DIR, REPO_ROOT) if os.path.isdir(os.path.join(root, "gin", "runs"))
)
# The sample's backbone, shipped inside the package (see `sample_backbone`).
BACKBONE_DIR = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "backbone"
)


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """A fine-tuning run. Defaults follow T5X fine-tuning of mT5.

    Attributes:
      model_dir: Run directory: checkpoints/, best/, train_log.jsonl,
        tensorboard/, config.gin. Re-running on the same directory resumes.
      task: seqio task or mixture (`seahorse_q1`..`seahorse_q6`, `seahorse_all`),
        or `seahorse_multi_question`: one multi-question metric for the six
        questions (`training.multi_question`).
      question_rates: For `seahorse_multi_question`, sampling rate per
        question (`{"q4": 2.0}`); unnamed questions are sampled in
        proportion to their training examples.
      data_dir: Prepared SEAHORSE directory (`seahorse-metrics prepare`
        output); the tasks are registered over it. None: the task must already
        be registered (or cached splits exist in `data_cache_dir`).
      model: Preset of `seahorse_metrics.model.config.PRESETS` (ignored when
        `init_checkpoint` is given: its architecture is used).
      model_overrides: T5Config fields to change on the preset.
      vocab_size_from_vocabulary: Size the embedding to the vocabulary's
        pieces, rounded up to a multiple of 128 (training from scratch with
        a vocabulary other than mT5's, as the demo does).
      init_checkpoint: Pretrained checkpoint (Hugging Face, T5X or ours);
        None trains from scratch.
      vocabulary: SentencePiece model; None uses the default mT5 vocabulary.
      truncation: How tasks shorten over-long inputs ('summary_first' keeps
        the whole summary and cuts the article).
      input_length: Encoder length (tokens).
      target_length: Decoder length (tokens) of an unpacked example.
      batch_size: Global batch size (rows).
      train_steps: Number of optimizer steps of the whole run.
      dropout_rate: Dropout during training.
      dtype: Compute dtype override ('float32', 'bfloat16'); None keeps the
        model config's.
      optimizer: The optimizer and learning-rate schedule.
      z_loss: Weight of T5's auxiliary log(Z)^2 loss.
      loss_normalizing_factor: The summed token loss is divided by this
        constant; None divides by the batch's target tokens (a per-token
        mean; with Adafactor's relative updates the scale barely matters).
        T5X recommends pretraining batch * target length (e.g. 1024 * 229 for
        mT5) when fine-tuning Mesh TensorFlow checkpoints.
      pack: Pack several examples per row (segment ids and positions).
      packed_target_length: Decoder length of a packed row; None uses
        `target_length * input_length // 128` (room for as many targets as
        the encoder row can hold short inputs).
      remat: Rematerialisation per encoder/decoder layer: 'none', 'minimal'
        (keep the products without a batch dimension, T5X's 'minimal') or
        'full' (keep each layer's input); same result, less memory, more
        compute. `seahorse-metrics plan --fit` says which one a device needs.
      scan_layers: Run each stack's layers under `nn.scan` with parameters
        stacked on a `layers` axis (T5X's `scan_layers`): one layer is
        compiled instead of 24 (mT5-XXL's step compiles in seconds, not
        minutes). Checkpoint files stay per layer.
      microbatches: Split each batch into this many microbatches inside the
        step and sum their gradients (one update per batch, the whole
        batch's loss); must divide the rows each data-parallel device gets.
      seed: Seeds parameter init, dropout and the data order.
      model_parallel: Size of the mesh's `model` axis.
      checkpoint_every: Save a resumable checkpoint every this many steps
        (and at the end).
      keep_checkpoints: Resumable checkpoints kept (the best one is kept
        separately in best/).
      eval_every: Validate every this many steps (and at the end); 0 disables
        validation.
      eval_batch_size: Rows per validation batch.
      eval_max_examples: Score only the first N validation examples (of each
        question, in a multi-question run).
      log_every: Write train metrics every this many steps.
      data_cache_dir: Where materialised splits are cached; None uses
        MODEL_DIR/data.
      allow_config_change: Let a run resume MODEL_DIR with other values of
        `CHANGEABLE_ON_RESUME` (train_steps, ...) than it was started with.
        Other settings change what is trained and can never differ.
    """

    model_dir: str
    task: str
    question_rates: Mapping[str, float] = dataclasses.field(default_factory=dict)
    data_dir: Optional[str] = None
    model: str = "mt5_small"
    model_overrides: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    vocab_size_from_vocabulary: bool = False
    init_checkpoint: Optional[str] = None
    vocabulary: Optional[str] = None
    truncation: str = "summary_first"
    input_length: int = 2048
    target_length: int = 4
    batch_size: int = 128
    train_steps: int = 10_000
    dropout_rate: float = 0.1
    dtype: Optional[str] = None
    optimizer: OptimizerConfig = OptimizerConfig()
    z_loss: float = 1e-4
    loss_normalizing_factor: Optional[float] = None
    pack: bool = False
    packed_target_length: Optional[int] = None
    remat: str = "none"
    scan_layers: bool = False
    microbatches: int = 1
    seed: int = 0
    model_parallel: int = 1
    checkpoint_every: int = 1000
    keep_checkpoints: Optional[int] = 3
    eval_every: int = 1000
    eval_batch_size: int = 64
    eval_max_examples: Optional[int] = None
    log_every: int = 50
    data_cache_dir: Optional[str] = None
    allow_config_change: bool = False

    def __post_init__(self):
        for field in dataclasses.fields(self):
            if getattr(self, field.name) is gin.REQUIRED:
                raise ValueError(
                    f"TrainConfig.{field.name} has no value: pass --gin.{field.name.upper()}=... "
                    f"(or bind TrainConfig.{field.name})."
                )
        if isinstance(self.optimizer, Mapping):  # e.g. read back from train_config.json
            object.__setattr__(self, "optimizer", OptimizerConfig(**self.optimizer))
        if not isinstance(self.optimizer, OptimizerConfig):
            raise ValueError(
                f"TrainConfig.optimizer must be an OptimizerConfig, got {self.optimizer!r}."
            )
        if not self.model_dir:
            raise ValueError("TrainConfig.model_dir is required (--gin.MODEL_DIR=/path/to/run).")
        if not self.task:
            raise ValueError("TrainConfig.task is required (--gin.TASK=seahorse_q4).")
        positive = (
            "input_length",
            "target_length",
            "batch_size",
            "train_steps",
            "microbatches",
            "checkpoint_every",
            "eval_batch_size",
            "log_every",
        )
        for name in positive:
            if int(getattr(self, name)) <= 0:
                raise ValueError(
                    f"TrainConfig.{name} must be positive, got {getattr(self, name)!r}."
                )
        if self.remat not in REMAT_POLICIES:
            raise ValueError(
                f"TrainConfig.remat must be one of {REMAT_POLICIES}, got {self.remat!r}."
            )
        if not isinstance(self.scan_layers, bool):
            raise ValueError(
                f"TrainConfig.scan_layers must be True or False, got {self.scan_layers!r}."
            )
        if self.batch_size % self.microbatches:
            raise ValueError(
                f"TrainConfig.microbatches={self.microbatches} must divide "
                f"batch_size={self.batch_size}."
            )
        if self.eval_every < 0:
            raise ValueError("TrainConfig.eval_every must be >= 0 (0 disables validation).")

    @property
    def row_target_length(self) -> int:
        """Decoder length of a training row (packed or not)."""
        if not self.pack:
            return self.target_length
        return self.packed_target_length or max(
            self.target_length, self.target_length * self.input_length // 128
        )

    @property
    def cache_dir(self) -> str:
        return self.data_cache_dir or os.path.join(self.model_dir, "data")

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# Settings a resumed run may change (with allow_config_change=True): they
# decide how long and how often the run works, or where it reads from, not
# what one training step computes.
CHANGEABLE_ON_RESUME = (
    "train_steps",
    "checkpoint_every",
    "keep_checkpoints",
    "eval_every",
    "eval_batch_size",
    "log_every",
    "data_dir",
    "data_cache_dir",
    "model_parallel",
    "remat",
)
_NOT_COMPARED = ("model_dir", "allow_config_change")


def config_differences(saved: Mapping[str, Any], config: TrainConfig) -> dict[str, tuple]:
    """{field: (saved value, value now)} for the settings that differ.

    Args:
      saved: A run's `train_config.json` (`TrainConfig.to_json()` as JSON).
      config: The configuration of the run about to start.

    A field the saved file lacks (written by an older version) counts as its
    default.
    """
    current = json.loads(json.dumps(config.to_json(), default=str))
    defaults = json.loads(json.dumps(TrainConfig(model_dir="-", task="-").to_json(), default=str))
    return {
        name: (saved.get(name, defaults.get(name)), value)
        for name, value in current.items()
        if name not in _NOT_COMPARED and saved.get(name, defaults.get(name)) != value
    }


# --------------------------------------------------------------------------
# Gin.

# Gin files name `TrainConfig` and `OptimizerConfig`; gin builds them through
# these registrations, so constructing the classes directly in Python never
# picks up bindings left over from an earlier gin parse.
_GIN_TRAIN_CONFIG = gin.external_configurable(TrainConfig, name="TrainConfig")
gin.external_configurable(OptimizerConfig, name="OptimizerConfig")


@gin.configurable
def sample_backbone() -> str:
    """The demo's backbone as installed with the package (its absolute path).

    `gin/runs/demo.gin` binds `INIT_CHECKPOINT = @sample_backbone()`, so the
    demo trains from any working directory.
    """
    return BACKBONE_DIR


def binding_from_flag(name: str, value: str) -> str:
    """`--gin.NAME=VALUE` as a gin binding, quoting VALUE if it is no gin literal."""
    text = f"{name} = {value}"
    try:
        list(gin.config_parser.ConfigParser(text, gin.config.ParserDelegate(skip_unknown=True)))
        return text
    except SyntaxError:
        return f"{name} = {value!r}"


def split_gin_flags(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Separates `--gin.NAME=VALUE` flags (as bindings) from other arguments."""
    bindings, rest = [], []
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg.startswith("--gin."):
            name, sep, value = arg[len("--gin.") :].partition("=")
            if not sep:
                if not args:
                    raise ValueError(f"{arg} needs a value: {arg}=VALUE.")
                value = args.pop(0)
            bindings.append(binding_from_flag(name, value))
        else:
            rest.append(arg)
    return bindings, rest


def resolve_gin_file(path: str) -> str:
    """`path` as given if it exists, else a shipped gin file by name:
    `runs/demo.gin` or `gin/runs/demo.gin` under the installed package's
    gin/ (or the checkout's).

    Raises:
      FileNotFoundError: naming where it looked.
    """
    if os.path.exists(path):
        return path
    for root in GIN_ROOTS:
        for candidate in (os.path.join(root, path), os.path.join(root, "gin", path)):
            if os.path.exists(candidate):
                return candidate
    looked = ", ".join(os.path.join(root, "gin") for root in GIN_ROOTS) or "no gin/ installed"
    raise FileNotFoundError(
        f"Gin file {path!r} not found (looked in the working directory and {looked}); "
        "the shipped run files are runs/*.gin (e.g. --gin_file=runs/demo.gin)."
    )


class _GinPackageLookupFilter(logging.Filter):
    """Drops gin's log lines about looking up an include as a Python package
    resource (`ERROR ... Path not found: gin/models/tiny.gin`) before it finds
    the file under the repository root: noise, not an error."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.pathname.endswith(os.path.join("gin", "resource_reader.py"))


@contextlib.contextmanager
def _quiet_gin_lookups() -> Iterator[None]:
    root = logging.getLogger()  # gin logs through the root logger
    quiet = _GinPackageLookupFilter()
    root.addFilter(quiet)
    try:
        yield
    finally:
        root.removeFilter(quiet)


def parse_gin(gin_files: Sequence[str], bindings: Sequence[str] = ()) -> None:
    """Replaces the gin bindings by those of `gin_files` then `bindings`."""
    gin.clear_config()
    for root in GIN_ROOTS:  # Includes name files as `gin/models/tiny.gin`.
        gin.add_config_file_search_path(root)
    with _quiet_gin_lookups():
        gin.parse_config_files_and_bindings(
            [resolve_gin_file(f) for f in gin_files], list(bindings), finalize_config=False
        )


def config_from_gin(gin_files: Sequence[str], bindings: Sequence[str] = ()) -> TrainConfig:
    """The TrainConfig that `gin_files` and `bindings` describe.

    Raises:
      ValueError: If a required value (MODEL_DIR, TASK) is missing or a
        binding is invalid, with gin's explanation.
    """
    parse_gin(gin_files, bindings)
    try:
        return _GIN_TRAIN_CONFIG()  # pylint: disable=no-value-for-parameter
    except (TypeError, ValueError) as error:
        raise ValueError(f"Invalid training configuration: {error}") from error
