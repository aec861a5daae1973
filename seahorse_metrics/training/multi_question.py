"""Training one multi-question metric: the question as a decoder prefix.

A run whose task is `seahorse_multi_question` (`MULTI_QUESTION_TASK`)
trains one model on the six SEAHORSE questions. Each example of
`seahorse_q<n>` keeps its encoder input and gets the targets
`prefix(q<n>) + label + EOS` (`model.questions`), the prefix weighted 0 in
the loss (`QuestionStream`). Questions are sampled at `question_rates`
(default: in proportion to their training examples, every example once per
epoch). Validation scores every distinct validation input once, for all
questions at once (the scorer's shared-encoder program), and reports each
question's ROC-AUC and Pearson (`roc_auc_q4`, ...) and their means
(`roc_auc`, `pearson`); the mean ROC-AUC picks the best checkpoint, which
gets `questions.json` beside it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from seahorse_metrics.model.questions import QuestionPrefixes, seahorse_question_texts
from seahorse_metrics.training.batches import BatchStream
from seahorse_metrics.training.data import ExampleSet

MULTI_QUESTION_TASK = "seahorse_multi_question"


def question_tasks(questions: QuestionPrefixes) -> list[str]:
    """The single-question task each question's examples come from (`seahorse_q4`)."""
    return [f"seahorse_{name}" for name in questions.names]


def load_question_examples(
    load_split,
    vocabulary_path: str,
    splits: Sequence[str],
    rates: Optional[Mapping[str, float]] = None,
) -> dict:
    """Each split of the six SEAHORSE questions' tasks as one `QuestionExampleSet`,
    the prefixes (`seahorse_question_texts`) tokenised with the run's vocabulary.

    Args:
      load_split: `(split, task) -> ExampleSet` (the trainer's cached reader).
      vocabulary_path: The run's SentencePiece model.
      splits: The splits to read.
      rates: name -> sampling rate (`QuestionExampleSet.build`).
    """
    from seahorse_metrics.data.vocab import SentencePieceTokenizer

    questions = QuestionPrefixes.from_texts(
        seahorse_question_texts(), SentencePieceTokenizer(vocabulary_path)
    )
    return {
        split: QuestionExampleSet.build(
            [load_split(split, task) for task in question_tasks(questions)], questions, rates
        )
        for split in splits
    }


@dataclasses.dataclass(frozen=True)
class QuestionExampleSet(ExampleSet):
    """The examples of every question, targets prefixed with their question's ids.

    Attributes:
      question: int32 index of each example's question.
      questions: The questions' prefixes.
      rates: Sampling rate of each question (relative).
    """

    question: Optional[np.ndarray] = None
    questions: Optional[QuestionPrefixes] = None
    rates: tuple[float, ...] = ()

    @classmethod
    def build(
        cls,
        sets: Sequence[ExampleSet],
        questions: QuestionPrefixes,
        rates: Optional[Mapping[str, float]] = None,
    ) -> "QuestionExampleSet":
        """One set from each question's examples (in `questions` order).

        Args:
          sets: Each question's examples (targets: label + EOS).
          questions: Their prefixes.
          rates: name -> sampling rate; default: each question's example count.

        Raises:
          ValueError: for a set count other than the questions', rates of
            unknown questions, or rates that are not positive.
        """
        if len(sets) != len(questions):
            raise ValueError(f"{len(sets)} example sets for {len(questions)} questions")
        rates = dict(rates or {})
        unknown = sorted(set(rates) - set(questions.names))
        if unknown:
            raise ValueError(
                f"question_rates of unknown questions {unknown}; the questions "
                f"are {list(questions.names)}"
            )
        values = tuple(
            float(rates.get(name, len(subset))) for name, subset in zip(questions.names, sets)
        )
        if not all(v > 0 for v in values):
            raise ValueError(
                f"question_rates must be positive, got {dict(zip(questions.names, values))}"
            )
        inputs, targets, labels, ids, question = [], [], [], [], []
        for index, (prefix, subset) in enumerate(zip(questions.prefixes, sets)):
            for example in range(len(subset)):
                inputs.append(subset.inputs(example))
                targets.append(
                    np.concatenate([np.asarray(prefix, np.int32), subset.targets(example)])
                )
                labels.append(float(subset.labels[example]))
                ids.append(f"{questions.names[index]}:{subset.ids[example]}")
                question.append(index)
        base = ExampleSet.from_examples(inputs, targets, labels, ids)
        return cls(
            **{f.name: getattr(base, f.name) for f in dataclasses.fields(ExampleSet)},
            question=np.asarray(question, np.int32),
            questions=questions,
            rates=values,
        )

    def take(self, count: int) -> "QuestionExampleSet":
        """The first `count` examples of each question (the trainer's
        `eval_max_examples` of a multi-question run)."""
        kept = np.concatenate(
            [np.flatnonzero(self.question == q)[:count] for q in range(len(self.questions))]
        )
        base = ExampleSet.from_examples(
            [self.inputs(i) for i in kept],
            [self.targets(i) for i in kept],
            self.labels[kept].tolist(),
            [self.ids[i] for i in kept],
        )
        return dataclasses.replace(
            self,
            **{f.name: getattr(base, f.name) for f in dataclasses.fields(ExampleSet)},
            question=self.question[kept],
        )

    def prefix_length(self, index: int) -> int:
        """Prefix tokens of example `index` (weighted 0 in the loss)."""
        return len(self.questions.prefixes[int(self.question[index])])


