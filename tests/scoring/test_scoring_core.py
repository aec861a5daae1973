"""One scoring core (issue 25): validation scores with the scorer's programs,
options round-trip, one naming rule, one windowing rule, bounded program caches."""

import json

import numpy as np
import pytest

from seahorse_metrics import MultiScorer, Scorer
from seahorse_metrics.checkpoints.layout import checkpoint_names
from seahorse_metrics.engines import jax_engine
from seahorse_metrics.scoring.options import ScoringOptions

FAST = {"xla_backend_optimization_level": 0}
PAIRS = (
    [
        "The cat sat on the mat all day long, and then it slept.",
        "Rain fell over the city at night; the streets were empty by morning.",
    ]
    * 3,
    [
        "A cat sat.",
        "It rained.",
        "A dog barked.",
        "The sun shone.",
        "Cats sleep.",
        "Streets were empty.",
    ],
)


@pytest.fixture(scope="module")
def scorer(tiny_hf_dir):
    # Default compiler options, as validation during training compiles with.
    return Scorer.load(tiny_hf_dir, bucket_lengths=(32, 64), max_input_length=64, batch_size=4)


def test_validation_scores_with_the_scorers_programs_and_numbers(scorer):
    from seahorse_metrics.training.data import ExampleSet
    from seahorse_metrics.training.validation import first_token_probabilities

    expected = scorer.score(*PAIRS)
    inputs = scorer.encode_inputs(*PAIRS)
    examples = ExampleSet.from_examples(inputs, [[scorer.positive_id, 1]] * len(inputs))
    runner = scorer.multi.engines[0]
    before = jax_engine.compiled_shape_count()
    probs = first_token_probabilities(
        runner.model,
        runner.params,
        examples,
        (scorer.positive_id, scorer.negative_id),
        batch_size=4,
        max_length=64,
        mesh=runner.mesh,
    )
    # The scorer's compiled programs, so its numbers to the last bit (no new compile).
    assert jax_engine.compiled_shape_count() == before
    np.testing.assert_array_equal(probs[:, 0], expected)


def test_scoring_options_round_trip_through_json_and_load(tiny_hf_dir):
    options = ScoringOptions(
        max_input_length=64,
        bucket_lengths=[32, 64],
        batch_size=4,
        normalize="pair",
        compiler_options=FAST,
    )
    again = ScoringOptions.from_dict(json.loads(json.dumps(options.to_dict())))
    assert again == options and again.bucket_lengths == (32, 64)
    with pytest.raises(TypeError, match="unknown scoring options: bucket_size"):
        ScoringOptions.from_dict({"bucket_size": 3})
    multi = MultiScorer.load({"q": tiny_hf_dir}, options=options, batch_size=8)
    assert multi.batch_size == 8 and multi.settings.normalize == "pair"
    assert multi.options == ScoringOptions.of(
        options,
        batch_size=8,
        vocab=multi.vocab_path,
        question_template=multi.settings.question_template,
    )


def test_one_rule_names_checkpoints_for_the_cli_and_the_library(tmp_path):
    assert checkpoint_names(["runs/q4/best"]) == {"score": "runs/q4/best"}
    assert checkpoint_names(["a/best", "b/best", "q6=c"]) == {
        "score_best": "a/best",
        "score_best_2": "b/best",
        "q6": "c",
    }
    odd = tmp_path / "x=y"
    odd.mkdir()
    assert checkpoint_names([str(odd)]) == {"score": str(odd)}
    with pytest.raises(ValueError, match="two checkpoints would write column 'q'"):
        checkpoint_names(["q=a", "q=b"])


def test_score_records_windows_rows_as_score_file_does(scorer, tmp_path):
    """A bad row holds its place in the windows: the good rows are batched, and
    scored, exactly as `score_file` batches them."""
    from seahorse_metrics.scoring.files import score_file

    records = [{"article": p, "summary": h} for p, h in zip(*PAIRS)]
    records.insert(1, {"article": "no summary"})
    multi = MultiScorer.load(
        {"score": scorer.multi.checkpoints["score"]},
        bucket_lengths=(32, 64),
        max_input_length=64,
        batch_size=4,
        window_size=3,
    )
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    score_file(multi, str(source), str(tmp_path / "out.jsonl"), show_progress=False)
    written = [json.loads(line) for line in open(tmp_path / "out.jsonl", encoding="utf-8")]
    streamed = list(multi.score_records(records))
    assert [r.get("error") for r in streamed] == [r.get("error") for r in written]
    np.testing.assert_array_equal(
        np.float32([r.get("score", 0) for r in streamed]),
        np.float32([r.get("score", 0) for r in written]),
    )


def test_program_caches_are_objects_with_a_bound():
    cache = jax_engine.ProgramCache(max_programs=2)
    made = []
    for key in ("a", "b", "a", "c", "b"):
        cache.get((key,), lambda key=key: made.append(key) or key.upper())
    assert made == ["a", "b", "c", "b"] and len(cache) == 2 and cache.compiled == 4
    assert ("c",) in cache and ("a",) not in cache
    with pytest.raises(ValueError):
        jax_engine.ProgramCache(0)
