"""Score summaries with SEAHORSE-style metrics: P("1") at the first decoder step.

    from seahorse_metrics import Scorer
    scorer = Scorer.load("path/to/checkpoint")      # ours, Hugging Face, T5X or a hub id
    probs = scorer.score(articles, summaries)       # float32 numpy array, input order

    from seahorse_metrics import MultiScorer         # several questions at once
    multi = MultiScorer.load({"q4": "ckpt/q4", "q6": "ckpt/q6"})
    scores = multi.score(articles, summaries)       # {"q4": array, "q6": array}

Each pair is read as `premise: {premise} hypothesis: {hypothesis}`, tokenised
with the checkpoint's SentencePiece vocabulary and cut to `max_input_length`
tokens as the data module does (`seahorse_metrics.data.inputs.encode_pair`:
the summary is kept whole, `truncation="joint"` cuts the whole string); cuts
are counted and logged. The score is P("1") from the full-vocabulary softmax
at the first decoder step (`normalize="full"`, as TRUE-style metrics do), or
P("1") / (P("1") + P("0")) with `normalize="pair"`; the two are not
rank-identical, so the choice is part of `metadata()`. Long premises can be
chunked (`long_inputs="chunk"`, max over chunks) and summaries scored per
sentence (`per_sentence=True`, min or mean over sentences); see
`seahorse_metrics.scoring.units`.

A query-focused summary is scored with its question
(`score(premises, hypotheses, questions=...)`), read as
`question: {question} premise: {premise} hypothesis: {hypothesis}`
(`seahorse_metrics.data.inputs.QUESTION_TEMPLATE`) unless the checkpoint
directory (or its parent, as for `spiece.model`) holds a `seahorse_inputs.json`
like `{"question_template": "query: {question} ..."}` naming another.

Inputs are batched by length bucket within windows (each batch shape compiles
once) and split over the `data` axis of a device mesh (default: all local
devices); a `model` axis splits the parameters as the trainer does (T5X's
logical axis rules), so a metric too big for one device is scored sharded
(`mesh=partitioning.mesh_from_spec("data=2,model=4")`, `score --mesh`).
Checkpoints are read tensor by tensor straight into the mesh, in `dtype`
(`"bfloat16"` halves the memory). Results always come back in input order.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Iterable, Iterator, Mapping, Optional, Sequence, Union

import numpy as np

from seahorse_metrics.checkpoints.hub import resolve_checkpoint
from seahorse_metrics.checkpoints.layout import (
    SINGLE_NAME,
    checkpoint_names,
    column_names,
    find_vocabulary,
)
from seahorse_metrics.data.inputs import encode_pair
from seahorse_metrics.data.vocab import SentencePieceTokenizer
from seahorse_metrics.engines.choice import place
from seahorse_metrics.model.questions import QuestionPrefixes
from seahorse_metrics.scoring import batching as batching_lib
from seahorse_metrics.scoring import int8_check
from seahorse_metrics.scoring.job import InputFields
from seahorse_metrics.scoring.loading import (
    check_models,
    column_checkpoints,
    file_digest,
    given_options,
    load_models,
    multi_question_metrics,
    resolve_vocabulary,
    shared_question_template,
)
from seahorse_metrics.scoring.options import ScoringOptions
from seahorse_metrics.scoring.output import ERROR_FIELD, OutputFields
from seahorse_metrics.scoring.records import check_pairs
from seahorse_metrics.scoring.rows import records_as_rows, score_rows, window_rows
from seahorse_metrics.scoring.score_output import ScoreOutput, collect_results
from seahorse_metrics.scoring.signature import metric_signature
from seahorse_metrics.scoring.units import InputSettings
from seahorse_metrics.scoring.window_scoring import (
    Example,
    ExampleResult,
    ScoringStats,
    WindowScorer,
)

logger = logging.getLogger(__name__)

SCORE_FIELD = SINGLE_NAME
SENTENCES_FIELD = "sentences"
__all__ = ["MultiScorer", "ScoreOutput", "find_vocabulary"]


class MultiScorer:
    """Scores (premise, hypothesis) pairs with several metrics at once.

    All metrics share one vocabulary, so every input is tokenised once and
    each batch is run through every model (models of equal size also share
    their compiled programs).

    Attributes:
      names: The metrics' names, in order (the output fields).
      settings: Input and aggregation settings (`InputSettings`).
      positive_id, negative_id: Vocabulary ids of "1" and "0".
      stats: Counts accumulated over every call.
    """

    # Set by `check_int8` (name -> the int8 self-check) and `signatures()`.
    int8_checks: Optional[dict] = None
    _signatures: Optional[dict] = None

    def __init__(
        self,
        models: Mapping[str, tuple[Any, Any]],
        vocab_path: str,
        *,
        options: Optional[ScoringOptions] = None,
        mesh: Any = None,
        checkpoints: Optional[Mapping[str, str]] = None,
        questions: Optional[Mapping[str, QuestionPrefixes]] = None,
        **changes,
    ):
        """Builds a scorer from loaded models.

        Args:
          models: name -> (`EncoderDecoderModel`, parameters).
          vocab_path: The SentencePiece model the metrics were trained with.
          options: How pairs are scored (`ScoringOptions`; its input,
            batching and compiler fields are used here: max_input_length,
            truncation, normalize, long_inputs, chunk_overlap, per_sentence,
            sentence_aggregate, long_summaries, question_template (None: the
            default), batch_size, bucket_lengths, max_batch_tokens,
            window_size, packing, compiler_options).
          mesh: A ('data', 'model') device mesh (default: all devices on 'data').
          checkpoints: name -> checkpoint path, for `metadata()`.
          questions: name -> `QuestionPrefixes` of the multi-question models
            (a column per question, one encoder pass per input; `_columns`).
          **changes: `ScoringOptions` fields that override `options`'.

        Raises:
          ValueError: for bad settings, or a vocabulary that does not fit a
            model or cannot tell "1" from "0".
          TypeError: for a name in `changes` that is no option.
        """
        options = ScoringOptions.of(options, **changes)
        questions = self._columns(models, questions, checkpoints, options.packing)
        self.vocab_path, self.tokenizer = vocab_path, SentencePieceTokenizer(vocab_path)
        self.positive_id, self.negative_id, self.pad_id = check_models(
            models, self.tokenizer, vocab_path
        )
        self.settings = InputSettings.of(options)
        token_ids = (self.positive_id, self.negative_id)
        self.engines = place(
            models, self.tokenizer, token_ids, mesh, options.compiler_options, questions
        )
        self.buckets = batching_lib.bucket_lengths(
            self.settings.max_input_length, options.bucket_lengths
        )
        self.batch_size, self.max_batch_tokens = (
            int(options.batch_size),
            int(options.max_batch_tokens),
        )
        self.window_size, self.packing = int(options.window_size), bool(options.packing)
        self.batching()  # Validates the batch settings now.
        self.stats = ScoringStats()
        self.options = self._scoring_options(options)

    def _columns(
        self,
        models: Mapping[str, Any],
        questions: Optional[Mapping[str, Any]],
        checkpoints: Optional[Mapping[str, str]],
        packing: bool,
    ) -> dict:
        """Sets `names` (a column per question of a multi-question model,
        `checkpoints.layout.column_names`), `checkpoints` and each column's
        checkpoint; returns the questions.

        Raises:
          ValueError: for no models, or packing with a multi-question model.
        """
        if not models:
            raise ValueError("need at least one model")
        questions = dict(questions or {})
        if questions and packing:
            raise ValueError(
                "packing is not supported with a multi-question metric "
                f"({', '.join(sorted(questions))}); score it without packing"
            )
        self.names = column_names(list(models), questions)
        self.checkpoints = dict(checkpoints or {})
        self._column_checkpoints = column_checkpoints(
            list(models), self.checkpoints, questions, self.names
        )
        return questions

    def _scoring_options(self, options: ScoringOptions) -> ScoringOptions:
        """`options` as this scorer runs them (`self.options`): the models'
        dtype, quantization, layers and engine, the vocabulary and the
        question template used."""
        config = self.engines[0].model.config
        return ScoringOptions.of(
            options,
            vocab=self.vocab_path,
            dtype=config.dtype,
            quantize=config.quantize,
            scan_layers=bool(getattr(config, "scan_layers", False)),
            engine=self.engines[0].name,
            question_template=self.settings.question_template,
            engine_options=None,
            int8_check=True,
            int8_min_spearman=None,
        )

    # ------------------------------------------------------------- loading
    @classmethod
    def load(
        cls,
        checkpoints: Union[Mapping[str, str], Sequence[str]],
        vocab: Optional[str] = None,
        dtype: Optional[str] = None,
        max_input_length: Optional[int] = None,
        quantize: Optional[str] = None,
        *,
        options: Optional[ScoringOptions] = None,
        mesh: Any = None,
        engine_options: Optional[Mapping[str, Any]] = None,
        **kwargs,
    ) -> "MultiScorer":
        """Loads several checkpoints (any format `load_checkpoint` reads).

        Args:
          checkpoints: name -> directory or Hugging Face hub id, or a list
            of `[NAME=]DIR` specs (named by `checkpoints.layout.checkpoint_names`).
          vocab: SentencePiece model; default: `spiece.model` in each
            checkpoint directory (they must be identical).
          dtype: Compute and parameter dtype ("float32", or "bfloat16": half
            the memory; norms, softmax and logits stay float32; slower on CPUs).
          max_input_length: Token budget of one input, EOS included.
          quantize: None, or "int8" (see `Scorer.load`).
          options: All the settings as one `ScoringOptions` (the arguments
            given besides it override its fields).
          mesh: A ('data', 'model') mesh, or its spec such as "data=2,model=4"
            (`partitioning.mesh_from_spec` over the local devices): where the
            parameters are loaded and the batches split.
          engine_options: See `Scorer.load`.
          **kwargs: Any other field of `ScoringOptions` (the arguments of
            `MultiScorer(...)`, and `engine`); without `question_template`,
            the checkpoints' `seahorse_inputs.json` (or the default) gives it.

        Raises:
          FileNotFoundError: if a checkpoint or vocabulary is missing.
          ValueError: if the checkpoints' vocabularies or question templates differ.
        """
        options = given_options(
            options,
            vocab=vocab,
            dtype=dtype,
            max_input_length=max_input_length,
            quantize=quantize,
            **kwargs,
        )
        named = {
            name: resolve_checkpoint(path) for name, path in checkpoint_names(checkpoints).items()
        }
        vocab_path = _shared_vocabulary(named, options.vocab)
        if options.question_template is None:
            options = ScoringOptions.of(options, question_template=shared_question_template(named))
        questions = multi_question_metrics(named, options.engine)
        models, mesh = load_models(named, vocab_path, options, mesh, engine_options)
        scorer = cls(
            models, vocab_path, options=options, checkpoints=named, mesh=mesh, questions=questions
        )
        scorer.check_int8(options, engine_options)
        return scorer

    # ------------------------------------------------------------ models
    # ------------------------------------------------------------- setup
    def batching(self, batch_size: Optional[int] = None) -> batching_lib.BatchingConfig:
        """The batch shapes used for `batch_size` rows (default: the scorer's)."""
        data_parallel = self.engines[0].data_parallel
        return batching_lib.BatchingConfig(
            buckets=self.buckets,
            batch_size=int(batch_size or self.batch_size),
            max_batch_tokens=self.max_batch_tokens,
            row_multiple=data_parallel,
            window_size=self.window_size,
            pack=self.packing,
        )

    def window_scorer(self, batch_size: Optional[int] = None) -> WindowScorer:
        """The `WindowScorer` of `batch_size` rows."""
        return WindowScorer(
            self.tokenizer, self.engines, self.settings, self.batching(batch_size), self.pad_id
        )

    def precompile(
        self, batch_size: Optional[int] = None, max_length: Optional[int] = None
    ) -> None:
        """Compiles every batch shape up to `max_length` tokens now (two at a
        time) instead of on first use."""
        config = self.batching(batch_size)
        longest = (
            config.buckets[-1]
            if max_length is None
            else config.bucket(min(int(max_length), config.buckets[-1]))
        )
        shapes = [
            (rows, length) + ((config.slots(length),) if config.pack else ())
            for rows, length in config.shapes()
            if length <= longest
        ]
        for engine in self.engines:
            engine.precompile(shapes)

    def metadata(self) -> dict:
        """What produced the scores: settings, checkpoints, vocabulary, batching
        (and on the ctranslate2 engine, each metric's conversion, so a run
        resumes only with the same int8 smoothing and CTranslate2 version)."""
        described = {
            "score": 'P("1") at the first decoder step',
            "normalize": self.settings.normalize,
            "settings": self.settings.to_dict(),
            "metrics": self.names,
            "checkpoints": {name: os.path.abspath(path) for name, path in self.checkpoints.items()},
            "vocabulary": os.path.abspath(self.vocab_path),
            "target_ids": {"1": self.positive_id, "0": self.negative_id},
            "dtype": self.engines[0].model.config.dtype,
            "engine": self.engines[0].name,
            "mesh": (
                {name: int(size) for name, size in self.engines[0].mesh.shape.items()}
                if self.engines[0].mesh is not None
                else None
            ),
            "quantize": {
                name: engine.model.config.quantize for name, engine in zip(self.names, self.engines)
            },
            "batching": {
                "buckets": list(self.buckets),
                "batch_size": self.batch_size,
                "max_batch_tokens": self.max_batch_tokens,
                "window_size": self.window_size,
                "data_parallel": self.engines[0].data_parallel,
                "packing": self.packing,
            },
        }
        conversions = {name: engine.conversion for name, engine in zip(self.names, self.engines)}
        if any(conversions.values()):
            described["conversions"] = conversions
        described["signatures"] = self.signatures()
        if self.int8_checks is not None:
            described["int8_check"] = self.int8_checks
        return described

    def signatures(self) -> dict[str, str]:
        """name -> the signature of that metric's scores (`scoring.signature`)."""
        if self._signatures is None:
            self._signatures = {
                name: metric_signature(
                    engine, self.settings, self._column_checkpoints.get(name), self.vocab_path
                )
                for name, engine in zip(self.names, self.engines)
            }
        return dict(self._signatures)

    def check_int8(
        self, options: ScoringOptions, engine_options: Optional[Mapping[str, Any]] = None
    ) -> None:
        """With int8 weights (and `options.int8_check`), scores a probe in
        float32 and int8 once on this host (`scoring.int8_check`): the
        figures go into `metadata()["int8_check"]`; a low Spearman warns, and
        one below `options.int8_min_spearman` raises `Int8AgreementError`."""
        if not options.quantize or not int8_check.wanted(options.int8_check):
            return
        reference_options = {
            "engine": options.engine,
            "scan_layers": options.scan_layers,
            "question_template": self.settings.question_template,
            "engine_options": dict(options.engine_options or {}, **(engine_options or {})) or None,
        }
        # One check per checkpoint: a multi-question metric's weights are
        # checked through its first question (the float32 twin reads that one).
        engines = [engine for engine in self.engines if getattr(engine, "column", 0) == 0]
        variants = int8_check.variants(
            self.checkpoints, self.vocab_path, engines, options.engine, reference_options
        )
        tokens = int8_check.probe_tokens(
            self.tokenizer, self.pad_id, self.settings.question_template
        )
        self.int8_checks = int8_check.check_all(
            variants, engines, tokens, options.int8_min_spearman
        )

    # ----------------------------------------------------------- scoring
    def encode_inputs(
        self,
        premises: Sequence[str],
        hypotheses: Sequence[str],
        questions: Optional[Sequence[Optional[str]]] = None,
    ) -> list[list[int]]:
        """Token ids of each pair as `truncate` mode scores it, ending with EOS."""
        questions = check_pairs(premises, hypotheses, questions)
        return [
            encode_pair(
                self.tokenizer,
                p,
                h,
                self.settings.max_input_length,
                self.settings.truncation,
                q,
                self.settings.question_template,
            ).ids
            for p, h, q in zip(premises, hypotheses, questions)
        ]

    def run(
        self,
        windows: Iterable[Sequence[Example]],
        batch_size: Optional[int] = None,
        stats: Optional[ScoringStats] = None,
    ) -> Iterator[list[ExampleResult]]:
        """Scores windows of `Example`s; yields each batch's finished results
        (completion order). The building block of `score` and the CLI."""
        stats = stats if stats is not None else ScoringStats()
        yield from self.window_scorer(batch_size).run(windows, stats)

    def score_detailed(
        self,
        premises: Sequence[str],
        hypotheses: Sequence[str],
        batch_size: Optional[int] = None,
        show_progress: Optional[bool] = None,
        langs: Optional[Sequence[Optional[str]]] = None,
        *,
        questions: Optional[Sequence[Optional[str]]] = None,
    ) -> ScoreOutput:
        """Scores pairs; returns scores, per-sentence scores and counts.

        Args:
          premises: Articles (or other grounding texts).
          hypotheses: Summaries, one per premise.
          batch_size: Most rows of a batch (default: the scorer's).
          show_progress: Show a progress bar (default: when on a terminal).
          langs: Language codes, for the truncation counts by language.
          questions: For query-focused summaries, the question each answers
            (None entries for generic summaries); None for none.

        Raises:
          ValueError: if the lists differ in length or hold non-strings.
          SummaryTooLongError: for a summary that leaves its article less than
            a quarter of the input, unless `long_summaries="cut"`.
        """
        from tqdm.auto import tqdm

        questions = check_pairs(premises, hypotheses, questions)
        langs = list(langs) if langs is not None else [None] * len(premises)
        examples = [
            Example(i, p, h, lang, q)
            for i, (p, h, lang, q) in enumerate(zip(premises, hypotheses, langs, questions))
        ]
        stats = ScoringStats()
        with tqdm(
            total=len(examples),
            desc="scoring",
            unit="ex",
            dynamic_ncols=True,
            disable=(None if show_progress is None else not show_progress),
        ) as progress:
            windows = window_rows(examples, self.window_size, key=lambda example: example.key)
            groups = self.run(windows, batch_size, stats)
            collected = collect_results(groups, len(self.names), len(examples), progress)
        stats.log(self.settings.max_input_length)
        self.stats.merge(stats)
        return collected.output(self.names, self.settings.per_sentence, stats, self.metadata())

    def score(
        self,
        premises: Sequence[str],
        hypotheses: Sequence[str],
        batch_size: Optional[int] = None,
        show_progress: Optional[bool] = None,
        *,
        questions: Optional[Sequence[Optional[str]]] = None,
    ) -> dict[str, np.ndarray]:
        """Returns {name: float32 [n] scores} for each (premise, hypothesis) pair
        (with its question, for query-focused summaries)."""
        return self.score_detailed(
            premises, hypotheses, batch_size, show_progress, questions=questions
        ).scores

    def score_records(
        self,
        records: Iterable[Mapping[str, Any]],
        premise_field: str = "article",
        hypothesis_field: str = "summary",
        lang_field: Optional[str] = "lang",
        fields: Optional[Mapping[str, str]] = None,
        batch_size: Optional[int] = None,
        question_field: Optional[str] = None,
        calibration: Optional[Mapping[str, Any]] = None,
    ) -> Iterator[dict]:
        """Streams records through the metrics, yielding them in input order.

        A generator: nothing is read or scored until it is iterated (`for
        record in scorer.score_records(...)`, or `list(...)` to score all at
        once), and `records` may be a generator too (a file read line by
        line). Each yielded record is a copy of the input with a score field per
        metric (`fields[name]`, default the metric name), and with
        `per_sentence` a `<field>_sentences` list and a `sentences` list;
        input fields of those names (or `error`) are kept as `input_<name>`.
        A record that cannot be scored (missing, empty or non-text field)
        is yielded with an `error` field instead, and logged. Memory stays
        bounded: about one window of records is held at a time.

        Args:
          records: Mappings with the text fields (e.g. JSONL objects).
          premise_field, hypothesis_field: Names of the text fields.
          lang_field: Field with a language code, for the counts (optional).
          fields: metric name -> output field.
          batch_size: Most rows of a batch.
          question_field: Field with the question of a query-focused summary
            (then required in every record), or None.
          calibration: Output field -> calibration map: adds
            `<field>_calibrated` (as `score --calibration`).
        """
        columns = dict(fields or {name: name for name in self.names})
        input_fields = InputFields(premise_field, hypothesis_field, lang_field, question_field)
        stats = ScoringStats()
        output = self._output_fields(columns, calibration)
        for item, entry in score_rows(
            self,
            records_as_rows(records),
            input_fields,
            columns,
            batch_size=batch_size,
            stats=stats,
            shortest=False,
        ):
            if "scores" not in entry:
                _warn_unscored(item)
            record = item.record if isinstance(item.record, Mapping) else {"record": item.record}
            # Output fields are fresh: the record's own fields of those names are renamed.
            yield output.record(record, entry, output.renamed(record))
        stats.log(self.settings.max_input_length)
        self.stats.merge(stats)

    def _output_fields(
        self, columns: Mapping[str, str], calibration: Optional[Mapping[str, Any]]
    ) -> OutputFields:
        """The fields `score_records` adds to a record: `columns`' scores, and
        as the settings and `calibration` say, sentences, calibrated scores and
        `summary_cut`."""
        return OutputFields(
            columns,
            self.settings.per_sentence,
            calibration=calibration or {},
            summary_cut=self.settings.long_summaries == "cut",
        )


def _warn_unscored(item) -> None:
    """Logs a record `score_records` returns with an error instead of scores."""
    logger.warning(
        "record %d: %s; it is returned with an %r field", item.row, item.error, ERROR_FIELD
    )


def _shared_vocabulary(named: Mapping[str, str], vocab: Optional[str]) -> str:
    """The vocabulary of the checkpoints `named` (`vocab`, or each one's own),
    which must be one file.

    Raises:
      ValueError: if the checkpoints' vocabularies differ.
    """
    vocab_paths = {name: resolve_vocabulary(path, vocab) for name, path in named.items()}
    digests = {name: file_digest(path) for name, path in vocab_paths.items()}
    if len(set(digests.values())) > 1:
        raise ValueError(
            "the checkpoints have different vocabularies "
            f"({', '.join(f'{n}: {p}' for n, p in vocab_paths.items())}); score them "
            "separately or pass the shared one as vocab=..."
        )
    return next(iter(vocab_paths.values()))
