"""bfloat16: training with bfloat16 activations and float32 master weights,
and scoring with bfloat16 weights that ranks pairs as float32 does."""

from __future__ import annotations

import json
import os

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats as scipy_stats

from seahorse_metrics.model import EncoderDecoderModel, get_config
from seahorse_metrics.model.partitioning import make_mesh
from seahorse_metrics.training import OptimizerConfig, step

from fixtures import train_utils

BACKBONE = os.path.join(train_utils.REPO_ROOT, "seahorse_metrics", "data", "backbone")


def _dot_dtypes(jaxpr) -> list:
    """Operand dtypes of every dot_general in a jaxpr, nested calls included."""
    found = [
        tuple(v.aval.dtype for v in equation.invars)
        for equation in jaxpr.eqns
        if equation.primitive.name == "dot_general"
    ]
    for sub in jax.extend.core.subjaxprs(jaxpr):
        found.extend(_dot_dtypes(sub))
    return found


def test_bfloat16_train_step_keeps_float32_master_weights():
    config = get_config("tiny", dtype="bfloat16", dropout_rate=0.0)
    plan = step.compiled_step(config, OptimizerConfig(), 10, 1e-4, None, make_mesh(1))
    floats = [
        leaf
        for leaf in jax.tree.leaves((plan.abstract_state.params, plan.abstract_state.opt_state))
        if jnp.issubdtype(leaf.dtype, jnp.floating)
    ]
    assert floats and all(leaf.dtype == jnp.float32 for leaf in floats)
    model = EncoderDecoderModel(config)
    batch = {
        "encoder_input_tokens": jnp.ones((2, 16), jnp.int32),
        "decoder_input_tokens": jnp.zeros((2, 4), jnp.int32),
        "decoder_target_tokens": jnp.ones((2, 4), jnp.int32),
    }
    params = model.init_params(jax.random.PRNGKey(0))
    jaxpr = jax.make_jaxpr(lambda p: jax.grad(lambda q: model.loss(q, batch)[0])(p))(params)
    dots = _dot_dtypes(jaxpr.jaxpr)
    # Matmuls run in bfloat16 (forward and backward); the gradient of each
    # float32 parameter comes back float32.
    assert sum(all(d == jnp.bfloat16 for d in dtypes) for dtypes in dots) > len(dots) // 2
    assert all(g.dtype == jnp.float32 for g in jax.tree.leaves(jaxpr.out_avals))
    logits = jax.eval_shape(model.logits, params, batch)
    assert logits.dtype == jnp.float32


@pytest.mark.slow
def test_bfloat16_training_and_scoring_rank_like_float32(train_sample, tmp_path):
    """A tiny metric fine-tuned from the backbone in bfloat16 (float32 master
    weights) scores the validation split with bfloat16 weights in the order
    float32 weights give: Spearman >= 0.999 (0.99955 when written; after 60
    steps, with scores still bunched, it was 0.9987)."""
    from seahorse_metrics import Scorer
    from seahorse_metrics.checkpoints import load_checkpoint

    model_dir = tmp_path / "bf16"
    result = train_utils.train_sample_run(
        str(model_dir),
        train_sample,
        **{
            "INIT_CHECKPOINT": BACKBONE,
            "TrainConfig.dtype": "bfloat16",
            "TrainConfig.dropout_rate": 0.0,
            "TrainConfig.train_steps": 120,
            "TrainConfig.eval_every": 120,
            "TrainConfig.checkpoint_every": 120,
            "TrainConfig.log_every": 10,
            "OptimizerConfig.learning_rate": 3e-3,
        },
    )
    losses = train_utils.losses_by_step(str(model_dir))
    assert np.isfinite(list(losses.values())).all() and losses[120] < losses[10]
    assert result.best_metrics["roc_auc"] > 0.6
    _, saved = load_checkpoint(result.best_checkpoint)
    assert all(leaf.dtype == np.float32 for leaf in jax.tree.leaves(saved))

    with open(os.path.join(train_sample["prepared"], "validation.jsonl"), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f][:300]
    pairs = ([r["article"] for r in rows], [r["summary"] for r in rows])
    # A few sample summaries would leave their article less than a quarter of 96 tokens.
    options = dict(
        max_input_length=96,
        bucket_lengths=(96,),
        batch_size=50,
        long_summaries="cut",
        compiler_options={"xla_backend_optimization_level": 0},
    )
    scores32 = Scorer.load(result.best_checkpoint, **options).score(*pairs)
    bf16 = Scorer.load(result.best_checkpoint, dtype="bfloat16", **options)
    assert jax.tree.leaves(bf16.params)[0].dtype == jnp.bfloat16
    scores16 = bf16.score(*pairs)
    rho = scipy_stats.spearmanr(scores32, scores16).statistic
    log_gap = np.abs(np.log(scores16) - np.log(scores32)).max()
    print(
        f"bfloat16 vs float32 on {len(rows)} validation pairs: Spearman {rho:.5f}, "
        f"max |log P diff| {log_gap:.4f}"
    )
    assert np.std(scores32) > 0.05  # a trained metric spreads its scores
    assert rho >= 0.999, (rho, log_gap)
