"""Scoring a multi-question metric (issue 49): one column per question, one
model call per batch, in every mode, from Python, `score` and `serve`."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fixtures.multi_question import HYPOTHESES, PREMISES


def test_multi_scorer_reads_a_multi_question_checkpoint_as_six_columns(multi_question_dir):
    from seahorse_metrics.scoring.scorer import MultiScorer

    scorer = MultiScorer.load(
        [multi_question_dir], bucket_lengths=(32, 64), max_input_length=64, batch_size=4
    )
    assert scorer.names == ["q1", "q2", "q3", "q4", "q5", "q6"]
    # Named, its columns stay apart from a prepared split's labels q1 ... q6.
    assert MultiScorer.load(
        {"mq": multi_question_dir, "other": multi_question_dir}, max_input_length=64
    ).names[5:7] == ["mq_q6", "other_q1"]
    scores = scorer.score(PREMISES, HYPOTHESES)
    engine = scorer.engines[0]
    token_ids = (scorer.positive_id, scorer.negative_id)
    for row, ids in enumerate(scorer.encode_inputs(PREMISES, HYPOTHESES)):
        tokens = jnp.asarray([ids], jnp.int32)
        for index, (name, prefix) in enumerate(
            zip(engine.shared.questions.names, engine.shared.questions.prefixes)
        ):
            decoder = jnp.asarray([[engine.model.config.decoder_start_id, *prefix]], jnp.int32)
            logits = engine.model.logits(
                engine.params, {"encoder_input_tokens": tokens, "decoder_input_tokens": decoder}
            )
            expected = jax.nn.softmax(logits[0, len(prefix)].astype(jnp.float32))[token_ids[0]]
            np.testing.assert_allclose(scores[name][row], float(expected), atol=1e-5)
    signatures = scorer.signatures()
    assert signatures["q1"] != signatures["q2"] and "|q:q4" in signatures["q4"]


def test_multi_question_metric_runs_one_call_per_batch(multi_question_dir, monkeypatch):
    from seahorse_metrics.engines.jax_engine import JaxEngine
    from seahorse_metrics.scoring.scorer import MultiScorer

    scorer = MultiScorer.load(
        [multi_question_dir], bucket_lengths=(32, 64), max_input_length=64, batch_size=4
    )
    calls = []
    original = JaxEngine.__call__
    monkeypatch.setattr(
        JaxEngine, "__call__", lambda self, *args: calls.append(1) or original(self, *args)
    )
    scorer.score(PREMISES, HYPOTHESES)
    assert len(calls) == scorer.stats.batches == 1


def test_multi_question_metric_refuses_what_cannot_work(multi_question_dir):
    from seahorse_metrics.scoring.scorer import MultiScorer
    from seahorse_metrics.scoring.single import Scorer

    with pytest.raises(ValueError, match="multi-question metric .*MultiScorer.load"):
        Scorer.load(multi_question_dir)
    with pytest.raises(ValueError, match="packing is not supported with a multi-question"):
        MultiScorer.load({"m": multi_question_dir}, packing=True, max_input_length=64)
    with pytest.raises(
        ValueError, match="m: a multi-question metric is scored by the jax engine only"
    ):
        MultiScorer.load({"m": multi_question_dir}, engine="ctranslate2", max_input_length=64)


def test_score_command_writes_a_column_per_question(tmp_path, multi_question_dir):
    import json

    from seahorse_metrics.cli import main as cli_main
    from seahorse_metrics.scoring.scorer import MultiScorer

    source = tmp_path / "pairs.jsonl"
    source.write_text(
        "".join(
            json.dumps({"article": p, "summary": h}) + "\n" for p, h in zip(PREMISES, HYPOTHESES)
        )
    )
    output = str(tmp_path / "scored.jsonl")
    assert (
        cli_main(
            [
                "score",
                "--checkpoint",
                multi_question_dir,
                "--input",
                str(source),
                "--output",
                output,
                "--max_input_length",
                "64",
                "--buckets",
                "32,64",
                "--batch_size",
                "4",
                "--threshold",
                "0.5",
            ]
        )
        == 0
    )
    rows = [json.loads(line) for line in open(output)]
    expected = MultiScorer.load(
        [multi_question_dir], bucket_lengths=(32, 64), max_input_length=64, batch_size=4
    ).score(PREMISES, HYPOTHESES)
    for name in ("q1", "q2", "q3", "q4", "q5", "q6"):
        np.testing.assert_allclose([r[name] for r in rows], expected[name], atol=1e-6)
        # A threshold per question: each column gets its decision.
        assert [r[f"{name}_decision"] for r in rows] == [
            "yes" if score >= 0.5 else "no" for score in expected[name]
        ]

    # The Beam runner (in this process) writes the same columns.
    from seahorse_metrics.scoring import beam as beam_scoring

    beam_output = str(tmp_path / "beam.jsonl")
    beam_scoring.score_files(
        [str(source)],
        beam_output,
        {"score": multi_question_dir},
        scorer_options={"max_input_length": 64, "bucket_lengths": (32, 64), "batch_size": 4},
        pipeline_args=["--runner=FnApiRunner", "--direct_running_mode=in_memory"],
        merge=True,
        show_progress=False,
    )
    beam_rows = [json.loads(line) for line in open(beam_output)]
    for name in ("q1", "q6"):
        np.testing.assert_allclose([r[name] for r in beam_rows], expected[name], atol=1e-6)


def test_multi_question_metric_scores_in_int8(multi_question_dir, monkeypatch, tmp_path):
    from seahorse_metrics.scoring.scorer import MultiScorer

    shape = dict(bucket_lengths=(32, 64), max_input_length=64, batch_size=4)
    float32 = MultiScorer.load([multi_question_dir], **shape).score(PREMISES, HYPOTHESES)
    # The int8 self-check (off in the suite) runs once for the checkpoint.
    monkeypatch.setenv("SEAHORSE_METRICS_INT8_CHECK", "on")
    monkeypatch.setenv("SEAHORSE_METRICS_CACHE", str(tmp_path / "cache"))
    int8 = MultiScorer.load({"mq": multi_question_dir}, quantize="int8", **shape)
    assert int8.engines[0].quantization().startswith("int8")
    assert list(int8.metadata()["int8_check"]) == ["mq"]
    scores = int8.score(PREMISES, HYPOTHESES)
    for name in float32:
        np.testing.assert_allclose(scores[f"mq_{name}"], float32[name], atol=0.02)


def test_multi_question_modes_per_sentence_chunks_and_query_questions(multi_question_dir):
    from seahorse_metrics.scoring.scorer import MultiScorer

    shape = dict(bucket_lengths=(32, 64), max_input_length=64, batch_size=4)
    names = ["q1", "q2", "q3", "q4", "q5", "q6"]
    plain = MultiScorer.load([multi_question_dir], **shape)
    # Per sentence: each sentence scores as the pair (premise, sentence), per question.
    per_sentence = MultiScorer.load([multi_question_dir], per_sentence=True, **shape)
    detailed = per_sentence.score_detailed(PREMISES[:1], ["a cat sat. it looked at a dog."])
    sentences = detailed.sentences[0]
    alone = plain.score(PREMISES[:1] * len(sentences), sentences)
    for name in names:
        np.testing.assert_allclose(detailed.sentence_scores[name][0], alone[name], atol=1e-6)
        assert detailed.scores[name][0] == pytest.approx(min(alone[name]))
    # Chunked premises: inputs that fit score as without chunks; long ones score.
    chunked = MultiScorer.load([multi_question_dir], long_inputs="chunk", **shape)
    short = chunked.score(PREMISES, HYPOTHESES)
    expected = plain.score(PREMISES, HYPOTHESES)
    long_premise = " ".join(PREMISES * 6)
    long_scores = chunked.score([long_premise], ["a cat sat."])
    assert chunked.stats.chunked_examples == 1
    for name in names:
        np.testing.assert_allclose(short[name], expected[name], atol=1e-6)
        assert 0.0 < long_scores[name][0] < 1.0
    # Query-focused summaries: the question goes into the encoder input, for every column.
    asked = plain.score(PREMISES, HYPOTHESES, questions=["what did the cat do?"] * 3)
    assert all(np.abs(asked[name] - expected[name]).max() > 0 for name in names)


def test_serve_scores_each_question_and_a_chosen_few(multi_question_dir, tmp_path):
    from seahorse_metrics.scoring.scorer import MultiScorer

    from fixtures.serve_process import SHAPE_ARGS, ServerProcess, call

    server = ServerProcess(
        ["--checkpoint", f"mq={multi_question_dir}", *SHAPE_ARGS], str(tmp_path / "serve.log")
    )
    try:
        server.wait_ready()
        pairs = [
            {"article": p, "summary": h, "id": i}
            for i, (p, h) in enumerate(zip(PREMISES, HYPOTHESES))
        ]
        status, every, _ = call(server.url + "/v1/score", {"pairs": pairs})
        chosen_status, chosen, _ = call(
            server.url + "/v1/score", {"pairs": pairs, "metrics": ["mq_q2", "mq_q5"]}
        )
    finally:
        server.kill()
    assert status == 200 and chosen_status == 200, (every, chosen)
    expected = MultiScorer.load(
        {"mq": multi_question_dir}, max_input_length=128, bucket_lengths=(128,), batch_size=8
    ).score(PREMISES, HYPOTHESES)
    rows, few = every["results"], chosen["results"]
    for name in expected:
        np.testing.assert_allclose([row[name] for row in rows], expected[name], rtol=1e-5)
    assert {key for key in few[0] if key.startswith("mq_")} == {"mq_q2", "mq_q5"}
    np.testing.assert_allclose([row["mq_q5"] for row in few], expected["mq_q5"], rtol=1e-5)


def test_score_calibrates_each_question_column_with_its_own_map(
    tmp_path, multi_question_dir, capsys
):
    """Issue 49 point 2: calibration per question, as a calibration file names the columns."""
    import json

    from seahorse_metrics.calibration.maps import CalibrationMap, CalibrationSet
    from seahorse_metrics.cli import main as cli_main

    source = tmp_path / "pairs.jsonl"
    source.write_text(
        "".join(
            json.dumps({"article": p, "summary": h}) + "\n" for p, h in zip(PREMISES, HYPOTHESES)
        )
    )
    names = ("q1", "q2", "q3", "q4", "q5", "q6")
    maps = {
        name: CalibrationMap("platt", {"slope": 0.5 + i, "intercept": 0.1 * i})
        for i, name in enumerate(names)
    }
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps(CalibrationSet("platt", {}, maps).to_dict()))
    output = str(tmp_path / "scored.jsonl")
    flags = ["--max_input_length", "64", "--buckets", "32,64", "--batch_size", "4"]
    arguments = ["score", "--checkpoint", multi_question_dir, "--input", str(source)]
    assert cli_main([*arguments, "--output", output, *flags, "--calibration", str(path)]) == 0
    rows = [json.loads(line) for line in open(output)]
    for name in names:
        expected = maps[name].apply(np.array([r[name] for r in rows]))
        np.testing.assert_allclose([r[f"{name}_calibrated"] for r in rows], expected, atol=1e-6)
    del maps["q6"]
    path.write_text(json.dumps(CalibrationSet("platt", {}, maps).to_dict()))
    other = str(tmp_path / "other.jsonl")
    assert cli_main([*arguments, "--output", other, *flags, "--calibration", str(path)]) == 2
    assert "q6" in capsys.readouterr().err  # every question column needs its map


def test_a_malformed_questions_file_is_refused_naming_the_file_and_field(
    tmp_path, tiny_hf_dir, capsys
):
    import json
    import shutil

    from seahorse_metrics.cli import main as cli_main

    checkpoint = tmp_path / "metric"
    shutil.copytree(tiny_hf_dir, checkpoint)
    questions = checkpoint / "questions.json"
    questions.write_text(json.dumps({"questions": [{"name": "q1", "prefix_ids": ["x"]}]}))
    source = tmp_path / "pairs.jsonl"
    source.write_text(json.dumps({"article": PREMISES[0], "summary": HYPOTHESES[0]}) + "\n")
    output = tmp_path / "scored.jsonl"
    arguments = ["score", "--checkpoint", str(checkpoint), "--input", str(source)]
    assert cli_main([*arguments, "--output", str(output), "--max_input_length", "64"]) == 2
    error = capsys.readouterr().err
    assert f"{questions}: questions[0] needs a string 'name'" in error, error
    assert not output.exists() and source.read_text().count("\n") == 1  # the input is untouched
    questions.write_text("{not json")
    assert cli_main([*arguments, "--output", str(output), "--max_input_length", "64"]) == 2
    assert str(questions) in capsys.readouterr().err
