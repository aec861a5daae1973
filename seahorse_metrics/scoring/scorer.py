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

import dataclasses
import logging
import os
from typing import Any, Iterable, Iterator, Mapping, Optional, Sequence, Union

import numpy as np

from seahorse_metrics.checkpoints.hub import resolve_checkpoint
from seahorse_metrics.checkpoints.layout import SINGLE_NAME, checkpoint_names, find_vocabulary
from seahorse_metrics.data.inputs import QUESTION_TEMPLATE, SummaryTooLongError, encode_pair
from seahorse_metrics.data.vocab import SentencePieceTokenizer
from seahorse_metrics.engines.choice import place
from seahorse_metrics.scoring import batching as batching_lib
from seahorse_metrics.scoring import int8_check
from seahorse_metrics.scoring.job import InputFields
from seahorse_metrics.scoring.options import ScoringOptions
from seahorse_metrics.scoring.loading import (check_models, file_digest, given_options,
                                              load_models, resolve_vocabulary,
                                              shared_question_template)
from seahorse_metrics.scoring.output import ERROR_FIELD, OutputFields
from seahorse_metrics.scoring.records import check_pairs
from seahorse_metrics.scoring.rows import records_as_rows, score_rows, window_rows
from seahorse_metrics.scoring.signature import metric_signature
from seahorse_metrics.scoring.units import InputSettings
from seahorse_metrics.scoring.window_scoring import (Example, ExampleResult, ScoringStats,
                                                     WindowScorer)

logger = logging.getLogger(__name__)

SCORE_FIELD = SINGLE_NAME
SENTENCES_FIELD = "sentences"
__all__ = ["MultiScorer", "ScoreOutput", "find_vocabulary"]


