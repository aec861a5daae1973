"""Int8 checks itself where it runs: a probe scored in float32 and int8 once
per checkpoint, engine and instruction set; a warning, or a refusal, when ranks move."""

import json
import logging

import numpy as np
import pytest

from seahorse_metrics import MultiScorer, Scorer
from seahorse_metrics.model import quantize as quantize_lib
from seahorse_metrics.scoring import int8_check
from seahorse_metrics.scoring.units import InputSettings
from seahorse_metrics.serving.service import Limits, ScoringService

SHAPES = dict(
    max_input_length=64,
    bucket_lengths=(64,),
    compiler_options={"xla_backend_optimization_level": 0},
)


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(int8_check.CACHE_ENV_VAR, str(tmp_path / "cache"))
    monkeypatch.setenv(int8_check.SWITCH_ENV_VAR, "on")  # conftest turns it off elsewhere


def off_by_a_factor(monkeypatch):
    """Int8 kernels whose every other column's scale is 8 times too large."""
    real = quantize_lib.quantize_kernel

    def wrong(kernel):
        values, scale = real(kernel)
        return values, scale * np.where(np.arange(len(scale)) % 2, 8.0, 1.0).astype(np.float32)

    monkeypatch.setattr(quantize_lib, "quantize_kernel", wrong)


def test_a_faithful_int8_model_passes_and_is_measured_once(tiny_hf_dir, caplog, monkeypatch):
    with caplog.at_level(logging.WARNING, logger=int8_check.__name__):
        first = Scorer.load(tiny_hf_dir, quantize="int8", **SHAPES).metadata()["int8_check"]
    check = first["score"]
    assert check["pairs"] == 2 * int8_check.PROBE_ARTICLES and not check["cached"]
    assert check["spearman"] >= int8_check.WARN_BELOW
    assert check["max_abs_log_p1_diff"] < int8_check.WARN_LOG_DIFF_ABOVE
    assert not caplog.records
    again = MultiScorer.load({"q": tiny_hf_dir}, quantize="int8", **SHAPES).metadata()
    assert again["int8_check"]["q"] == {**check, "cached": True}
    # Float32 has nothing to check; the check can be turned off.
    assert "int8_check" not in Scorer.load(tiny_hf_dir, **SHAPES).metadata()
    assert (
        "int8_check"
        not in Scorer.load(tiny_hf_dir, quantize="int8", int8_check=False, **SHAPES).metadata()
    )
    monkeypatch.setenv(int8_check.SWITCH_ENV_VAR, "off")
    assert "int8_check" not in Scorer.load(tiny_hf_dir, quantize="int8", **SHAPES).metadata()


def test_scales_off_by_a_factor_warn_in_one_line_and_can_be_refused(
    tiny_hf_dir, caplog, monkeypatch
):
    off_by_a_factor(monkeypatch)
    with caplog.at_level(logging.WARNING, logger=int8_check.__name__):
        check = Scorer.load(tiny_hf_dir, quantize="int8", **SHAPES).metadata()["int8_check"]
    assert (
        check["score"]["spearman"] < int8_check.WARN_BELOW
        or check["score"]["max_abs_log_p1_diff"] > int8_check.WARN_LOG_DIFF_ABOVE
    )
    [warning] = caplog.records
    message = warning.getMessage()
    assert "\n" not in message and f"{check['score']['spearman']:.4f}" in message
    with pytest.raises(int8_check.Int8AgreementError, match=r"below --int8_min_spearman 0\.99"):
        Scorer.load(tiny_hf_dir, quantize="int8", int8_min_spearman=0.99, **SHAPES)


def test_the_ctranslate2_engine_checks_its_conversion(tiny_hf_dir, tmp_path, monkeypatch):
    """(The bad conversion has the good one's name, so it is checked with an empty cache.)"""
    pytest.importorskip("ctranslate2")
    from seahorse_metrics.engines import conversion

    options = {"cache_dir": str(tmp_path / "ct2"), "convert_in_child": False}
    good = Scorer.load(
        tiny_hf_dir, engine="ctranslate2", quantize="int8", engine_options=options, **SHAPES
    ).metadata()["int8_check"]["score"]
    assert good["spearman"] >= int8_check.WARN_BELOW
    real = conversion.round_rows

    def wrong(weights, levels):  # Every other row's scale 8 times too large.
        values, scale = real(weights, levels)
        return values, scale * np.where(np.arange(len(scale)) % 2, 8.0, 1.0).astype(np.float32)

    monkeypatch.setattr(conversion, "round_rows", wrong)
    monkeypatch.setenv(int8_check.CACHE_ENV_VAR, str(tmp_path / "other_cache"))
    with pytest.raises(int8_check.Int8AgreementError, match="rank below"):
        Scorer.load(
            tiny_hf_dir,
            engine="ctranslate2",
            quantize="int8",
            engine_options={**options, "cache_dir": str(tmp_path / "bad")},
            int8_min_spearman=0.99,
            **SHAPES,
        )


