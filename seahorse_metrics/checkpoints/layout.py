"""What a metric directory holds, by name, for scoring, training and export alike.

A metric checkpoint directory (`MODEL_DIR/best`, an export, a Hugging Face
or T5X directory) holds, besides its weights:

* `spiece.model` (`VOCAB_FILE`): the SentencePiece vocabulary; for a step
  directory (`checkpoint_<step>`) it may sit in the parent instead.
* `seahorse_inputs.json` (`INPUTS_FILE`): optional input settings the metric
  was trained with, e.g. `{"question_template": "query: {question} ..."}`.
* `best.json` (`BEST_RECORD`): in `MODEL_DIR/best`, the step and validation
  result that made it the best.
* `questions.json` (`QUESTIONS_FILE`): only beside a multi-question metric,
  the decoder prefix (token ids) of each of its questions
  (`model.questions.QuestionPrefixes`); scorers read such a checkpoint as
  one metric per question.

A training run's `MODEL_DIR` holds `checkpoints/` (`RUN_CHECKPOINTS_DIR`) and
`best/` (`BEST_DIR`). `checkpoint_names` is the one rule that names
checkpoints given without a name (output columns, metric names).
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional, Sequence, Union

from seahorse_metrics.data.inputs import check_question_template
from seahorse_metrics.io.atomic import write_json_atomically
from seahorse_metrics.io.json_files import read_json
from seahorse_metrics.model.questions import QuestionPrefixes

VOCAB_FILE = "spiece.model"
INPUTS_FILE = "seahorse_inputs.json"
BEST_RECORD = "best.json"
QUESTIONS_FILE = "questions.json"
BEST_DIR = "best"
RUN_CHECKPOINTS_DIR = "checkpoints"
# The name of the one metric of a `Scorer`, and of a single unnamed checkpoint.
SINGLE_NAME = "score"


def _own_or_parent(checkpoint_path: str, file_name: str) -> Optional[str]:
    """`file_name` in the checkpoint directory or, for a step directory, its parent."""
    for directory in (checkpoint_path, os.path.dirname(os.path.abspath(checkpoint_path))):
        candidate = os.path.join(directory, file_name)
        if os.path.isfile(candidate):
            return candidate
    return None


def find_vocabulary(checkpoint_path: str) -> Optional[str]:
    """Returns `spiece.model` in the checkpoint directory (or, for a step
    directory, in its parent), else the vocabulary a T5X run's `config.gin`
    there names (`checkpoints.t5x.run_vocabulary`), or None."""
    from seahorse_metrics.checkpoints.t5x import run_vocabulary

    return _own_or_parent(checkpoint_path, VOCAB_FILE) or run_vocabulary(checkpoint_path)[0]


def question_template(checkpoint_path: str) -> Optional[str]:
    """The question template of a checkpoint's `seahorse_inputs.json` (in its
    directory or, for a step directory, its parent), or None when it has none.

    Raises:
      ValueError: for a file that is not JSON or whose template is malformed.
    """
    candidate = _own_or_parent(checkpoint_path, INPUTS_FILE)
    if candidate is None:
        return None
    settings = read_json(candidate, "inputs file")
    template = settings.get("question_template") if isinstance(settings, dict) else None
    if template is None:
        return None
    try:
        return check_question_template(template)
    except ValueError as error:
        raise ValueError(f"{candidate}: {error}") from None


def question_prefixes(checkpoint_path: str) -> Optional[QuestionPrefixes]:
    """The questions of a multi-question metric (its `questions.json`, in its
    directory or, for a step directory, its parent), or None for a metric of
    one question.

    Raises:
      ValueError: naming the file, for one that is not a questions file.
    """
    candidate = questions_path(checkpoint_path)
    if candidate is None:
        return None
    return QuestionPrefixes.from_json(read_json(candidate, "questions file"), candidate)


def questions_path(checkpoint_path: str) -> Optional[str]:
    """The `questions.json` of a multi-question metric (see `question_prefixes`), or None."""
    return _own_or_parent(checkpoint_path, QUESTIONS_FILE)


def write_question_prefixes(
    directory: str, questions: QuestionPrefixes, texts: Optional[Sequence[str]] = None
) -> str:
    """Writes `questions.json` into `directory` (atomically); returns its path."""
    path = os.path.join(directory, QUESTIONS_FILE)
    write_json_atomically(path, questions.to_json(texts), newline=True)
    return path


def best_step(checkpoint_path: str) -> Optional[int]:
    """The step `best.json` in the directory records, or None without one."""
    record_path = os.path.join(checkpoint_path, BEST_RECORD)
    if not os.path.isfile(record_path):
        return None
    record = read_json(record_path, "best checkpoint record")
    step = record.get("step") if isinstance(record, dict) else None
    return step if isinstance(step, int) else None


def checkpoint_names(specs: Union[Mapping[str, str], Sequence[str], str]) -> dict[str, str]:
    """Name -> checkpoint path: the one naming rule of the CLI and `MultiScorer.load`.

    A mapping keeps its names. A list holds `[NAME=]DIR` specs (a path that
    exists is a path even with a `=` in it); an unnamed checkpoint is named
    `score` when it is the only one, else `score_<directory name>`
    (`_2`, `_3`, ... when two directories share a name).

    Raises:
      ValueError: for no checkpoints, or two given the same name.
    """
    if isinstance(specs, Mapping):
        named = {str(name): str(path) for name, path in specs.items()}
    else:
        specs = [specs] if isinstance(specs, (str, os.PathLike)) else list(specs)
        named = {}
        for spec in map(str, specs):
            name, sep, path = spec.partition("=")
            if not sep or os.path.exists(spec) or not name:
                name, path = "", spec
            if name in named:
                raise ValueError(f"two checkpoints would write column {name!r}; name them NAME=DIR")
            named[name or _unnamed(path, len(specs), named)] = path
    if not named:
        raise ValueError("no checkpoints given")
    return named


def column_names(metrics: Sequence[str], questions: Mapping[str, Any]) -> list[str]:
    """The output columns: a metric's name, or for a multi-question metric its
    questions' names (`q1` ... `q6`) when it is unnamed (`SINGLE_NAME`), else
    `<metric>_<question>` (`mq_q4`: apart from a prepared split's `q4` labels).

    Raises:
      ValueError: for two columns of one name.
    """
    columns = []
    for name in metrics:
        if name not in questions:
            columns.append(name)
            continue
        columns += [
            question if name == SINGLE_NAME else f"{name}_{question}"
            for question in questions[name].names
        ]
    repeated = sorted({c for c in columns if columns.count(c) > 1})
    if repeated:
        raise ValueError(f"two metrics would write column(s) {repeated}; name them apart")
    return columns


def metric_columns(checkpoints: Mapping[str, str]) -> list[str]:
    """The output columns of named checkpoints (`column_names`), each
    multi-question one found by its `questions.json`."""
    questions = {name: question_prefixes(path) for name, path in checkpoints.items()}
    return column_names(
        list(checkpoints), {name: found for name, found in questions.items() if found is not None}
    )


def _unnamed(path: str, count: int, taken: Mapping[str, str]) -> str:
    if count == 1:
        return SINGLE_NAME
    base = f"{SINGLE_NAME}_{os.path.basename(os.path.normpath(path)) or 'metric'}"
    name, suffix = base, 2
    while name in taken:
        name, suffix = f"{base}_{suffix}", suffix + 1
    return name
