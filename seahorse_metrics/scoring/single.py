"""`Scorer`: one metric, the simple face of `MultiScorer`.

    from seahorse_metrics import Scorer
    scorer = Scorer.load("path/to/checkpoint")      # ours, Hugging Face, T5X or a hub id
    probs = scorer.score(articles, summaries)       # float32 numpy array, input order

A `Scorer` is a `MultiScorer` of one metric named `score`
(`seahorse_metrics.scoring.scorer`, which describes the inputs, batching and
modes), whose `score` returns one array and which may carry a calibration map.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Mapping, Optional, Sequence

import numpy as np

from seahorse_metrics.checkpoints.hub import resolve_checkpoint
from seahorse_metrics.checkpoints.layout import QUESTIONS_FILE, question_prefixes
from seahorse_metrics.scoring.loading import (
    given_options,
    load_models,
    resolve_vocabulary,
    shared_question_template,
)
from seahorse_metrics.scoring.options import ScoringOptions
from seahorse_metrics.scoring.score_output import ScoreOutput
from seahorse_metrics.scoring.scorer import SCORE_FIELD, MultiScorer
from seahorse_metrics.scoring.units import InputSettings
from seahorse_metrics.scoring.window_scoring import ScoringStats


def _one_question(path: str) -> str:
    """`path`, unless it is a multi-question metric (`Scorer` scores one column).

    Raises:
      ValueError: for a multi-question metric.
    """
    if question_prefixes(path) is not None:
        raise ValueError(
            f"{path} is a multi-question metric ({QUESTIONS_FILE}: one score "
            "per question); load it with MultiScorer.load, which gives a "
            "column per question"
        )
    return path


class Scorer:
    """Scores (premise, hypothesis) pairs with one encoder-decoder metric.

    A `MultiScorer` with a single metric named `score`, whose `score`
    returns one array.

    Attributes:
      model: The `EncoderDecoderModel`.
      params: Its parameters, placed on the devices.
      positive_id, negative_id: Vocabulary ids of "1" and "0".
      max_input_length: Token budget of one input, EOS included.
      settings: Input and aggregation settings.
      stats: Counts accumulated over every call.
    """

    def __init__(
        self, model: Any, params: Any, vocab_path: str, checkpoint: Optional[str] = None, **kwargs
    ):
        """Builds a scorer from a loaded model.

        Args:
          model: The `EncoderDecoderModel`.
          params: Parameters matching `model.config`.
          vocab_path: SentencePiece model.
          checkpoint: Where the model came from (for `metadata()`).
          **kwargs: As `MultiScorer(...)`: options (a `ScoringOptions`), mesh,
            and any option field (max_input_length, batch_size, normalize, ...).
        """
        checkpoints = {SCORE_FIELD: checkpoint} if checkpoint else None
        self._multi = MultiScorer(
            {SCORE_FIELD: (model, params)}, vocab_path, checkpoints=checkpoints, **kwargs
        )
        self.model = model
        self.params = self._multi.engines[0].params
        self.vocab_path = vocab_path
        self.positive_id = self._multi.positive_id
        self.negative_id = self._multi.negative_id
        self.max_input_length = self._multi.settings.max_input_length
        self.batch_size = self._multi.batch_size

    calibration = None  # A `CalibrationMap` when loaded with `calibration=FILE`.

    @classmethod
    def load(
        cls,
        path: str,
        vocab: Optional[str] = None,
        dtype: Optional[str] = None,
        max_input_length: Optional[int] = None,
        batch_size: Optional[int] = None,
        quantize: Optional[str] = None,
        *,
        options: Optional[ScoringOptions] = None,
        mesh: Any = None,
        calibration: Optional[str] = None,
        calibration_metric: Optional[str] = None,
        engine_options: Optional[Mapping[str, Any]] = None,
        **kwargs,
    ) -> "Scorer":
        """Loads a scorer from any checkpoint directory `load_checkpoint` reads.

        Args:
          path: Checkpoint directory (ours, Hugging Face, T5X model or step dir) or Hugging Face hub
            id (`google/seahorse-large-q4`, read from the hub cache when offline; see
            `checkpoints.hub`).
          vocab: SentencePiece model; defaults to `spiece.model` in `path`.
          dtype: Compute and parameter dtype ("float32", or "bfloat16": half the memory; norms,
            softmax and logits stay float32; slower on CPUs).
          max_input_length: Token budget of one input, EOS included (default 2048).
          batch_size: Default most rows of a batch (default 16).
          quantize: None, or "int8": the attention and feed-forward kernels become int8 with a scale
            per output channel, multiplied in bfloat16 (`seahorse_metrics.model.quantize`); faster
            on CPUs with AVX512-BF16, scores close to float32's but not equal.
          options: All the settings as one `ScoringOptions` (the arguments given besides it override
            its fields).
          mesh: Where the parameters are loaded and the batches split.
          calibration, calibration_metric: A calibration file and the metric of it to use
            (`.calibration.apply(scores)`, `<score_field>_calibrated`).
          engine_options: With `engine="ctranslate2"`: cache_dir, threads, threads_per_batch,
            convert_in_child, and for int8 int8_smoothing, smoothing_data, smoothing_pairs (see
            `engines.ctranslate2.load_converted`).
          **kwargs: engine ("jax", or "ctranslate2": `seahorse_metrics.engines`), normalize
            ("full"|"pair"), truncation ("summary_first"|"joint"), long_inputs ("truncate"|"chunk"),
            chunk_overlap, per_sentence, sentence_aggregate ("min"|"mean"), bucket_lengths,
            max_batch_tokens, window_size, compiler_options, packing, question_template (default:
            the checkpoint's `seahorse_inputs.json`, else `QUESTION_TEMPLATE`; see `MultiScorer`).

        Raises:
          FileNotFoundError: if no vocabulary is given or found.
          ValueError: for a multi-question metric (one column per question:
            `MultiScorer.load` scores it).
        """
        options = given_options(
            options,
            vocab=vocab,
            dtype=dtype,
            max_input_length=max_input_length,
            batch_size=batch_size,
            quantize=quantize,
            **kwargs,
        )
        return cls._from_path(path, options, mesh, engine_options, calibration, calibration_metric)

    @classmethod
    def _from_path(
        cls,
        path: str,
        options: ScoringOptions,
        mesh: Any,
        engine_options: Optional[Mapping],
        calibration: Optional[str],
        calibration_metric: Optional[str],
    ) -> "Scorer":
        """`load` once its options are gathered: the checkpoint resolved (a hub
        id too), its vocabulary and question template, its model placed, with
        int8 weights the self-check run, and the calibration map read."""
        path = _one_question(resolve_checkpoint(path))
        vocab_path = resolve_vocabulary(path, options.vocab)
        if options.question_template is None:
            options = ScoringOptions.of(
                options, question_template=shared_question_template({SCORE_FIELD: path})
            )
        models, mesh = load_models({SCORE_FIELD: path}, vocab_path, options, mesh, engine_options)
        model, params = models[SCORE_FIELD]
        scorer = cls(model, params, vocab_path, checkpoint=path, mesh=mesh, options=options)
        scorer.multi.check_int8(options, engine_options)
        if calibration is not None:
            from seahorse_metrics.calibration.maps import read_calibration_map

            scorer.calibration = read_calibration_map(calibration, calibration_metric)
        return scorer

    @property
    def settings(self) -> InputSettings:
        return self._multi.settings

    @property
    def options(self) -> ScoringOptions:
        """The settings this scorer scores with (`MultiScorer.options`)."""
        return self._multi.options

    @property
    def stats(self) -> ScoringStats:
        return self._multi.stats

    @property
    def multi(self) -> MultiScorer:
        """This scorer as a one-metric `MultiScorer` (named `score`)."""
        return self._multi

    def metadata(self) -> dict:
        """What produced the scores (see `MultiScorer.metadata`)."""
        return self._multi.metadata()

    def precompile(
        self, batch_size: Optional[int] = None, max_length: Optional[int] = None
    ) -> None:
        """Compiles every batch shape now (see `MultiScorer.precompile`)."""
        self._multi.precompile(batch_size, max_length)

    def encode_inputs(
        self,
        premises: Sequence[str],
        hypotheses: Sequence[str],
        questions: Optional[Sequence[Optional[str]]] = None,
    ) -> list[list[int]]:
        """Token ids of each pair as `truncate` mode scores it, ending with EOS."""
        return self._multi.encode_inputs(premises, hypotheses, questions)

    def score(
        self,
        premises: Sequence[str],
        hypotheses: Sequence[str],
        batch_size: Optional[int] = None,
        show_progress: Optional[bool] = None,
        *,
        questions: Optional[Sequence[Optional[str]]] = None,
        calibrated: Optional[bool] = None,
    ) -> np.ndarray:
        """Returns the score of each (premise, hypothesis) pair: calibrated
        probabilities when the scorer was loaded with `calibration=FILE`.

        Args:
          premises: Articles (or other grounding texts).
          hypotheses: Summaries, one per premise.
          batch_size: Most rows of a batch (default: the scorer's).
          show_progress: Show a progress bar (default: when on a terminal).
          questions: For query-focused summaries (SQuALITY, KI-QFS), the
            question each summary answers (None entries for generic ones).
          calibrated: False for the raw P("1") of a scorer loaded with a
            calibration map (`score_detailed` gives both); default: calibrated
            exactly when a map was loaded.

        Returns:
          float32 array [len(premises)], in input order.

        Raises:
          ValueError: `calibrated=True` without a calibration map.
        """
        if calibrated and self.calibration is None:
            raise ValueError(
                "calibrated=True needs a calibration map: Scorer.load(path, calibration=FILE)"
            )
        output = self.score_detailed(
            premises, hypotheses, batch_size, show_progress, questions=questions
        )
        if calibrated is False or output.calibrated is None:
            return output.scores[SCORE_FIELD]
        return output.calibrated[SCORE_FIELD]

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
        """Scores with per-sentence scores and counts (see `MultiScorer.score_detailed`);
        the metric is named `score`. With a calibration map, `.scores` holds
        the raw scores and `.calibrated` the calibrated ones."""
        output = self._multi.score_detailed(
            premises, hypotheses, batch_size, show_progress, langs, questions=questions
        )
        if self.calibration is not None:
            raw = output.scores[SCORE_FIELD]
            output.calibrated = {SCORE_FIELD: self.calibration.apply(raw).astype(np.float32)}
        return output

    def score_records(
        self,
        records: Iterable[Mapping[str, Any]],
        premise_field: str = "article",
        hypothesis_field: str = "summary",
        lang_field: Optional[str] = "lang",
        score_field: str = SCORE_FIELD,
        batch_size: Optional[int] = None,
        question_field: Optional[str] = None,
    ) -> Iterator[dict]:
        """Streams records, yielding each with a `score_field` (or `error`) in input
        order, and `<score_field>_calibrated` too with a calibration map: a
        generator, which scores as it is iterated (see `MultiScorer.score_records`)."""
        calibration = {score_field: self.calibration} if self.calibration is not None else None
        return self._multi.score_records(
            records,
            premise_field,
            hypothesis_field,
            lang_field,
            {SCORE_FIELD: score_field},
            batch_size,
            question_field,
            calibration=calibration,
        )