def test_the_check_is_keyed_by_what_makes_int8_scores():
    base = {
        "checkpoint": "sha256:a",
        "vocabulary": "sha256:b",
        "engine": "jax",
        "engine_version": "0.10.2",
        "isa": "avx512_bf16",
        "int8": "jax:bfloat16",
        "seahorse_metrics": "0.1.0",
    }
    keys = {int8_check.check_key(base)}
    for part, other in (
        ("checkpoint", "sha256:c"),
        ("isa", "avx2"),
        ("int8", "jax:float32"),
        ("engine_version", "0.10.3"),
        ("engine", "ctranslate2"),
    ):
        keys.add(int8_check.check_key({**base, part: other}))
    assert len(keys) == 6


def test_a_float32_model_too_big_for_memory_is_skipped_and_said(monkeypatch, caplog):
    variant = int8_check.Int8Variant(
        "q4", {"checkpoint": "x"}, lambda: pytest.fail("loaded"), float32_bytes=64 << 30
    )
    monkeypatch.setattr(int8_check, "available_memory", lambda: 16 << 30)
    check = int8_check.run_check(variant, None, np.zeros((2, 8), np.int32))
    assert "would not fit" in check["skipped"] and "64.0 GiB" in check["skipped"]
    with caplog.at_level(logging.WARNING, logger=int8_check.__name__):
        int8_check.judge("q4", check, min_spearman=0.99)  # No figure: nothing to refuse.
    assert "skipped" in caplog.records[0].getMessage()


def test_a_torn_cache_entry_is_measured_again(tmp_path):
    path = tmp_path / "entry.json"
    path.write_text('{"spearman": 0.9')
    assert int8_check._read_cached(str(path)) is None
    path.write_text(json.dumps({"spearman": 1.0, "max_abs_log_p1_diff": 0.0, "pairs": 4}))
    assert int8_check._read_cached(str(path))["pairs"] == 4


def test_score_records_the_check_in_meta_json_and_serve_in_healthz(tiny_hf_dir, tmp_path, capsys):
    from seahorse_metrics.cli import main as cli_main

    source = tmp_path / "in.jsonl"
    source.write_text('{"article": "the council met on monday", "summary": "they met"}\n')
    output = tmp_path / "out.jsonl"
    assert (
        cli_main(
            [
                "score",
                "--checkpoint",
                f"q={tiny_hf_dir}",
                "--input",
                str(source),
                "--output",
                str(output),
                "--quantize",
                "int8",
                "--max_input_length",
                "64",
                "--no_progress",
                "--int8_min_spearman",
                "0.5",
            ]
        )
        == 0
    )
    with open(f"{output}.meta.json", encoding="utf-8") as handle:
        settings = json.load(handle)["settings"]
    assert settings["int8_check"]["q"]["pairs"] == 2 * int8_check.PROBE_ARTICLES
    assert "quant:int8-" in settings["signatures"]["q"]
    assert (
        cli_main(
            [
                "score",
                "--checkpoint",
                f"q={tiny_hf_dir}",
                "--input",
                str(source),
                "--output",
                str(tmp_path / "refused.jsonl"),
                "--quantize",
                "int8",
                "--max_input_length",
                "64",
                "--no_progress",
                "--int8_min_spearman",
                "1.01",
            ]
        )
        == 2
    )
    assert "below --int8_min_spearman 1.01" in capsys.readouterr().err
    assert not (tmp_path / "refused.jsonl").exists()

    class Described:  # What the service reads from a loaded scorer.
        names, checkpoints = ["q"], {}
        settings = InputSettings(max_input_length=64)

        def metadata(self):
            return {
                "engine": "jax",
                "batching": {"data_parallel": 1},
                "signatures": dict(loaded["signatures"]),
                "int8_check": dict(loaded["int8_check"]),
            }

        def precompile(self):
            pass

    loaded = settings
    service = ScoringService(Described, Limits())
    service.start()
    service._thread.join(5)
    health = service.health()
    assert health.status == 200 and health.body["int8_check"] == settings["int8_check"]
    assert health.body["signatures"] == settings["signatures"]
    service.close()
