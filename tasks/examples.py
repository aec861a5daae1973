"""Tokenised examples of a task, without TensorFlow.

`ExampleEncoder` turns a task split's `RatedPair`s into token ids with
`seahorse_metrics.data.inputs.encode_pair` (so the tasks and the scorer build
identical inputs) and keeps, per split, compact numpy arrays plus the
metadata the evaluator breaks results down by. The seqio source and the
non-seqio fast path (`examples_for_task`) both read these arrays.

Inputs depend only on the premise, the hypothesis and (for query-focused
summaries) the pair's question text, not on the SEAHORSE question number,
so the six SEAHORSE tasks share one encoding of each row.

Targets are `1`/`0` + EOS. With `eval_targets="positive"` every split but
`train` gets the target `1` alone (the piece `▁1`, no EOS) whatever the label,
so a model's score of the target (T5X's score mode) is log P("1") at the
first decoder step; the label stays in the `label` feature (see
`seahorse_metrics.tasks.metrics`).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, Optional

import numpy as np

from seahorse_metrics.data.inputs import TruncationStats, encode_pair
from seahorse_metrics.data.vocab import target_token_ids
from seahorse_metrics.tasks.specs import TaskSpec

logger = logging.getLogger(__name__)

TARGET_STRINGS = {True: "1", False: "0"}
TRAIN_SPLIT = "train"
# "label": targets follow the labels in every split; "positive": outside the
# train split every target is `1`, to be scored (T5X's evaluation).
EVAL_TARGETS = ("label", "positive")
# Features every example carries besides `inputs` and `targets`.
METADATA_FEATURES = ("id", "lang", "source", "system", "rating", "label", "question", "truncated")


@dataclasses.dataclass(frozen=True)
class _Encoded:
    ids: np.ndarray
    truncated: bool
    hypothesis_cut: bool


@dataclasses.dataclass
class TaskExamples:
    """The tokenised examples of one task split, in source order.

    Attributes:
      task: Task name.
      split: Split name.
      inputs: int32 token ids per example (EOS included).
      targets: int32 token ids per example (`1`/`0` + EOS).
      metadata: Feature name -> numpy array with one value per example
        (`id`, `lang`, `source`, `system` as str; `rating` float32, NaN when
        unknown; `label`, `question`, `truncated` int32).
      stats: Truncation counts by language.
    """

    task: str
    split: str
    inputs: list[np.ndarray]
    targets: list[np.ndarray]
    metadata: dict[str, np.ndarray]
    stats: TruncationStats

    def __len__(self) -> int:
        return len(self.inputs)

    def example(self, index: int) -> dict[str, Any]:
        """One example as a dict of numpy values (the seqio features)."""
        features = {"inputs": self.inputs[index], "targets": self.targets[index]}
        features.update({k: v[index] for k, v in self.metadata.items()})
        return features


class ExampleEncoder:
    """Encodes task splits with one tokenizer, length and truncation mode.

    Args:
      tokenizer: A `SentencePieceTokenizer` (or anything with encode, decode,
        eos_id) of the task vocabulary.
      input_length: Maximum input length in tokens, EOS included.
      truncation: `summary_first` or `joint` (see `encode_pair`).
      eval_targets: `label` or `positive` (see the module docstring).
    """

    def __init__(self, tokenizer, input_length: int, truncation: str, eval_targets: str = "label"):
        if eval_targets not in EVAL_TARGETS:
            raise ValueError(f"unknown eval_targets {eval_targets!r}; choose one of {EVAL_TARGETS}")
        self.tokenizer = tokenizer
        self.input_length = input_length
        self.truncation = truncation
        self.eval_targets = eval_targets
        positive_id, _ = target_token_ids(
            tokenizer
        )  # Refuses a vocabulary that cannot score `1` vs `0`.
        self.targets = {
            label: np.asarray(tokenizer.encode(text) + [tokenizer.eos_id], dtype=np.int32)
            for label, text in TARGET_STRINGS.items()
        }
        self.scored_target = np.asarray([positive_id], dtype=np.int32)
        self._inputs: dict[tuple, _Encoded] = {}
        self._splits: dict[tuple[str, str], TaskExamples] = {}

    @property
    def target_length(self) -> int:
        """Length of the longest target (`1`/`0` + EOS)."""
        return max(len(t) for t in self.targets.values())

    def examples(self, spec: TaskSpec, split: str) -> TaskExamples:
        """The (cached) tokenised examples of a task split.

        Raises:
          ValueError: if a pair has no binary label (continuous ratings read
            without a threshold cannot give `1`/`0` targets).
        """
        key = (spec.name, split)
        if key not in self._splits:
            self._splits[key] = self._encode_split(spec, split)
        return self._splits[key]

    def _encode(
        self, premise: str, hypothesis: str, pair_id: str, question: Optional[str] = None
    ) -> _Encoded:
        # Python caches str hashes, so this key costs little; it shares the
        # encoding of a row between tasks that read the same file.
        key = (pair_id, hash(premise), hash(hypothesis), len(premise), len(hypothesis), question)
        cached = self._inputs.get(key)
        if cached is None:
            pair = encode_pair(
                self.tokenizer, premise, hypothesis, self.input_length, self.truncation, question
            )
            cached = _Encoded(
                np.asarray(pair.ids, dtype=np.int32), pair.truncated, pair.hypothesis_cut
            )
            self._inputs[key] = cached
        return cached

    def _encode_split(self, spec: TaskSpec, split: str) -> TaskExamples:
        pairs = spec.read(split)
        unlabelled = sum(p.label is None for p in pairs)
        if unlabelled:
            raise ValueError(
                f"task {spec.name}: {unlabelled} of {len(pairs)} pairs in {spec.files[split]} have "
                "no binary label; give the ratings file a threshold to binarise its ratings"
            )
        stats = TruncationStats()
        inputs, truncated = [], []
        for pair in pairs:
            encoded = self._encode(pair.premise, pair.hypothesis, pair.id, pair.question)
            stats.add(encoded, pair.lang)
            inputs.append(encoded.ids)
            truncated.append(encoded.truncated)
        stats.log(f"{spec.name}:{split}", self.input_length)
        metadata = {
            "id": np.asarray([p.id for p in pairs], dtype=object),
            "lang": np.asarray([p.lang or "" for p in pairs], dtype=object),
            "source": np.asarray([p.source or "" for p in pairs], dtype=object),
            "system": np.asarray([p.system or "" for p in pairs], dtype=object),
            "rating": np.asarray(
                [np.nan if p.rating is None else p.rating for p in pairs], dtype=np.float32
            ),
            "label": np.asarray([int(p.label) for p in pairs], dtype=np.int32),
            "question": np.full(len(pairs), spec.question, dtype=np.int32),
            "truncated": np.asarray(truncated, dtype=np.int32),
        }
        return TaskExamples(
            task=spec.name,
            split=split,
            inputs=inputs,
            targets=self._targets(pairs, split),
            metadata=metadata,
            stats=stats,
        )

    def _targets(self, pairs, split: str) -> list[np.ndarray]:
        if self.eval_targets == "positive" and split != TRAIN_SPLIT:
            return [self.scored_target] * len(pairs)
        return [self.targets[bool(p.label)] for p in pairs]

    def length_report(self, spec: TaskSpec, split: Optional[str] = None) -> dict[str, Any]:
        """Truncation counts of a task, per split (all splits when None)."""
        splits = [split] if split is not None else list(spec.splits)
        return {
            "task": spec.name,
            "input_length": self.input_length,
            "truncation": self.truncation,
            "splits": {s: self.examples(spec, s).stats.summary() for s in splits},
        }
