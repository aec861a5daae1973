"""Query-focused summaries: the `question` field from readers and tasks to the Scorer and CLI."""

import json
import os
import re

import numpy as np
import pytest

from seahorse_metrics import MultiScorer, Scorer
from seahorse_metrics.data import inputs
from seahorse_metrics.data.ratings import read_ratings
from seahorse_metrics.data.seahorse import prepared_pairs
from seahorse_metrics.data.true import read_true_file
from seahorse_metrics.data.vocab import SentencePieceTokenizer
from seahorse_metrics.scoring import units
from seahorse_metrics.scoring.records import BadRecord, record_fields

from fixtures import paths
from fixtures import scoring_reference as ref

ROOT = paths.REPO
QFS_SAMPLE = os.path.join(ROOT, "seahorse_metrics", "data", "sample", "qfs", "qfs_sample.jsonl")
FAST = {"xla_backend_optimization_level": 0}
ARTICLE = "the fox jumps over the dog on monday. the cat sleeps all day in the sun."
QUESTIONS = ["what does the fox do?", "what does the cat do?"]
SUMMARY = "the fox jumps over the dog."


@pytest.fixture(scope="module")
def tokenizer(tiny_vocab_path):
    return SentencePieceTokenizer(tiny_vocab_path)


def test_the_documented_template_and_its_checks():
    assert inputs.format_input("P", "H") == "premise: P hypothesis: H"
    assert inputs.format_input("P", "H", "Q") == "question: Q premise: P hypothesis: H"
    assert (
        inputs.format_input("P {x}", "H", "Q {y}") == "question: Q {y} premise: P {x} hypothesis: H"
    )
    custom = "query: {question} | {premise} || {hypothesis}"
    assert inputs.format_input("P", "H", "Q", custom) == "query: Q | P || H"
    for bad in (
        "premise: {premise} hypothesis: {hypothesis}",
        "{question} {premise}",
        "{question} {premise} {hypothesis} {extra}",
        "{question {premise} {hypothesis}",
    ):
        with pytest.raises(ValueError, match="question template"):
            inputs.check_question_template(bad)


def test_summary_first_keeps_question_and_summary_whole(tokenizer):
    question, summary = "what happened on monday", "the fox jumped."
    long_article = " ".join(["the fox jumps over the dog on monday."] * 40)
    whole = tokenizer.encode(inputs.format_input(ARTICLE, summary, question))
    fits = inputs.encode_pair(tokenizer, ARTICLE, summary, len(whole) + 1, question=question)
    assert fits.ids == whole + [tokenizer.eos_id] and not fits.truncated
    cut = inputs.encode_pair(tokenizer, long_article, summary, 64, question=question)
    text = tokenizer.decode(cut.ids[:-1])
    assert len(cut.ids) <= 64 and cut.truncated and not cut.hypothesis_cut
    assert text.startswith(f"question: {question} premise: the fox")
    assert text.endswith(f"hypothesis: {summary}")


def test_chunks_leave_room_for_the_question_in_every_unit(tokenizer):
    question = "what did the fox and the dog do"
    article = " ".join(
        f"fact {i} is that the fox number {i} jumps over dog {i}." for i in range(20)
    )
    settings = units.InputSettings(max_input_length=96, long_inputs="chunk", chunk_overlap=8)
    example = units.encode_example(tokenizer, article, SUMMARY, settings, question)
    assert example.chunked and len(example.units) > 2
    for unit in example.units:
        text = tokenizer.decode(unit[:-1].tolist())
        assert len(unit) <= 96
        assert text.startswith(f"question: {question} premise: ")
        assert text.endswith(f"hypothesis: {SUMMARY}")


def _reference(hf_model, tokenizer, vocab_path, text: str) -> float:
    one, _ = ref.target_ids(vocab_path)
    return ref.hf_first_step(hf_model, tokenizer.encode(text) + [tokenizer.eos_id])[one]


