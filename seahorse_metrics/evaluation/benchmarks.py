"""Meta-evaluation benchmarks: human-rated pairs grouped into report columns.

A benchmark spec names a reader and a path, optionally followed by a colon and
comma-separated options::

    seahorse:DIR[:q4[,q1,...]][,split=test]   prepared SEAHORSE dir (or a split .jsonl)
    mface:FILE[:q1,q4,q6][,threshold=T]       mFACE sheet, 5-language subset and all languages
    true:DIR_OR_CSV                           TRUE-style CSV(s), one column per file
    ratings:FILE[:rating=F,premise=F,hypothesis=F,id=F,question=F,threshold=T]
    aggrefact:FILE_OR_DIR[:split=test]        LLM-AggreFact, one column per dataset
    summac:FILE[:cut=test]                    SummaC benchmark rows, one column per dataset

mface, true, ratings, aggrefact and summac files are read as UTF-8 unless an
`encoding=E` option names their encoding (e.g. `true:csvs:encoding=latin-1`).

SEAHORSE gives one benchmark per question (`seahorse/q4`; all six by
default) on the `test` split of a prepared directory; `split=validation` or a
path to a `.jsonl` split picks another. mFACE gives, for each of its three
questions, labelled by its SEAHORSE counterpart (quality -> q1, attribution ->
q4, informativeness -> q6), a benchmark on the languages SEAHORSE shares
(`mface-5lang/q4`) and on all languages (`mface-all/q4`). TRUE gives
`true/<file stem>` per CSV. A ratings file gives `ratings/<file stem>`.
LLM-AggreFact gives `aggrefact/<dataset>` per dataset of the split (`test`
by default, `split=dev` for tuning thresholds) and SummaC `summac/<dataset>`
per dataset of the cut (`test`, or `cut=val`); the report adds the mean over
a family's columns, as those leaderboards do.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import logging
import os
import re
from typing import Optional, Sequence

import numpy as np

from seahorse_metrics.data.records import QUESTION_NAMES, QUESTIONS, RatedPair

logger = logging.getLogger(__name__)

BENCHMARK_KINDS = ("seahorse", "mface", "true", "ratings", "aggrefact", "summac")
# Systems whose summaries are human-written references (model-only vs
# reference-only breakdowns).
REFERENCE_SYSTEMS = frozenset({"reference", "references", "human", "gold", "ref"})
_QUESTION_TOKEN = re.compile(r"^q(\d+)$", re.IGNORECASE)
_OPTION_TOKEN = re.compile(r"^(q\d+|[a-z_]+=.*)$", re.IGNORECASE)
_SPEC_HELP = (
    "benchmark specs are seahorse:DIR[:q4], mface:FILE[:q1,q4,q6], true:DIR_OR_CSV, "
    "ratings:FILE[:rating=FIELD,threshold=T], aggrefact:FILE_OR_DIR[:split=dev|test], "
    "summac:FILE[:cut=val|test]"
)


def _read_only(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


@dataclasses.dataclass(frozen=True)
class Benchmark:
    """Human-rated pairs that make one column of the report.

    Attributes:
      name: Unique id, `<family>/<column>` (e.g. `seahorse/q4`, `true/frank`).
      family: Groups columns into one table (`seahorse`, `mface-5lang`, ...).
      column: Column label within the family (`q4`, `frank`).
      description: One line for humans (source file, question, subset).
      items: The pairs, ids unique.
    """

    name: str
    family: str
    column: str
    description: str
    items: tuple[RatedPair, ...]

    def __post_init__(self):
        seen: set[str] = set()
        for item in self.items:
            if item.id in seen:
                raise ValueError(f"benchmark {self.name}: duplicate item id {item.id!r}")
            seen.add(item.id)
        unlabelled = sum(item.label is None for item in self.items)
        if 0 < unlabelled < len(self.items):
            raise ValueError(
                f"benchmark {self.name}: {unlabelled} of {len(self.items)} items have no "
                "binary label; label all items (e.g. a ratings threshold) or none"
            )
        missing = [item.id for item in self.items if item.rating is None and item.label is None]
        if missing:
            raise ValueError(
                f"benchmark {self.name}: {len(missing)} items have neither a label nor a "
                f"rating (first: {missing[0]!r})"
            )

    def __len__(self) -> int:
        return len(self.items)

    @property
    def has_labels(self) -> bool:
        return bool(self.items) and self.items[0].label is not None

    @functools.cached_property
    def labels(self) -> np.ndarray:
        """Binary labels (read-only array); only when `has_labels`."""
        if not self.has_labels:
            raise ValueError(f"benchmark {self.name} has no binary labels")
        return _read_only(np.array([item.label for item in self.items], dtype=bool))

    @functools.cached_property
    def ratings(self) -> np.ndarray:
        """The raw rating per item (the 0/1 label where no rating is given)."""
        return _read_only(
            np.array(
                [
                    float(item.label) if item.rating is None else float(item.rating)
                    for item in self.items
                ],
                dtype=np.float64,
            )
        )

    @property
    def continuous(self) -> bool:
        """True when ratings take values other than 0 and 1."""
        ratings = self.ratings
        return bool(np.any((ratings != 0.0) & (ratings != 1.0)))

    @property
    def ids(self) -> list[str]:
        return [item.id for item in self.items]

    @functools.cached_property
    def _content_fingerprint(self) -> str:
        digest = hashlib.sha256()
        for item in self.items:
            for text in (item.id, item.premise, item.hypothesis, item.question or ""):
                digest.update(text.encode("utf-8"))
                digest.update(b"\x00")
        return digest.hexdigest()

    def content_fingerprint(self) -> str:
        """Hash of the ids and texts (premise, hypothesis, question) in order
        (not the judgments).

        Scores of a metric that reads only those texts stay valid as long as
        this does not change.
        """
        return self._content_fingerprint

    def summary(self) -> dict:
        """Counts for the report."""
        info = {
            "name": self.name,
            "family": self.family,
            "column": self.column,
            "description": self.description,
            "n": len(self.items),
            "continuous": self.continuous,
            "has_labels": self.has_labels,
        }
        if self.has_labels:
            n_pos = int(self.labels.sum())
            info.update(n_positive=n_pos, n_negative=len(self.items) - n_pos)
        for field in ("lang", "source", "system"):
            info[f"{field}s"] = sorted({getattr(i, field) for i in self.items if getattr(i, field)})
        return info


@dataclasses.dataclass(frozen=True)
class BenchmarkSpec:
    """A parsed benchmark spec.

    Attributes:
      kind: One of `BENCHMARK_KINDS`.
      path: The file or directory.
      questions: SEAHORSE question numbers selected (empty = the reader's default).
      options: Further `key=value` options.
    """

    kind: str
    path: str
    questions: tuple[int, ...] = ()
    options: tuple[tuple[str, str], ...] = ()

    def option(self, key: str, default: Optional[str] = None) -> Optional[str]:
        return dict(self.options).get(key, default)


def parse_benchmark_spec(text: str) -> BenchmarkSpec:
    """Parses `KIND:PATH[:OPTIONS]` (see the module docstring).

    Raises:
      ValueError: Unknown kind, empty path or malformed options.
    """
    kind, sep, rest = text.partition(":")
    if not sep or kind not in BENCHMARK_KINDS or not rest:
        raise ValueError(f"bad benchmark spec {text!r}: {_SPEC_HELP}")
    path, questions, options = rest, [], []
    head, sep, tail = rest.rpartition(":")
    tokens = [t.strip() for t in tail.split(",") if t.strip()] if sep else []
    if sep and head and tokens and all(_OPTION_TOKEN.match(t) for t in tokens):
        path = head
        for token in tokens:
            match = _QUESTION_TOKEN.match(token)
            if match:
                if int(match.group(1)) not in QUESTIONS:
                    raise ValueError(
                        f"bad benchmark spec {text!r}: unknown question {token}; "
                        f"the questions are q1 ... q{QUESTIONS[-1]}"
                    )
                questions.append(int(match.group(1)))
            else:
                key, _, value = token.partition("=")
                options.append((key.lower(), value))
    known = {
        "seahorse": {"split"},
        "mface": {"threshold", "encoding"},
        "true": {"encoding"},
        "ratings": {"rating", "premise", "hypothesis", "id", "question", "threshold", "encoding"},
        "aggrefact": {"split", "encoding"},
        "summac": {"cut", "encoding"},
    }[kind]
    unknown = sorted({key for key, _ in options} - known)
    if unknown:
        raise ValueError(
            f"bad benchmark spec {text!r}: unknown option(s) {unknown} for {kind} "
            f"(known: {sorted(known) or 'none'})"
        )
    if questions and kind not in ("seahorse", "mface"):
        raise ValueError(f"bad benchmark spec {text!r}: {kind} takes no question")
    return BenchmarkSpec(kind, path, tuple(dict.fromkeys(questions)), tuple(options))


def _float_option(spec: BenchmarkSpec, key: str) -> Optional[float]:
    value = spec.option(key)
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"{spec.kind}:{spec.path}: option {key}={value!r} is not a number")


def _seahorse_benchmarks(spec: BenchmarkSpec) -> list[Benchmark]:
    from seahorse_metrics.data.seahorse import prepared_pairs

    path = spec.path
    if os.path.isdir(path):
        path = os.path.join(path, f"{spec.option('split', 'test')}.jsonl")
    elif spec.option("split"):
        raise ValueError(f"seahorse:{spec.path}: split= needs a prepared directory, not a file")
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"SEAHORSE split {path} not found; run `seahorse-metrics prepare` to build a "
            "prepared directory, or point at one of its .jsonl files"
        )
    split = os.path.splitext(os.path.basename(path))[0]
    benchmarks = []
    for question in spec.questions or QUESTIONS:
        items = prepared_pairs(path, question)
        benchmarks.append(
            Benchmark(
                name=f"seahorse/q{question}",
                family="seahorse",
                column=f"q{question}",
                description=f"SEAHORSE {split} ({path}), Q{question} {QUESTION_NAMES[question]}",
                items=tuple(items),
            )
        )
    return benchmarks


def _mface_benchmarks(spec: BenchmarkSpec) -> list[Benchmark]:
    from seahorse_metrics.data import mface

    if not os.path.isfile(spec.path):
        raise FileNotFoundError(f"mFACE file {spec.path} not found")
    to_question = dict(mface.MFACE_TO_SEAHORSE)
    wanted = spec.questions or tuple(sorted(to_question.values()))
    by_question = {q: name for name, q in to_question.items()}
    missing = [q for q in wanted if q not in by_question]
    if missing:
        raise ValueError(
            f"mface:{spec.path}: mFACE has no counterpart of q{missing[0]}; "
            f"choose from {sorted(by_question)}"
        )
    threshold = _float_option(spec, "threshold")
    kwargs = {} if threshold is None else {"threshold": threshold}
    kwargs["encoding"] = spec.option("encoding", "utf-8")
    subsets = (
        ("mface-5lang", tuple(mface.SEAHORSE_SHARED_LANGS), "the languages shared with SEAHORSE"),
        ("mface-all", None, "all languages"),
    )
    benchmarks = []
    for question in wanted:
        name = by_question[question]
        for family, languages, what in subsets:
            items = mface.read_mface(spec.path, name, languages=languages, **kwargs)
            benchmarks.append(
                Benchmark(
                    name=f"{family}/q{question}",
                    family=family,
                    column=f"q{question}",
                    description=f"mFACE {name} (as SEAHORSE Q{question}), {what} ({spec.path})",
                    items=tuple(items),
                )
            )
    return benchmarks


def _true_benchmarks(spec: BenchmarkSpec) -> list[Benchmark]:
    from seahorse_metrics.data.true import read_true

    if not os.path.exists(spec.path):
        raise FileNotFoundError(f"TRUE path {spec.path} not found")
    return [
        Benchmark(
            name=f"true/{name}",
            family="true",
            column=name,
            description=f"TRUE {name} ({spec.path})",
            items=tuple(items),
        )
        for name, items in sorted(read_true(spec.path, spec.option("encoding", "utf-8")).items())
    ]


def _ratings_benchmarks(spec: BenchmarkSpec) -> list[Benchmark]:
    from seahorse_metrics.data.ratings import read_ratings

    if not os.path.isfile(spec.path):
        raise FileNotFoundError(f"ratings file {spec.path} not found")
    fields = {
        "rating": "rating_field",
        "premise": "premise_field",
        "hypothesis": "hypothesis_field",
        "id": "id_field",
        "question": "question_field",
        "encoding": "encoding",
    }
    kwargs = {arg: spec.option(key) for key, arg in fields.items() if spec.option(key)}
    threshold = _float_option(spec, "threshold")
    if threshold is not None:
        kwargs["threshold"] = threshold
    items = read_ratings(spec.path, **kwargs)
    stem = os.path.splitext(os.path.basename(spec.path))[0]
    return [
        Benchmark(
            name=f"ratings/{stem}",
            family="ratings",
            column=stem,
            description=f"ratings file {spec.path}",
            items=tuple(items),
        )
    ]


def _by_dataset(family: str, what: str, by_dataset: dict) -> list[Benchmark]:
    return [
        Benchmark(
            name=f"{family}/{name}",
            family=family,
            column=name,
            description=f"{what}, {name}",
            items=tuple(items),
        )
        for name, items in by_dataset.items()
    ]


def _aggrefact_benchmarks(spec: BenchmarkSpec) -> list[Benchmark]:
    from seahorse_metrics.data.factcheck import read_aggrefact

    split = spec.option("split", "test")
    if spec.option("split") and os.path.isfile(spec.path):
        raise ValueError(
            f"aggrefact:{spec.path}: split= needs a directory of split files, "
            "not a file (the file is one split)"
        )
    return _by_dataset(
        "aggrefact",
        f"LLM-AggreFact {split} ({spec.path})",
        read_aggrefact(spec.path, split, spec.option("encoding", "utf-8")),
    )


def _summac_benchmarks(spec: BenchmarkSpec) -> list[Benchmark]:
    from seahorse_metrics.data.factcheck import read_summac

    if not os.path.isfile(spec.path):
        raise FileNotFoundError(f"SummaC file {spec.path} not found")
    cut = spec.option("cut", "test")
    return _by_dataset(
        "summac",
        f"SummaC {cut} ({spec.path})",
        read_summac(spec.path, cut, spec.option("encoding", "utf-8")),
    )


_LOADERS = {
    "seahorse": _seahorse_benchmarks,
    "mface": _mface_benchmarks,
    "true": _true_benchmarks,
    "ratings": _ratings_benchmarks,
    "aggrefact": _aggrefact_benchmarks,
    "summac": _summac_benchmarks,
}


def load_benchmarks(specs: Sequence[str]) -> list[Benchmark]:
    """Reads every benchmark that the specs name, in order.

    A benchmark without items (e.g. an mFACE language subset the sheet does
    not cover) is left out with a warning.

    Raises:
      ValueError: A malformed spec, a spec without any rated item, or two
        benchmarks with the same name.
      FileNotFoundError: A path that does not exist.
    """
    benchmarks: list[Benchmark] = []
    for text in specs:
        spec = parse_benchmark_spec(text)
        loaded = _LOADERS[spec.kind](spec)
        for empty in (b for b in loaded if not b.items):
            # e.g. an mFACE sheet without any of the languages SEAHORSE shares.
            logger.warning("benchmark %s has no items and is left out", empty.name)
        loaded = [b for b in loaded if b.items]
        if not loaded:
            raise ValueError(
                f"benchmark spec {text!r} gave no rated items; check the file "
                "and the questions/options it names"
            )
        benchmarks.extend(loaded)
    names = [b.name for b in benchmarks]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"benchmark names occur twice: {duplicates}; give each spec once")
    return benchmarks


def subset_of(item: RatedPair) -> Optional[str]:
    """ "reference" for human-written summaries, "model" otherwise, None if unknown."""
    if not item.system:
        return None
    return "reference" if item.system.strip().lower() in REFERENCE_SYSTEMS else "model"
