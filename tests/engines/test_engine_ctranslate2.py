"""The ctranslate2 engine: the same scores as the JAX engine, in every scoring mode.

Tiny random T5 v1.1 and v1.0 models are converted with CTranslate2's own
converter (in this process, into a per-module cache; one test goes through
the child process the library uses by default), and scored through the one
scoring core with both engines.
"""

import os
import sys

import numpy as np
import pytest

from seahorse_metrics import MultiScorer, Scorer
from seahorse_metrics.engines import conversion
from seahorse_metrics.engines import ctranslate2 as engine

from fixtures import isa_child, paths, tiny_model
from fixtures import scoring_reference as ref

pytest.importorskip("ctranslate2")  # In the test extra; a bare install still runs the rest.

FAST = {"xla_backend_optimization_level": 0}
# The random pairs hold summaries that crowd out their article at 64 tokens: cut them.
SHAPES = dict(max_input_length=64, bucket_lengths=(32,), window_size=16, long_summaries="cut")
QUESTIONS = [None, "what does the fox do?", None, "who jumps?"] * 4
RTOL = 1e-5
ROOT = paths.REPO
BACKBONE = os.path.join(ROOT, "seahorse_metrics", "data", "backbone")


@pytest.fixture(scope="module")
def v1_0_dir(tmp_path_factory, tiny_vocab_path):
    model = tiny_model.build_hf_model(tiny_model.tiny_t5_v1_0_config(), model_type="t5", seed=3)
    return tiny_model.save_hf_model(
        model, str(tmp_path_factory.mktemp("v1_0")), vocab_path=tiny_vocab_path
    )


@pytest.fixture(scope="module")
def engine_options(tmp_path_factory):
    return {
        "cache_dir": str(tmp_path_factory.mktemp("ct2_cache")),
        "convert_in_child": False,
        "threads": 2,
    }


@pytest.fixture(scope="module")
def pairs():
    premises, hypotheses = ref.random_pairs(16, seed=5, max_words=60)
    # Two-sentence summaries, so that per-sentence scoring has sentences to split.
    return premises, [h + " It is 1. The dog sleeps." for h in hypotheses]


def both_engines(checkpoints, engine_options, **options):
    jax_scorer = MultiScorer.load(checkpoints, compiler_options=FAST, **SHAPES, **options)
    ct2_scorer = MultiScorer.load(
        checkpoints, engine="ctranslate2", engine_options=engine_options, **SHAPES, **options
    )
    return jax_scorer, ct2_scorer


@pytest.mark.parametrize(
    "options",
    [
        {"normalize": "full"},
        {
            "normalize": "pair",
            "long_inputs": "chunk",
            "chunk_overlap": 4,
            "per_sentence": True,
            "sentence_aggregate": "mean",
        },
    ],
    ids=["full", "pair-chunk-sentences"],
)
def test_float32_scores_equal_jax_for_v1_1_and_v1_0_in_every_mode(
    tiny_hf_dir, v1_0_dir, engine_options, pairs, options
):
    checkpoints = {"v1_1": tiny_hf_dir, "v1_0": v1_0_dir}
    jax_scorer, ct2_scorer = both_engines(checkpoints, engine_options, **options)
    premises, hypotheses = pairs
    expected = jax_scorer.score_detailed(premises, hypotheses, questions=QUESTIONS)
    got = ct2_scorer.score_detailed(premises, hypotheses, questions=QUESTIONS)
    for name in checkpoints:
        np.testing.assert_allclose(got.scores[name], expected.scores[name], rtol=RTOL)
        if options.get("per_sentence"):
            for mine, theirs in zip(got.sentence_scores[name], expected.sentence_scores[name]):
                np.testing.assert_allclose(mine, theirs, rtol=RTOL)
    if options.get("long_inputs") == "chunk":
        assert got.stats.chunked_examples == expected.stats.chunked_examples > 0
    assert got.stats.model_inputs == expected.stats.model_inputs
    metadata = ct2_scorer.metadata()
    assert metadata["engine"] == "ctranslate2" and metadata["mesh"] is None
    assert jax_scorer.metadata()["engine"] == "jax"


