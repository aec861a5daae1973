"""How pairs are scored: `ScoringOptions`, and the one table that sets them from outside Python.

* `ScoringOptions`: the arguments of `MultiScorer.load` bar the checkpoints
  and the device mesh, as one serialisable object. `Scorer.load` and
  `MultiScorer.load` take it, Beam workers receive it (`to_dict`/`from_dict`).
* `OPTION_FLAGS`: each option's command-line flag (`score`, `serve`, and
  `score --runner`'s Beam workers through `options_from_flags`) and, for
  the options an `evaluate` checkpoint spec takes (`CHECKPOINT_OPTIONS`),
  how a spec's `key=value` sets it (`options_from_spec`). A new option is a
  field here and a row of the table (and its flag in `cli/score.py`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Optional

from seahorse_metrics.scoring.batching import DEFAULT_MAX_BATCH_TOKENS, DEFAULT_WINDOW_SIZE


@dataclasses.dataclass(frozen=True)
class ScoringOptions:
    """How pairs are scored: `MultiScorer.load`'s arguments bar checkpoints and mesh.

    The input fields are `scoring.units.InputSettings`' (`InputSettings.of`
    reads them from here); `MultiScorer(...)` takes the options as one object.
    Attributes: vocab, dtype, quantize, scan_layers (loading; scan_layers runs each
    stack's layers under `nn.scan`, `T5Config.scan_layers`: one compiled
    layer, so a deep model compiles in a fraction of the time, the same
    scores to float rounding); max_input_length, truncation,
    normalize, long_inputs, chunk_overlap, per_sentence, sentence_aggregate,
    long_summaries ("error": a row whose summary leaves the article less
    than a quarter of the input gets an error; "cut": its summary is cut and
    the row flagged in a `summary_cut` column),
    question_template (None: the checkpoints' own, else the default) (inputs);
    batch_size, bucket_lengths, max_batch_tokens, window_size, packing,
    compiler_options (batches and programs); engine ("jax" or "ctranslate2":
    the model call, see `seahorse_metrics.engines`) and engine_options (the
    ctranslate2 engine's, `engines.ctranslate2.load_converted`); int8_check
    (with quantize: score a probe in float32 and int8 once on this host,
    `scoring.int8_check`) and int8_min_spearman (refuse int8 ranking below it).
    """

    vocab: Optional[str] = None
    dtype: str = "float32"
    quantize: Optional[str] = None
    max_input_length: int = 2048
    batch_size: int = 16
    truncation: str = "summary_first"
    normalize: str = "full"
    long_inputs: str = "truncate"
    chunk_overlap: int = 128
    per_sentence: bool = False
    sentence_aggregate: str = "min"
    long_summaries: str = "error"
    bucket_lengths: Optional[tuple[int, ...]] = None
    max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS
    window_size: int = DEFAULT_WINDOW_SIZE
    packing: bool = False
    question_template: Optional[str] = None
    compiler_options: Optional[Mapping[str, Any]] = None
    engine: str = "jax"
    scan_layers: bool = False
    engine_options: Optional[Mapping[str, Any]] = None
    int8_check: bool = True
    int8_min_spearman: Optional[float] = None

    def __post_init__(self):
        if self.bucket_lengths is not None:
            object.__setattr__(self, "bucket_lengths", tuple(int(b) for b in self.bucket_lengths))
        for name in ("compiler_options", "engine_options"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, dict(getattr(self, name)))

    @classmethod
    def of(cls, options: Optional["ScoringOptions"] = None, **changes) -> "ScoringOptions":
        """`options` (default: the defaults) with `changes`; None values of
        `changes` keep the default of fields whose default is not None.

        Raises:
          TypeError: for a name that is not an option.
        """
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise TypeError(f"unknown scoring options: {', '.join(unknown)}")
        return dataclasses.replace(options or cls(), **changes)

    def to_dict(self) -> dict:
        """JSON-ready (`from_dict` reads it back)."""
        values = dataclasses.asdict(self)
        if values["bucket_lengths"] is not None:
            values["bucket_lengths"] = list(values["bucket_lengths"])
        for name, default in (
            ("engine_options", None),
            ("int8_check", True),
            ("int8_min_spearman", None),
        ):
            if values[name] == default:  # Absent, as before the field existed.
                del values[name]
        return values

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> "ScoringOptions":
        """The options `to_dict` wrote (or any subset of them).

        Raises:
          TypeError: for a name that is not an option.
        """
        return cls.of(**dict(values))


def _whole_number(field: str) -> Callable[[str], dict]:
    def parse(text: str) -> dict:
        try:
            return {field: int(text)}
        except ValueError:
            raise ValueError(f"{field}={text!r} is not a whole number") from None

    return parse


def _bucket_lengths(text: Optional[str]) -> Optional[list[int]]:
    return [int(b) for b in text.split(",") if b.strip()] if text else None


@dataclasses.dataclass(frozen=True)
class OptionFlag:
    """How one `ScoringOptions` field is set from outside Python.

    Attributes:
      field: The `ScoringOptions` field.
      flag: Its command-line flag (`score`, `serve`).
      from_flag: The parsed flag's value -> the field's value.
      from_spec: For a key of `evaluate`'s checkpoint specs, its text ->
        the fields it sets; None: not a spec key.
    """

    field: str
    flag: str
    from_flag: Callable[[Any], Any] = lambda value: value
    from_spec: Optional[Callable[[str], dict]] = None

    @property
    def dest(self) -> str:
        """The flag's attribute on argparse's namespace."""
        return self.flag[2:]


def _as_is(field: str) -> Callable[[str], dict]:
    return lambda text: {field: text}


OPTION_FLAGS = (
    OptionFlag("vocab", "--vocab", from_spec=_as_is("vocab")),
    OptionFlag("dtype", "--dtype"),
    OptionFlag("quantize", "--quantize", from_spec=_as_is("quantize")),
    OptionFlag(
        "max_input_length", "--max_input_length", from_spec=_whole_number("max_input_length")
    ),
    OptionFlag("batch_size", "--batch_size"),
    OptionFlag("truncation", "--truncation"),
    OptionFlag("normalize", "--normalize", from_spec=_as_is("normalize")),
    OptionFlag("long_inputs", "--long_inputs", from_spec=_as_is("long_inputs")),
    OptionFlag("chunk_overlap", "--chunk_overlap"),
    # A spec's per_sentence=AGG turns sentences on with that aggregate.
    OptionFlag(
        "per_sentence",
        "--per_sentence",
        from_spec=lambda text: {"per_sentence": True, "sentence_aggregate": text},
    ),
    OptionFlag("sentence_aggregate", "--sentence_aggregate"),
    OptionFlag("long_summaries", "--long_summaries", from_spec=_as_is("long_summaries")),
    OptionFlag("bucket_lengths", "--buckets", from_flag=_bucket_lengths),
    OptionFlag("max_batch_tokens", "--max_batch_tokens"),
    OptionFlag("window_size", "--window_size"),
    OptionFlag("packing", "--packing"),
    OptionFlag("engine", "--engine", from_spec=_as_is("engine")),
    OptionFlag("scan_layers", "--scan_layers"),
    OptionFlag("engine_options", "--engine_option", from_flag=lambda pairs: dict(pairs) or None),
    OptionFlag("int8_check", "--int8_check", from_flag=lambda value: value == "on"),
    OptionFlag("int8_min_spearman", "--int8_min_spearman"),
)
# Set from Python only (`Scorer.load(..., question_template=...)`): no flag.
PYTHON_ONLY = ("question_template", "compiler_options")
CHECKPOINT_OPTIONS = tuple(entry.field for entry in OPTION_FLAGS if entry.from_spec)
_BY_FIELD = {entry.field: entry for entry in OPTION_FLAGS}


def options_from_flags(args) -> ScoringOptions:
    """The `ScoringOptions` a command line sets (`score`, `serve`)."""
    return ScoringOptions(
        **{entry.field: entry.from_flag(getattr(args, entry.dest)) for entry in OPTION_FLAGS}
    )


def options_from_spec(settings) -> dict:
    """`Scorer.load` keyword arguments from a checkpoint spec's (key, value) pairs.

    Raises:
      ValueError: for a key no spec takes, or a value of the wrong kind
        (`max_input_length=abc`).
    """
    kwargs = {}
    for key, value in settings:
        entry = _BY_FIELD.get(key)
        if entry is None or entry.from_spec is None:
            raise ValueError(
                f"{key!r} is not a checkpoint option ({', '.join(CHECKPOINT_OPTIONS)})"
            )
        kwargs.update(entry.from_spec(value))
    return kwargs
