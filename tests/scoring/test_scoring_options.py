"""One scoring-options type and one table of how it is set (issue 45 point 2)."""

import dataclasses

import pytest

from seahorse_metrics.cli import parse_args
from seahorse_metrics.evaluation import metrics as metrics_lib
from seahorse_metrics.scoring.options import (
    CHECKPOINT_OPTIONS,
    OPTION_FLAGS,
    PYTHON_ONLY,
    ScoringOptions,
    options_from_flags,
    options_from_spec,
)

SCORE = ["score", "--checkpoint", "m", "--input", "in.jsonl", "--output", "out.jsonl"]
SERVE = ["serve", "--checkpoint", "m"]


def test_every_option_has_one_row_or_is_python_only():
    fields = [field.name for field in dataclasses.fields(ScoringOptions)]
    rows = [entry.field for entry in OPTION_FLAGS]
    assert len(rows) == len(set(rows))
    assert sorted(rows + list(PYTHON_ONLY)) == sorted(fields)


@pytest.mark.parametrize("command", [SCORE, SERVE])
def test_score_and_serve_take_every_flag_and_their_defaults_are_the_options(command):
    args = parse_args(command)
    assert options_from_flags(args) == ScoringOptions()


def test_flags_set_the_options_through_the_table():
    args = parse_args(
        SCORE
        + [
            "--buckets",
            "64,128",
            "--int8_check",
            "off",
            "--per_sentence",
            "--engine_option",
            "threads=2",
            "--max_input_length",
            "256",
            "--int8_min_spearman",
            "0.9",
        ]
    )
    options = options_from_flags(args)
    assert options == ScoringOptions(
        bucket_lengths=(64, 128),
        int8_check=False,
        per_sentence=True,
        engine_options={"threads": 2},
        max_input_length=256,
        int8_min_spearman=0.9,
    )


def test_checkpoint_specs_take_the_tables_spec_keys():
    spec = metrics_lib.parse_metric_spec(
        "checkpoint:d,engine=ctranslate2,quantize=int8,max_input_length=64,per_sentence=mean"
    )
    assert options_from_spec(spec.settings) == {
        "engine": "ctranslate2",
        "quantize": "int8",
        "max_input_length": 64,
        "per_sentence": True,
        "sentence_aggregate": "mean",
    }
    assert set(CHECKPOINT_OPTIONS) == {
        "long_inputs",
        "per_sentence",
        "normalize",
        "max_input_length",
        "vocab",
        "long_summaries",
        "engine",
        "quantize",
    }
    with pytest.raises(ValueError, match="max_input_length='x' is not a whole number"):
        options_from_spec((("max_input_length", "x"),))
    with pytest.raises(ValueError, match="'batch_size' is not a checkpoint option"):
        options_from_spec((("batch_size", "8"),))