class _CallTimes:
    """A translator whose translate_batch calls are timed (start, end) into `calls`."""

    def __init__(self, translator, calls: list):
        self.translator, self.calls = translator, calls

    def translate_batch(self, *args, **kwargs):
        import time

        start = time.perf_counter()
        result = self.translator.translate_batch(*args, **kwargs)
        self.calls.append((start, time.perf_counter()))
        return result


def _most_at_once(calls) -> int:
    events = sorted([(start, 1) for start, _ in calls] + [(end, -1) for _, end in calls])
    running = most = 0
    for _, change in events:
        running += change
        most = max(most, running)
    return most


def test_batches_compute_side_by_side_one_core_each(
    tiny_hf_dir, v1_0_dir, engine_options, pairs, tmp_path
):
    """On 2 threads, threads_per_batch=1 (the default) computes two batches at
    once, with the scores of one batch on both threads; the compute slots are
    the process's, so two metrics at 2 threads a batch never overlap."""
    premises, hypotheses = pairs
    scores, most = {}, {}
    for per_batch in (2, 1):
        scorer = MultiScorer.load(
            {"m": tiny_hf_dir, "v1_0": v1_0_dir},
            engine="ctranslate2",
            batch_size=2,
            engine_options={**engine_options, "threads_per_batch": per_batch},
            **SHAPES,
        )
        calls = []
        for runner in scorer.engines:
            assert runner.batches_at_once == 2 // per_batch
            runner.translator = _CallTimes(runner.translator, calls)
        scores[per_batch] = scorer.score(premises, hypotheses)
        assert len(calls) == 2 * len(premises) // 2  # two metrics, batches of 2
        most[per_batch] = _most_at_once(calls)
    assert most == {2: 1, 1: 2}
    for name in ("m", "v1_0"):
        np.testing.assert_allclose(scores[1][name], scores[2][name], rtol=1e-6)
    # Refused in one line before anything is converted.
    cache = tmp_path / "untouched_cache"
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match="engine option threads_per_batch") as error:
            Scorer.load(
                tiny_hf_dir,
                engine="ctranslate2",
                engine_options={
                    **engine_options,
                    "cache_dir": str(cache),
                    "threads_per_batch": bad,
                },
            )
        assert "\n" not in str(error.value)
    assert not cache.exists() or not any(cache.iterdir())


def sample_pairs(count):
    """The bundled sample's validation summaries with their articles."""
    import json

    sample = os.path.join(ROOT, "seahorse_metrics", "data", "sample", "seahorse")
    with open(os.path.join(sample, "articles.jsonl"), encoding="utf-8") as handle:
        articles = {row["gem_id"]: row["text"] for row in map(json.loads, handle)}
    with open(os.path.join(sample, "validation.tsv"), encoding="utf-8") as handle:
        rows = [line.rstrip("\n").split("\t") for line in list(handle)[1:]]
    pairs = [(articles[row[0]], row[2]) for row in rows if row[0] in articles][:count]
    return [p for p, _ in pairs], [h for _, h in pairs]


def backbone_int8_ranks(backbone: str, cache_dir: str) -> dict:
    """Spearman of int8 against float32 scores of 150 sample pairs on the
    ctranslate2 engine, and the int8 weight levels this host converted with."""
    from scipy.stats import spearmanr

    from seahorse_metrics.engines import isa

    premises, hypotheses = sample_pairs(150)
    options = {"cache_dir": cache_dir, "convert_in_child": False}
    scores = {
        quantize: Scorer.load(
            backbone,
            engine="ctranslate2",
            quantize=quantize,
            engine_options=options,
            max_input_length=256,
            normalize="pair",
        ).score(premises, hypotheses)
        for quantize in (None, "int8")
    }
    return {
        "spearman": float(spearmanr(scores[None], scores["int8"]).statistic),
        "identical": bool(np.array_equal(scores[None], scores["int8"])),
        "weight_levels": isa.ctranslate2_weight_levels(),
    }