@dataclasses.dataclass
class ScoreOutput:
    """Scores of a list of pairs with everything that describes them.

    Attributes:
      scores: Per model name: float32 [n] scores in input order.
      sentence_scores: With `per_sentence`, per model name: a float32 array of
        sentence scores per pair; else None.
      sentences: With `per_sentence`, the sentences of each summary; else None.
      stats: Truncation and batching counts of this call.
      metadata: The scorer's settings (`MultiScorer.metadata()`).
      calibrated: From a `Scorer` loaded with `calibration=FILE`, per model
        name: float32 [n] calibrated probabilities of `scores`; else None.
    """

    scores: dict[str, np.ndarray]
    sentence_scores: Optional[dict[str, list[np.ndarray]]]
    sentences: Optional[list[list[str]]]
    stats: ScoringStats
    metadata: dict
    calibrated: Optional[dict[str, np.ndarray]] = None


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

    def __init__(self, models: Mapping[str, tuple[Any, Any]], vocab_path: str, *,
                 max_input_length: int = 2048, batch_size: int = 16,
                 truncation: str = "summary_first", normalize: str = "full",
                 long_inputs: str = "truncate", chunk_overlap: int = 128,
                 per_sentence: bool = False, sentence_aggregate: str = "min",
                 long_summaries: str = "error", bucket_lengths: Optional[Sequence[int]] = None,
                 max_batch_tokens: int = batching_lib.DEFAULT_MAX_BATCH_TOKENS,
                 window_size: int = batching_lib.DEFAULT_WINDOW_SIZE, mesh: Any = None,
                 compiler_options: Optional[Mapping[str, Any]] = None,
                 checkpoints: Optional[Mapping[str, str]] = None,
                 question_template: str = QUESTION_TEMPLATE, packing: bool = False):
        """Builds a scorer from loaded models.

        Args:
          models: name -> (`EncoderDecoderModel`, parameters).
          vocab_path: The SentencePiece model the metrics were trained with.
          max_input_length: Token budget of one input, EOS included.
          batch_size: Most rows of a batch (default of `score`).
          truncation: `summary_first` or `joint` (see the module docstring).
          normalize, long_inputs: `full` or `pair`; `truncate` or `chunk`.
          chunk_overlap: Premise pieces shared by consecutive chunks.
          per_sentence: Score each summary sentence against the premise.
          sentence_aggregate: `min`, `mean` or `share@T` over sentences.
          long_summaries: `error` or `cut` (a summary crowding out the article; `units`).
          bucket_lengths: Batch lengths (default `batching.DEFAULT_BUCKET_LENGTHS`
            up to `max_input_length`).
          max_batch_tokens: Rows of a bucket are about this many tokens / length.
          window_size: Pairs sorted by length together.
          mesh: A ('data', 'model') device mesh (default: all devices on 'data').
          compiler_options: XLA compile options (see `engines.jax_engine.JaxEngine`).
          checkpoints: name -> checkpoint path, for `metadata()`.
          question_template: Input of a pair with a question (fields
            `{question}`, `{premise}`, `{hypothesis}`).
          packing: Fill padding with other inputs (block-diagonal attention;
            the same scores to float rounding; see `batching`).

        Raises:
          ValueError: for bad settings, or a vocabulary that does not fit a
            model or cannot tell "1" from "0".
        """
        if not models:
            raise ValueError("need at least one model")
        self.names = list(models)
        self.vocab_path, self.tokenizer = vocab_path, SentencePieceTokenizer(vocab_path)
        self.positive_id, self.negative_id, self.pad_id = check_models(models, self.tokenizer,
                                                                       vocab_path)
        self.settings = InputSettings(
            max_input_length=int(max_input_length), truncation=truncation, normalize=normalize,
            long_inputs=long_inputs, chunk_overlap=int(chunk_overlap), long_summaries=long_summaries,
            per_sentence=bool(per_sentence), sentence_aggregate=sentence_aggregate,
            question_template=question_template)
        token_ids = (self.positive_id, self.negative_id)
        self.engines = place(models, self.tokenizer, token_ids, mesh, compiler_options)
        self.buckets = batching_lib.bucket_lengths(self.settings.max_input_length, bucket_lengths)
        self.batch_size, self.max_batch_tokens = int(batch_size), int(max_batch_tokens)
        self.window_size, self.packing = int(window_size), bool(packing)
        self.batching()  # Validates the batch settings now.
        self.checkpoints = dict(checkpoints or {})
        self.stats = ScoringStats()
        self.options = self._scoring_options(bucket_lengths, compiler_options)

    def _scoring_options(self, bucket_lengths: Optional[Sequence[int]],
                         compiler_options: Optional[Mapping[str, Any]]) -> ScoringOptions:
        """The settings of this scorer as `ScoringOptions` (`self.options`)."""
        config = self.engines[0].model.config
        inputs = {name: getattr(self.settings, name) for name in (
            "max_input_length", "truncation", "long_inputs", "chunk_overlap", "per_sentence",
            "sentence_aggregate", "normalize", "question_template", "long_summaries")}
        return ScoringOptions(
            vocab=self.vocab_path, dtype=config.dtype, quantize=config.quantize,
            scan_layers=bool(getattr(config, "scan_layers", False)),
            engine=self.engines[0].name,
            batch_size=self.batch_size, bucket_lengths=bucket_lengths,
            max_batch_tokens=self.max_batch_tokens, window_size=self.window_size,
            packing=self.packing, compiler_options=compiler_options, **inputs)

    # ------------------------------------------------------------- loading
    @classmethod
    def load(cls, checkpoints: Union[Mapping[str, str], Sequence[str]], vocab: Optional[str] = None,
             dtype: Optional[str] = None, max_input_length: Optional[int] = None,
             quantize: Optional[str] = None, *, options: Optional[ScoringOptions] = None,
             mesh: Any = None, engine_options: Optional[Mapping[str, Any]] = None,
             **kwargs) -> "MultiScorer":
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
          mesh: A ('data', 'model') mesh (see `partitioning.mesh_from_spec`):
            where the parameters are loaded and the batches split.
          engine_options: See `Scorer.load`.
          **kwargs: Any other field of `ScoringOptions` (the arguments of
            `MultiScorer(...)`, and `engine`); without `question_template`,
            the checkpoints' `seahorse_inputs.json` (or the default) gives it.

        Raises:
          FileNotFoundError: if a checkpoint or vocabulary is missing.
          ValueError: if the checkpoints' vocabularies or question templates differ.
        """
        options = given_options(options, vocab=vocab, dtype=dtype,
                                 max_input_length=max_input_length, quantize=quantize, **kwargs)
        named = {name: resolve_checkpoint(path) for name, path in checkpoint_names(checkpoints).items()}
        vocab_paths = {name: resolve_vocabulary(path, options.vocab) for name, path in named.items()}
        digests = {name: file_digest(path) for name, path in vocab_paths.items()}
        if len(set(digests.values())) > 1:
            raise ValueError(
                "the checkpoints have different vocabularies "
                f"({', '.join(f'{n}: {p}' for n, p in vocab_paths.items())}); score them "
                "separately or pass the shared one as vocab=...")
        if options.question_template is None:
            options = ScoringOptions.of(options, question_template=shared_question_template(named))
        vocab_path = next(iter(vocab_paths.values()))
        models, mesh = load_models(named, vocab_path, options, mesh, engine_options)
        scorer = cls(models, vocab_path, checkpoints=named, mesh=mesh,
                     **options.scorer_arguments())
        scorer.check_int8(options, engine_options)
        return scorer

    # ------------------------------------------------------------ models
    # ------------------------------------------------------------- setup
    def batching(self, batch_size: Optional[int] = None) -> batching_lib.BatchingConfig:
        """The batch shapes used for `batch_size` rows (default: the scorer's)."""
        data_parallel = self.engines[0].data_parallel
        return batching_lib.BatchingConfig(
            buckets=self.buckets, batch_size=int(batch_size or self.batch_size),
            max_batch_tokens=self.max_batch_tokens, row_multiple=data_parallel,
            window_size=self.window_size, pack=self.packing)

    def window_scorer(self, batch_size: Optional[int] = None) -> WindowScorer:
        """The `WindowScorer` of `batch_size` rows."""
        return WindowScorer(self.tokenizer, self.engines, self.settings,
                               self.batching(batch_size), self.pad_id)

    def precompile(self, batch_size: Optional[int] = None,
                   max_length: Optional[int] = None) -> None:
        """Compiles every batch shape up to `max_length` tokens now (two at a
        time) instead of on first use."""
        config = self.batching(batch_size)
        longest = config.buckets[-1] if max_length is None else config.bucket(
            min(int(max_length), config.buckets[-1]))
        shapes = [(rows, length) + ((config.slots(length),) if config.pack else ())
                  for rows, length in config.shapes() if length <= longest]
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
            "mesh": ({name: int(size) for name, size in self.engines[0].mesh.shape.items()}
                     if self.engines[0].mesh is not None else None),
            "quantize": {name: engine.model.config.quantize
                         for name, engine in zip(self.names, self.engines)},
            "batching": {"buckets": list(self.buckets), "batch_size": self.batch_size,
                         "max_batch_tokens": self.max_batch_tokens,
                         "window_size": self.window_size,
                         "data_parallel": self.engines[0].data_parallel,
                         "packing": self.packing},
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
                name: metric_signature(engine, self.settings, self.checkpoints.get(name),
                                       self.vocab_path)
                for name, engine in zip(self.names, self.engines)}
        return dict(self._signatures)

    def check_int8(self, options: ScoringOptions,
                   engine_options: Optional[Mapping[str, Any]] = None) -> None:
        """With int8 weights (and `options.int8_check`), scores a probe in
        float32 and int8 once on this host (`scoring.int8_check`): the
        figures go into `metadata()["int8_check"]`; a low Spearman warns, and
        one below `options.int8_min_spearman` raises `Int8AgreementError`."""
        if not options.quantize or not int8_check.wanted(options.int8_check):
            return
        reference_options = {"engine": options.engine, "scan_layers": options.scan_layers,
                             "question_template": self.settings.question_template,
                             "engine_options": dict(options.engine_options or {},
                                                    **(engine_options or {})) or None}
        variants = int8_check.variants(self.checkpoints, self.vocab_path, self.engines,
                                       options.engine, reference_options)
        tokens = int8_check.probe_tokens(self.tokenizer, self.pad_id,
                                         self.settings.question_template)
        self.int8_checks = int8_check.check_all(variants, self.engines, tokens,
                                                options.int8_min_spearman)

    # ----------------------------------------------------------- scoring
    def encode_inputs(self, premises: Sequence[str], hypotheses: Sequence[str],
                      questions: Optional[Sequence[Optional[str]]] = None) -> list[list[int]]:
        """Token ids of each pair as `truncate` mode scores it, ending with EOS."""
        questions = check_pairs(premises, hypotheses, questions)
        return [encode_pair(self.tokenizer, p, h, self.settings.max_input_length,
                            self.settings.truncation, q, self.settings.question_template).ids
                for p, h, q in zip(premises, hypotheses, questions)]

    def run(self, windows: Iterable[Sequence[Example]], batch_size: Optional[int] = None,
            stats: Optional[ScoringStats] = None) -> Iterator[list[ExampleResult]]:
        """Scores windows of `Example`s; yields each batch's finished results
        (completion order). The building block of `score` and the CLI."""
        stats = stats if stats is not None else ScoringStats()
        yield from self.window_scorer(batch_size).run(windows, stats)

    def score_detailed(self, premises: Sequence[str], hypotheses: Sequence[str],
                       batch_size: Optional[int] = None, show_progress: Optional[bool] = None,
                       langs: Optional[Sequence[Optional[str]]] = None, *,
                       questions: Optional[Sequence[Optional[str]]] = None) -> ScoreOutput:
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
        examples = [Example(i, p, h, lang, q) for i, (p, h, lang, q)
                    in enumerate(zip(premises, hypotheses, langs, questions))]
        stats = ScoringStats()
        scores = np.zeros((len(self.names), len(examples)), np.float32)
        per_sentence = [None] * len(examples)
        sentences = [None] * len(examples)
        with tqdm(total=len(examples), desc="scoring", unit="ex", dynamic_ncols=True,
                  disable=(None if show_progress is None else not show_progress)) as progress:
            windows = window_rows(examples, self.window_size, key=lambda example: example.key)
            for group in self.run(windows, batch_size, stats):
                for result in group:
                    if result.error is not None:
                        raise SummaryTooLongError(f"pair {result.key}: {result.error}")
                    scores[:, result.key] = result.scores
                    per_sentence[result.key] = result.sentence_scores
                    sentences[result.key] = result.sentences
                progress.update(len(group))
        stats.log(self.settings.max_input_length)
        self.stats.merge(stats)
        sentence_scores = None
        if self.settings.per_sentence:
            sentence_scores = {name: [np.asarray(s[m], np.float32) for s in per_sentence]
                               for m, name in enumerate(self.names)}
        return ScoreOutput(
            scores={name: scores[m] for m, name in enumerate(self.names)},
            sentence_scores=sentence_scores,
            sentences=sentences if self.settings.per_sentence else None,
            stats=stats, metadata=self.metadata())

    def score(self, premises: Sequence[str], hypotheses: Sequence[str],
              batch_size: Optional[int] = None, show_progress: Optional[bool] = None, *,
              questions: Optional[Sequence[Optional[str]]] = None) -> dict[str, np.ndarray]:
        """Returns {name: float32 [n] scores} for each (premise, hypothesis) pair
        (with its question, for query-focused summaries)."""
        return self.score_detailed(premises, hypotheses, batch_size, show_progress,
                                   questions=questions).scores

    def score_records(self, records: Iterable[Mapping[str, Any]], premise_field: str = "article",
                      hypothesis_field: str = "summary", lang_field: Optional[str] = "lang",
                      fields: Optional[Mapping[str, str]] = None,
                      batch_size: Optional[int] = None,
                      question_field: Optional[str] = None,
                      calibration: Optional[Mapping[str, Any]] = None) -> Iterator[dict]:
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
        output = OutputFields(columns, self.settings.per_sentence, calibration=calibration or {},
                              summary_cut=self.settings.long_summaries == "cut")
        for item, entry in score_rows(self, records_as_rows(records), input_fields,
                                      columns, batch_size=batch_size, stats=stats,
                                      shortest=False):
            if "scores" not in entry:
                logger.warning("record %d: %s; it is returned with an %r field", item.row,
                               item.error, ERROR_FIELD)
            record = item.record if isinstance(item.record, Mapping) else {"record": item.record}
            # Output fields are fresh: the record's own fields of those names are renamed.
            yield output.record(record, entry, output.renamed(record))
        stats.log(self.settings.max_input_length)
        self.stats.merge(stats)
