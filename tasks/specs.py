"""Which tasks exist and where their rated pairs come from (no TensorFlow here).

A `TaskSpec` names a task, its splits, the file behind each split and the
reader that turns the file into `RatedPair`s. `build_task_specs` derives
all specs from the arguments of `seahorse_metrics.tasks.register`:

* `seahorse_q1` ... `seahorse_q6`: the prepared SEAHORSE JSONL
  (`{train,validation,test}.jsonl` in `data_dir`), Yes/No ratings of
  that question only.
* `mface_quality`, `mface_attribution`, `mface_informativeness`: the mFACE
  sheet, split `test`.
* `true_<name>`: each CSV of a TRUE directory, split `test`.
* `ratings_<name>`: generic rated files, split `test`.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from seahorse_metrics.data import mface, ratings, seahorse, true
from seahorse_metrics.data.records import QUESTIONS, RatedPair

EVAL_SPLIT = "test"
SEAHORSE_MIXTURE = "seahorse_all"

RatingsFiles = Union[Sequence[str], Mapping[str, Union[str, Mapping[str, Any]]]]


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """One task: its splits, their files and how to read them.

    Attributes:
      name: Task name (a valid seqio name).
      files: Split -> file.
      reader: File -> RatedPairs (labels must be binary for a task).
      question: The SEAHORSE question the task measures (mFACE and TRUE map
        to their SEAHORSE counterpart; 0 when there is none).
      family: `seahorse`, `mface`, `true` or `ratings`.
    """

    name: str
    files: Mapping[str, str]
    reader: Callable[[str], list[RatedPair]]
    question: int
    family: str

    @property
    def splits(self) -> tuple[str, ...]:
        return tuple(self.files)

    def read(self, split: str) -> list[RatedPair]:
        """The rated pairs of a split."""
        if split not in self.files:
            raise ValueError(f"task {self.name!r} has no split {split!r}; it has {self.splits}")
        return self.reader(self.files[split])


def task_name_part(text: str) -> str:
    """`text` made safe for a seqio task name (letters, digits, `_`)."""
    cleaned = re.sub(r"[^0-9A-Za-z_]+", "_", text).strip("_").lower()
    if not cleaned:
        raise ValueError(f"cannot make a task name from {text!r}")
    return cleaned


def mixture_specs(specs: Sequence[TaskSpec]) -> dict[str, TaskSpec]:
    """The specs `SEAHORSE_MIXTURE` mixes (the SEAHORSE questions'), by name, in seqio's
    order of a mixture's tasks (sorted by name)."""
    return {s.name: s for s in sorted(specs, key=lambda s: s.name) if s.family == "seahorse"}


def seahorse_specs(data_dir: str) -> list[TaskSpec]:
    """`seahorse_q1..q6` over the prepared splits present in `data_dir`.

    Raises:
      FileNotFoundError: if `data_dir` holds none of the prepared splits.
    """
    files = {
        split: os.path.join(data_dir, f"{split}.jsonl")
        for split in seahorse.SPLITS
        if os.path.isfile(os.path.join(data_dir, f"{split}.jsonl"))
    }
    if not files:
        raise FileNotFoundError(
            f"{data_dir}: no prepared SEAHORSE split (train/validation/test.jsonl); run "
            "`seahorse-metrics prepare --release_dir ... --output_dir "
            f"{data_dir}` first"
        )
    return [
        TaskSpec(
            name=f"seahorse_q{q}",
            files=files,
            reader=functools.partial(seahorse.prepared_pairs, question=q),
            question=q,
            family="seahorse",
        )
        for q in QUESTIONS
    ]


def mface_specs(path: str, threshold: float, languages: Optional[Sequence[str]]) -> list[TaskSpec]:
    """`mface_{quality,attribution,informativeness}` over one mFACE sheet."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: mFACE sheet not found")
    return [
        TaskSpec(
            name=f"mface_{question}",
            files={EVAL_SPLIT: path},
            reader=functools.partial(
                mface.read_mface, question=question, threshold=threshold, languages=languages
            ),
            question=mface.MFACE_TO_SEAHORSE[question],
            family="mface",
        )
        for question in mface.MFACE_QUESTIONS
    ]


def true_specs(true_dir: str) -> list[TaskSpec]:
    """`true_<name>` for each CSV of a TRUE directory (attribution, SEAHORSE Q4)."""
    return [
        TaskSpec(
            name=f"true_{task_name_part(name)}",
            files={EVAL_SPLIT: file},
            reader=functools.partial(true.read_true_file, name=name),
            question=4,
            family="true",
        )
        for name, file in true.list_true_files(true_dir).items()
    ]


def normalise_ratings_files(ratings_files: RatingsFiles) -> tuple[tuple[str, str, tuple], ...]:
    """`(name, path, read_ratings kwargs as sorted items)` for each ratings file.

    A sequence of paths names each task by its file stem; a mapping gives the
    names, with a path or a dict `{"path": ..., **read_ratings kwargs}`.
    """
    if isinstance(ratings_files, (str, os.PathLike)):
        ratings_files = [os.fspath(ratings_files)]
    if not isinstance(ratings_files, Mapping):
        ratings_files = {
            os.path.splitext(os.path.basename(os.fspath(p)))[0]: os.fspath(p) for p in ratings_files
        }
    entries = []
    for name, value in ratings_files.items():
        options = dict(value) if isinstance(value, Mapping) else {"path": value}
        if "path" not in options:
            raise ValueError(f"ratings file {name!r}: give its path as {{'path': ...}}")
        path = os.path.abspath(os.fspath(options.pop("path")))
        entries.append((task_name_part(name), path, tuple(sorted(options.items()))))
    return tuple(sorted(entries))


def ratings_specs(entries: tuple[tuple[str, str, tuple], ...]) -> list[TaskSpec]:
    """`ratings_<name>` for each normalised ratings entry."""
    specs = []
    for name, path, options in entries:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path}: ratings file for task ratings_{name} not found")
        specs.append(
            TaskSpec(
                name=f"ratings_{name}",
                files={EVAL_SPLIT: path},
                reader=functools.partial(ratings.read_ratings, **dict(options)),
                question=0,
                family="ratings",
            )
        )
    return specs