@pytest.mark.parametrize("isa", isa_child.ISAS)
def test_int8_ranks_as_float32_on_the_shipped_backbone(isa, tmp_path):
    """The issue's bar is Spearman >= 0.999 on trained metrics (bench/int8_agreement.py
    --engine ctranslate2 measures it on the demo's); the shipped backbone is
    pretrained without labels (its P("1") is tiny, its scores close
    together), so it is held to 0.99 here, on this host and as an AVX2-only
    host computes (README: 0.998 with VNNI; 0.996 on AVX2 with 7-bit weights,
    0.934 with 8-bit ones, whose products saturate there)."""
    import shutil

    isa_child.skip_unless_above(isa)
    # A copy: the content digest keeps its file hashes beside the checkpoint.
    backbone = shutil.copytree(BACKBONE, str(tmp_path / "backbone"))
    result = isa_child.call(
        isa,
        "test_engine_ctranslate2:backbone_int8_ranks",
        backbone=backbone,
        cache_dir=str(tmp_path / "cache"),
    )
    assert result["spearman"] >= 0.99, result
    assert not result["identical"]  # int8 really ran
    if isa == "AVX2":
        assert result["weight_levels"] == 63


def test_conversion_is_cached_and_a_killed_one_is_never_used(
    tiny_hf_dir, tiny_vocab_path, tmp_path, monkeypatch
):
    cache = str(tmp_path / "cache")
    # (The score command's test converts in the child process, the default.)
    first, converted = conversion.converted_model(
        tiny_hf_dir, tiny_vocab_path, "float32", cache, in_child=False
    )
    assert converted and os.path.isfile(os.path.join(first, conversion.ENGINE_FILE))
    again, converted = conversion.converted_model(
        tiny_hf_dir, tiny_vocab_path, "float32", cache, in_child=False
    )
    assert again == first and not converted
    # int8 is another entry of the cache.
    int8, converted = conversion.converted_model(
        tiny_hf_dir, tiny_vocab_path, "int8", cache, in_child=False
    )
    assert converted and int8 != first and int8.endswith("-int8")

    # A conversion killed half-way leaves only a temporary directory: a later
    # run removes it (its process is gone) and converts afresh.
    def killed(checkpoint, vocab_path, output_dir, compute_type, smoothing=None, weight_levels=127):
        os.makedirs(output_dir)
        open(os.path.join(output_dir, "model.bin"), "wb").write(b"torn")
        raise KeyboardInterrupt

    other = str(tmp_path / "other_cache")
    monkeypatch.setattr(conversion, "convert_checkpoint", killed)
    with pytest.raises(KeyboardInterrupt):
        conversion.converted_model(tiny_hf_dir, tiny_vocab_path, "float32", other, in_child=False)
    monkeypatch.undo()
    assert os.listdir(other) == []
    dead_pid = 2**22 + 12345  # above Linux's pid_max: no such process
    leftover = os.path.join(other, f"{conversion._CONVERTING_PREFIX}{dead_pid}-x", "model")
    os.makedirs(leftover)
    path, converted = conversion.converted_model(
        tiny_hf_dir, tiny_vocab_path, "float32", other, in_child=False
    )
    assert converted and os.listdir(other) == [os.path.basename(path)]