class QuestionStream(BatchStream):
    """A `BatchStream` over a `QuestionExampleSet`: questions drawn at their
    rates each epoch, and loss weight 0 on each row's question prefix.

    Raises:
      ValueError: when packing, or for targets longer than the target length.
    """

    def __init__(
        self,
        examples: QuestionExampleSet,
        batch_size: int,
        input_length: int,
        target_length: int,
        *args,
        **kwargs,
    ):
        if kwargs.get("pack"):
            raise ValueError(
                "a multi-question run trains one example per row: set TrainConfig.pack = False"
            )
        longest = int(examples.target_lengths.max())
        if longest > target_length:
            raise ValueError(
                f"question prefix + label + EOS take {longest} target tokens but "
                f"TrainConfig.target_length is {target_length}; raise it"
            )
        super().__init__(examples, batch_size, input_length, target_length, *args, **kwargs)
        self._rows: list[list[int]] = []

    def permutation(self, epoch: int) -> np.ndarray:
        """An epoch of `len(examples)` draws, each question's share set by its
        rate (without replacement within a question until its examples run out)."""
        if epoch != self._permutation_epoch:
            rng = np.random.default_rng([self.seed, epoch])
            self._permutation = _rated_order(self.examples, rng)
            self._permutation_epoch = epoch
        return self._permutation

    def _next_rows(self) -> list[list[int]]:
        self._rows = super()._next_rows()
        return self._rows

    def __next__(self) -> dict[str, np.ndarray]:
        batch = super().__next__()
        for row, (index,) in enumerate(self._rows):
            batch["decoder_loss_weights"][row, : self.examples.prefix_length(index)] = 0
        return batch


def _rated_order(examples: QuestionExampleSet, rng: np.random.Generator) -> np.ndarray:
    rates = np.asarray(examples.rates, np.float64)
    wanted = rates / rates.sum() * len(examples)
    counts = np.floor(wanted).astype(np.int64)
    # Largest remainders get the draws left over, so an epoch is len(examples) long.
    for index in np.argsort(-(wanted - counts))[: len(examples) - int(counts.sum())]:
        counts[index] += 1
    drawn = []
    for question, count in enumerate(counts):
        members = np.flatnonzero(examples.question == question)
        repeats = -(-int(count) // len(members)) if len(members) else 0
        order = np.concatenate([rng.permutation(members) for _ in range(repeats)] or [[]])
        drawn.append(order[:count].astype(np.int64))
    return rng.permutation(np.concatenate(drawn))


def validation_metrics(examples: QuestionExampleSet, probs: np.ndarray) -> dict[str, Any]:
    """Each question's ROC-AUC and Pearson (`roc_auc_<name>`, `pearson_<name>`)
    and their means (`roc_auc`, `pearson`; None when no question has one).

    Args:
      examples: The validation examples.
      probs: float [len(examples), questions, 2]: P("1"), P("0") after each
        question's prefix for each example's input.
    """
    from seahorse_metrics.training import validation

    metrics: dict[str, Any] = {}
    for index, name in enumerate(examples.questions.names):
        members = np.flatnonzero(examples.question == index)
        own = validation.validation_metrics(examples.labels[members], probs[members, index, 0])
        metrics.update({f"{key}_{name}": value for key, value in own.items()})
    for key in ("roc_auc", "pearson"):
        values = [metrics.get(f"{key}_{name}") for name in examples.questions.names]
        values = [v for v in values if v is not None]
        metrics[key] = float(np.mean(values)) if values else None
    metrics["num_examples"] = int(
        sum(metrics[f"num_examples_{name}"] for name in examples.questions.names)
    )
    return metrics


def validate(
    model, params, examples: QuestionExampleSet, token_ids, batch_size: int, max_length: int, mesh
) -> dict[str, Any]:
    """`validation_metrics` of `validation_probabilities`."""
    return validation_metrics(
        examples,
        validation_probabilities(model, params, examples, token_ids, batch_size, max_length, mesh),
    )


def validation_probabilities(
    model, params, examples: QuestionExampleSet, token_ids, batch_size: int, max_length: int, mesh
) -> np.ndarray:
    """float32 [len(examples), questions, 2]: every question's first-step
    probabilities for each example's input, each distinct input scored once
    (one encoder pass for all questions)."""
    from seahorse_metrics.training import validation

    representatives, position = distinct_inputs(examples)
    distinct = ExampleSet.from_examples(
        [examples.inputs(i) for i in representatives],
        [examples.targets(i) for i in representatives],
    )
    probs = validation.first_token_probabilities(
        model,
        params,
        distinct,
        token_ids,
        batch_size,
        max_length,
        mesh,
        questions=examples.questions,
    )
    return probs[position]


def distinct_inputs(examples: ExampleSet) -> tuple[list[int], np.ndarray]:
    """The first example of each distinct input, and for every example the
    position of its input among them (SEAHORSE rates each pair on all six
    questions: validation scores each pair once)."""
    first: dict[bytes, int] = {}
    representatives, position = [], np.zeros(len(examples), np.int64)
    for index in range(len(examples)):
        key = examples.inputs(index).tobytes()
        if key not in first:
            first[key] = len(representatives)
            representatives.append(index)
        position[index] = first[key]
    return representatives, position