def test_scorer_reads_the_question_as_the_documented_input(
    tiny_hf_dir, tiny_hf_model, tokenizer, tiny_vocab_path
):
    scorer = Scorer.load(tiny_hf_dir, compiler_options=FAST, bucket_lengths=(64,))
    premises, summaries = [ARTICLE] * 3, [SUMMARY] * 3
    questions = [QUESTIONS[0], QUESTIONS[1], None]
    scores = scorer.score(premises, summaries, questions=questions)
    expected = [
        _reference(tiny_hf_model, tokenizer, tiny_vocab_path, inputs.format_input(p, h, q))
        for p, h, q in zip(premises, summaries, questions)
    ]
    np.testing.assert_allclose(scores, expected, atol=1e-7, rtol=1e-4)
    assert scores[0] != scores[1]  # the question is part of the input
    np.testing.assert_allclose(scores[2], scorer.score([ARTICLE], [SUMMARY])[0], atol=1e-8)
    assert scorer.settings.question_template == inputs.QUESTION_TEMPLATE
    with pytest.raises(ValueError, match="1 questions for 3 pairs"):
        scorer.score(premises, summaries, questions=[QUESTIONS[0]])
    with pytest.raises(ValueError, match="must be a string or None"):
        scorer.score([ARTICLE], [SUMMARY], questions=[3])


def test_a_checkpoint_can_name_its_own_question_template(
    tmp_path, tiny_hf_dir, tiny_hf_model, tokenizer, tiny_vocab_path
):
    import shutil

    checkpoint = tmp_path / "custom"
    shutil.copytree(tiny_hf_dir, checkpoint)
    template = "query: {question} document: {premise} claim: {hypothesis}"
    (checkpoint / "seahorse_inputs.json").write_text(json.dumps({"question_template": template}))
    scorer = Scorer.load(str(checkpoint), compiler_options=FAST, bucket_lengths=(64,))
    score = scorer.score([ARTICLE], [SUMMARY], questions=[QUESTIONS[0]])[0]
    expected = _reference(
        tiny_hf_model,
        tokenizer,
        tiny_vocab_path,
        template.format(question=QUESTIONS[0], premise=ARTICLE, hypothesis=SUMMARY),
    )
    np.testing.assert_allclose(score, expected, atol=1e-7, rtol=1e-4)
    assert scorer.metadata()["settings"]["question_template"] == template
    with pytest.raises(ValueError, match="different question templates"):
        MultiScorer.load({"a": str(checkpoint), "b": tiny_hf_dir})
    (checkpoint / "seahorse_inputs.json").write_text(json.dumps({"question_template": "{premise}"}))
    with pytest.raises(ValueError, match="seahorse_inputs.json.*must name"):
        Scorer.load(str(checkpoint))


def test_records_need_the_question_field_once_it_is_named():
    record = {"article": "a", "summary": "s", "q": "why?", "lang": "en"}
    assert record_fields(record, "article", "summary", "lang", "q") == ("a", "s", "en", "why?")
    assert record_fields(record, "article", "summary") == ("a", "s", None, None)
    for bad, message in [
        ({"article": "a", "summary": "s"}, "missing field 'q'"),
        ({"article": "a", "summary": "s", "q": " "}, "field 'q' is empty"),
    ]:
        with pytest.raises(BadRecord, match=message):
            record_fields(bad, "article", "summary", None, "q")


def test_readers_pass_the_question_through(tmp_path):
    ratings = tmp_path / "qfs.csv"
    ratings.write_text("premise,hypothesis,rating,question\nA,S,1,why?\nA,T,0,\n")
    pairs = read_ratings(str(ratings))
    assert [p.question for p in pairs] == ["why?", None]
    true_csv = tmp_path / "true_qfs.csv"
    true_csv.write_text("grounding,generated_text,label,question\nA,S,1,who?\n")
    assert read_true_file(str(true_csv))[0].question == "who?"
    prepared = tmp_path / "test.jsonl"
    record = {
        "gem_id": "xsum-test-1",
        "lang": "en",
        "source": "xsum",
        "system": "ref",
        "article": "A",
        "summary": "S",
        "q1": True,
        "q2": True,
        "q3": True,
        "q4": False,
        "q5": True,
        "q6": True,
        "split": "test",
        "line": 2,
        "question": "what?",
    }
    prepared.write_text(
        json.dumps(record) + "\n" + json.dumps({**record, "line": 3, "question": None}) + "\n"
    )
    assert [p.question for p in prepared_pairs(str(prepared), 4)] == ["what?", None]
    # The bundled sample: one article, several questions, a summary per question.
    sample = read_ratings(QFS_SAMPLE, id_field="id")
    assert len(sample) == 120 and all(p.question for p in sample)
    by_article = {}
    for pair in sample:
        by_article.setdefault(pair.premise, set()).add(pair.question)
    assert len(by_article) == 20 and all(len(q) == 2 for q in by_article.values())
    # The same summary is rated yes under one question and no under the other.
    labels = {}
    for pair in sample:
        labels.setdefault((pair.premise, pair.hypothesis), set()).add(pair.label)
    assert sum(found == {True, False} for found in labels.values()) == 40