def test_what_only_jax_does_is_refused_in_one_line(tiny_hf_dir, engine_options, monkeypatch):
    for options, words in (
        ({"packing": True}, "packing"),
        ({"dtype": "bfloat16"}, "dtype"),
        ({"mesh": object()}, "mesh"),
        ({"quantize": "int4"}, "quantize"),
    ):
        with pytest.raises(ValueError, match=words) as error:
            Scorer.load(tiny_hf_dir, engine="ctranslate2", engine_options=engine_options, **options)
        assert "\n" not in str(error.value)
    with pytest.raises(ValueError, match="unknown engine"):
        Scorer.load(tiny_hf_dir, engine="onnx")
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # as if not installed
    with pytest.raises(conversion.EngineNotInstalled, match=r"pip install -e '\.\[cpu\]'"):
        Scorer.load(tiny_hf_dir, engine="ctranslate2", engine_options=engine_options)


def test_a_vocabulary_that_names_ids_differently_is_refused(tiny_vocab_path):
    from seahorse_metrics.data.vocab import SentencePieceTokenizer

    tokenizer = SentencePieceTokenizer(tiny_vocab_path)
    pieces = [tokenizer.id_to_piece(i) for i in range(tokenizer.vocab_size)] + ["<extra_id_0>"]
    engine.check_vocabulary(pieces, tokenizer, "model")
    swapped = list(pieces)
    swapped[5], swapped[6] = swapped[6], swapped[5]
    with pytest.raises(ValueError, match="gives id 5"):
        engine.check_vocabulary(swapped, tokenizer, "model")
    with pytest.raises(ValueError, match="repeats a piece"):
        engine.check_vocabulary(pieces + [pieces[7]], tokenizer, "model")


CLI_SHAPES = [
    "--max_input_length",
    "64",
    "--buckets",
    "32,64",
    "--batch_size",
    "4",
    "--window_size",
    "8",
    "--no_progress",
    "--long_summaries",
    "cut",
]


def test_score_command_converts_once_resumes_and_refuses_what_only_jax_does(
    tmp_path, tiny_hf_dir, monkeypatch, capsys
):
    """`score --engine ctranslate2`: the library's default conversion (a
    child process, into $SEAHORSE_METRICS_CTRANSLATE2_CACHE), thresholds,
    an interrupted run resumed to the same file, Beam workers, and the refusals."""
    import json

    from seahorse_metrics.cli import main as cli_main

    cache = tmp_path / "ct2_cache"
    monkeypatch.setenv(conversion.CACHE_ENV_VAR, str(cache))
    premises, hypotheses = ref.random_pairs(30, seed=11)
    source = ref.write_pairs(tmp_path / "in.jsonl", premises, hypotheses)
    command = [
        "score",
        "--checkpoint",
        tiny_hf_dir,
        "--input",
        str(source),
        "--engine",
        "ctranslate2",
        "--normalize",
        "pair",
        "--threshold",
        "0.5",
    ] + CLI_SHAPES
    full = str(tmp_path / "full.jsonl")
    assert cli_main(command + ["--output", full]) == 0
    (entry,) = [name for name in os.listdir(cache) if not name.startswith(".")]
    rows = [json.loads(line) for line in open(full, encoding="utf-8")]
    expected = Scorer.load(
        tiny_hf_dir,
        normalize="pair",
        max_input_length=64,
        long_summaries="cut",
        bucket_lengths=(32, 64),
        compiler_options=FAST,
    ).score(premises, hypotheses)
    np.testing.assert_allclose([r["score"] for r in rows], expected, rtol=RTOL)
    assert [r["score_decision"] for r in rows] == [
        "yes" if s >= 0.5 else "no" for s in [r["score"] for r in rows]
    ]
    meta = json.load(open(full + ".meta.json", encoding="utf-8"))
    assert "ctranslate2" in json.dumps(meta)

    # Interrupted after 3 batches (Ctrl-C in the model call); the rerun resumes.
    call = engine.CTranslate2Engine._first_step_log_probs
    calls = []

    def interrupted(self, tokens):
        calls.append(1)
        if len(calls) > 3:
            raise KeyboardInterrupt
        return call(self, tokens)

    resumed = str(tmp_path / "resumed.jsonl")
    monkeypatch.setattr(engine.CTranslate2Engine, "_first_step_log_probs", interrupted)
    assert cli_main(command + ["--output", resumed]) == 130
    monkeypatch.undo()
    monkeypatch.setenv(conversion.CACHE_ENV_VAR, str(cache))
    assert not os.path.exists(resumed)
    jax_command = [word for word in command if word != "ctranslate2"]
    jax_command[jax_command.index("--engine")] = "--no_progress"
    assert cli_main(jax_command + ["--output", resumed]) == 2  # another engine: not resumed
    assert "--overwrite" in capsys.readouterr().err
    assert cli_main(command + ["--output", resumed]) == 0
    assert open(resumed, "rb").read() == open(full, "rb").read()
    assert 0 < json.load(open(resumed + ".meta.json", encoding="utf-8"))["rows"]["resumed"] < 30
    # Beam workers (here in this process) score the same rows on the same engine.
    beam_output = str(tmp_path / "beam.jsonl")
    assert (
        cli_main(
            command
            + [
                "--output",
                beam_output,
                "--runner",
                "DirectRunner",
                "--merge",
                "--direct_running_mode=in_memory",
            ]
        )
        == 0
    )
    beam_rows = [json.loads(line) for line in open(beam_output, encoding="utf-8")]
    assert [{k: v for k, v in r.items() if k != "row_id"} for r in beam_rows] == rows
    assert os.listdir(cache) == [entry]  # converted once
    capsys.readouterr()

    for extra, words in (
        (["--packing"], "packing"),
        (["--mesh", "data=1"], "mesh"),
        (["--dtype", "bfloat16"], "dtype"),
    ):
        assert cli_main(command + ["--output", str(tmp_path / "x.jsonl")] + extra) == 2
        error = capsys.readouterr().err
        assert words in error and error.count("\n") == 1
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # as if not installed
    assert cli_main(command + ["--output", str(tmp_path / "y.jsonl")]) == 2
    assert "pip install -e '.[cpu]'" in capsys.readouterr().err


