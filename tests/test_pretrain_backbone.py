"""The demo's backbone: its pretraining noise functions and the shipped files."""
from __future__ import annotations

import filecmp
import importlib.util
import json
import os

import numpy as np

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE_DIR = os.path.join(REPO_ROOT, "seahorse_metrics", "data", "sample")


def _script():
    spec = importlib.util.spec_from_file_location(
        "pretrain_backbone", os.path.join(REPO_ROOT, "scripts", "pretrain_backbone.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _uncorrupt(inputs, targets, vocab_size):
    """Puts the target spans back in place of their sentinels."""
    spans, current = {}, None
    for token in targets[:-1]:
        if token >= vocab_size - 100:
            current = token
            spans[current] = []
        else:
            spans[current].append(token)
    restored = []
    for token in inputs[:-1]:
        restored.extend(spans[token] if token in spans else [token])
    return restored


def test_span_corruption_hides_about_15_percent_and_can_be_undone():
    script = _script()
    rng = np.random.default_rng(0)
    ids = list(range(3, 103))
    for _ in range(20):
        inputs, targets = script.span_corrupt(ids, rng, vocab_size=6144)
        assert inputs[-1] == 1 and targets[-1] == 1
        assert _uncorrupt(inputs, targets, 6144) == ids
        hidden = sum(1 for t in targets[:-1] if t < 6144 - 100)
        assert hidden == 15


def test_grounded_swap_replaces_only_supported_tokens_with_unsupported_ones():
    script = _script()
    rng = np.random.default_rng(0)
    premise = [10, 11, 12, 13, 14, 15]
    hypothesis = [7, 8, 12, 20, 14, 21, 15]     # 7, 8: the "hypothesis:" prefix
    donor = ([30, 31, 32], [7, 8, 31, 32, 40])
    for _ in range(10):
        inputs, targets = script.swap_grounded((premise, hypothesis), donor, 2, rng, rate=0.4)
        assert targets == hypothesis[2:] + [1]
        noisy = inputs[len(premise):-1]
        changed = [i for i, (a, b) in enumerate(zip(noisy, hypothesis)) if a != b]
        assert changed and all(hypothesis[i] in premise for i in changed)
        assert all(noisy[i] in (31, 32) for i in changed)


def test_shipped_backbone_loads_with_the_sample_vocabulary():
    from seahorse_metrics.checkpoints import detect_format, load_checkpoint

    backbone = os.path.join(os.path.dirname(SAMPLE_DIR), "backbone")
    assert detect_format(backbone) == "hf"
    config, params = load_checkpoint(backbone)
    import sentencepiece as spm

    pieces = spm.SentencePieceProcessor(
        model_file=os.path.join(SAMPLE_DIR, "spiece.model")).get_piece_size()
    assert config == _script().backbone_config(pieces)
    assert filecmp.cmp(os.path.join(backbone, "spiece.model"),
                       os.path.join(SAMPLE_DIR, "spiece.model"), shallow=False)
    with open(os.path.join(backbone, "pretraining.json"), encoding="utf-8") as handle:
        record = json.load(handle)
    assert "no ratings" in record["data"]
    assert np.isfinite(params["token_embedder"]["embedding"]).all()