def test_the_qfs_sample_regenerates_byte_identically(tmp_path):
    from demo_data import qfs as module

    output = tmp_path / "qfs.jsonl"
    module.main(["--output", str(output)])
    with open(QFS_SAMPLE, "rb") as shipped:
        assert output.read_bytes() == shipped.read(), (
            "qfs_sample.jsonl differs: re-run python -m demo_data.qfs and commit the result "
            "if the change is intended"
        )


def test_a_ratings_task_formats_the_question_into_its_inputs(tiny_vocab_path, tokenizer):
    from seahorse_metrics import tasks

    tasks.unregister()
    try:
        tasks.register(
            None,
            vocabulary=tiny_vocab_path,
            input_length=512,
            ratings_files={"qfs": {"path": QFS_SAMPLE, "id_field": "id"}},
        )
        examples = tasks.examples_for_task("ratings_qfs", "test")
    finally:
        tasks.unregister()
    pairs = read_ratings(QFS_SAMPLE, id_field="id")
    assert len(examples) == len(pairs)
    for example, pair in list(zip(examples, pairs))[:6]:
        expected = inputs.encode_pair(
            tokenizer, pair.premise, pair.hypothesis, 512, question=pair.question
        ).ids
        assert example["inputs"].tolist() == expected
        whole = inputs.format_input(pair.premise, pair.hypothesis, pair.question)
        assert whole.startswith(f"question: {pair.question} premise: ")
        assert expected == tokenizer.encode(whole) + [tokenizer.eos_id]


def test_score_cli_reads_the_question_field_and_adds_decisions(tmp_path, tiny_hf_dir, capsys):
    from seahorse_metrics.cli import main as cli_main

    rows = [json.loads(line) for line in open(QFS_SAMPLE, encoding="utf-8")][:9]
    rows[4].pop("question")  # a row without its question is reported, not guessed
    source = tmp_path / "qfs.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    shape = [
        "--max_input_length",
        "256",
        "--buckets",
        "256",
        "--batch_size",
        "8",
        "--no_progress",
        "--premise_field",
        "premise",
        "--hypothesis_field",
        "hypothesis",
        "--question_field",
        "question",
    ]
    scorer = Scorer.load(tiny_hf_dir, max_input_length=256, bucket_lengths=(256,))
    good = [row for row in rows if "question" in row]
    expected = scorer.score(
        [r["premise"] for r in good],
        [r["hypothesis"] for r in good],
        questions=[r["question"] for r in good],
    )
    threshold = float(np.median(expected))
    output = tmp_path / "scored.jsonl"
    assert (
        cli_main(
            [
                "score",
                "--checkpoint",
                tiny_hf_dir,
                "--input",
                str(source),
                "--output",
                str(output),
                "--threshold",
                str(threshold),
            ]
            + shape
        )
        == 0
    )
    written = [json.loads(line) for line in open(output, encoding="utf-8")]
    assert "question" in written[4]["error"] and "score" not in written[4]
    scored = [row for row in written if "error" not in row]
    np.testing.assert_allclose([row["score"] for row in scored], expected, rtol=1e-6)
    assert [row["score_decision"] for row in scored] == [
        "yes" if s >= threshold else "no" for s in (row["score"] for row in scored)
    ]
    assert {row["score_decision"] for row in scored} == {"yes", "no"}
    thresholds = tmp_path / "thresholds.json"
    thresholds.write_text(
        json.dumps(
            {"format": "seahorse-metrics-thresholds/1", "metrics": {"q4": {"threshold": 0.5}}}
        )
    )
    assert (
        cli_main(
            [
                "score",
                "--checkpoint",
                tiny_hf_dir,
                "--input",
                str(source),
                "--output",
                str(tmp_path / "other.jsonl"),
                "--threshold",
                str(thresholds),
            ]
            + shape
        )
        == 2
    )
    assert re.search(r"no threshold for \['score'\] \(it has \['q4'\]\)", capsys.readouterr().err)