def test_a_failed_conversion_is_one_line_and_keeps_the_converter_output(
    tmp_path, tiny_hf_dir, tiny_vocab_path, capsys, monkeypatch
):
    from seahorse_metrics.cli import main as cli_main

    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text('{"d_model": "wide"}')
    cache = tmp_path / "cache"
    with pytest.raises(
        conversion.ConversionError, match="to CTranslate2 float32 failed: "
    ) as caught:
        conversion.converted_model(str(broken), tiny_vocab_path, "float32", cache_dir=str(cache))
    message = str(caught.value)
    assert "\n" not in message and "Traceback" not in message
    log = message.rsplit("the converter's output: ", 1)[1].rstrip(")")
    assert "Traceback" in open(log, encoding="utf-8").read()
    assert sorted(os.listdir(cache)) == [os.path.basename(log)]  # nothing half-converted kept
    # The command line: one line, status 2. The command checks a checkpoint
    # before converting it, so the child is handed the broken one instead.
    convert_in_child = conversion._convert_in_child
    monkeypatch.setattr(
        conversion,
        "_convert_in_child",
        lambda checkpoint, *rest: convert_in_child(str(broken), *rest),
    )
    monkeypatch.setenv("SEAHORSE_METRICS_CTRANSLATE2_CACHE", str(cache))
    pairs, output = tmp_path / "pairs.jsonl", tmp_path / "scores.jsonl"
    pairs.write_text('{"article": "a cat sat", "summary": "a cat"}\n')
    status = cli_main(
        [
            "score",
            "--checkpoint",
            tiny_hf_dir,
            "--input",
            str(pairs),
            "--output",
            str(output),
            "--engine",
            "ctranslate2",
        ]
    )
    error = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and error[-1].startswith("error: ") and "failed: " in error[-1], error
    assert not any("Traceback" in line for line in error)


def test_int8_weights_are_ctranslate2s_at_127_levels_and_7_bits_at_63(
    tiny_hf_dir, tiny_vocab_path, tmp_path, monkeypatch
):
    """Our int8 conversion writes CTranslate2's own file at 127 levels; at 63
    (hosts whose int8 products may saturate) no weight passes 63, and the
    levels are part of the cache key."""
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    real_save_int8 = conversion.save_int8

    def both(converter, output_dir, levels):  # CTranslate2's own beside ours.
        real_save_int8(converter, output_dir, levels)
        converter.convert(theirs, quantization="int8")

    monkeypatch.setattr(conversion, "save_int8", both)
    conversion.convert_checkpoint(tiny_hf_dir, tiny_vocab_path, ours, "int8", None, 127)
    with (
        open(os.path.join(ours, "model.bin"), "rb") as a,
        open(os.path.join(theirs, "model.bin"), "rb") as b,
    ):
        assert a.read() == b.read()

    weights = np.random.default_rng(0).normal(size=(6, 9)).astype(np.float32)
    weights[2] = 0
    for levels in (127, 63):
        values, scale = conversion.round_rows(weights, levels)
        assert values.dtype == np.int8 and np.abs(values).max() == levels
        assert np.abs(values / scale[:, None] - weights).max() <= 0.5 / scale.min() + 1e-7
        assert scale[2] == 1 and not values[2].any()
    keys = {
        conversion.conversion_key(tiny_hf_dir, tiny_vocab_path, "int8", None, levels)
        for levels in (127, 63)
    }
    assert len(keys) == 2
    assert conversion.conversion_key(
        tiny_hf_dir, tiny_vocab_path, "float32", None, 63
    ) == conversion.conversion_key(tiny_hf_dir, tiny_vocab_path, "float32")


def test_a_damaged_cache_entry_is_named_and_converted_again(
    tiny_hf_dir, tiny_vocab_path, tmp_path, caplog
):
    """Issue 48 point 5: a truncated model.bin, bytes flipped in place (size and
    mtime kept), or an entry without its digest is converted again, and said so."""
    import logging

    cache = str(tmp_path / "cache")
    entry, _ = conversion.converted_model(
        tiny_hf_dir, tiny_vocab_path, "float32", cache, in_child=False
    )
    weights = os.path.join(entry, "model.bin")
    with open(weights, "rb") as handle:
        original = handle.read()
    pairs = ref.random_pairs(4, seed=5, max_words=20)

    def scores():
        return Scorer.load(
            tiny_hf_dir,
            engine="ctranslate2",
            engine_options={"cache_dir": cache, "convert_in_child": False},
            **SHAPES,
        ).score(*pairs)

    expected = scores()
    stat = os.stat(weights)
    damages = {
        "truncated": lambda: open(weights, "r+b").truncate(len(original) // 2),
        "flipped": lambda: open(weights, "r+b").write(bytes(b ^ 0xFF for b in original[:64])),
        "no digest": lambda: os.remove(os.path.join(entry, conversion.DIGEST_FILE)),
    }
    for name, damage in damages.items():
        damage()
        os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger=conversion.__name__):
            again, converted = conversion.converted_model(
                tiny_hf_dir, tiny_vocab_path, "float32", cache, in_child=False
            )
        assert converted and again == entry, name
        [warning] = caplog.records
        named = conversion.DIGEST_FILE if name == "no digest" else "model.bin"
        assert named in warning.getMessage() and "converting" in warning.getMessage(), name
        with open(weights, "rb") as handle:
            assert handle.read() == original, name
        np.testing.assert_array_equal(scores(), expected)
    # An intact entry is not converted again.
    assert not conversion.converted_model(
        tiny_hf_dir, tiny_vocab_path, "float32", cache, in_child=False
    )[1]
