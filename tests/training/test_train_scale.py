"""Training at the paper's size: remat, scanned layers, microbatches, plan --fit.

Equivalences are checked on the tiny preset (d_model 32, 2+2 layers):
rematerialised and scanned networks give the unrolled network's loss and
gradients; a microbatched step gives the whole batch's loss and update; a
scanned, microbatched run stopped and resumed ends bit-identical to the
uninterrupted one and writes per-layer checkpoints that an unrolled scorer
reads (and a scanned network reads back, bit for bit).
"""

from __future__ import annotations

import functools
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from seahorse_metrics.cli import main as cli_main
from seahorse_metrics.model import EncoderDecoderModel, get_config, stacks
from seahorse_metrics.model.partitioning import sharding_context
from seahorse_metrics.planning import fitting, memory, programs

from fixtures import train_utils

TINY = get_config("tiny", dropout_rate=0.1)


def _batch(rows: int, seed: int = 0) -> dict:
    rng = np.random.RandomState(seed)
    targets = rng.randint(2, TINY.vocab_size, (rows, 3))
    targets[::3, 1:] = TINY.pad_id  # microbatches hold different numbers of target tokens
    return {
        "encoder_input_tokens": jnp.asarray(rng.randint(2, TINY.vocab_size, (rows, 16))),
        "decoder_input_tokens": jnp.asarray(rng.randint(2, TINY.vocab_size, (rows, 3))),
        "decoder_target_tokens": jnp.asarray(targets),
    }


@functools.lru_cache(maxsize=None)
def _loss_and_grads_fn(config):
    model = EncoderDecoderModel(config)
    return jax.jit(jax.value_and_grad(lambda p, b, key: model.loss(p, b, key)[0]))


def _max_difference(tree_a, tree_b) -> float:
    assert jax.tree.structure(tree_a) == jax.tree.structure(tree_b)
    return max(
        float(jnp.max(jnp.abs(a - b)))
        for a, b in zip(jax.tree.leaves(tree_a), jax.tree.leaves(tree_b))
    )


@pytest.fixture(scope="module")
def unrolled_params():
    return EncoderDecoderModel(TINY).init_params(jax.random.PRNGKey(0))


def test_remat_and_scanned_layers_give_the_unrolled_loss_and_gradients(unrolled_params):
    batch = _batch(4)
    loss, grads = _loss_and_grads_fn(TINY)(unrolled_params, batch, None)
    stacked = stacks.stack_layers(unrolled_params)
    scanned_model = EncoderDecoderModel(TINY.replace(scan_layers=True))
    # The scanned network's own parameters: stacked on a leading, unsharded 'layers' axis.
    assert jax.tree.map(jnp.shape, stacked) == jax.tree.map(
        lambda a: a.shape, scanned_model.abstract_params()
    )
    axes = scanned_model.param_logical_axes()["decoder"]["layers"]["mlp"]["wi_0"]["kernel"]
    assert tuple(axes) == ("layers", "embed", "mlp")
    assert _max_difference(stacks.unstack_layers(stacked), unrolled_params) == 0.0
    for remat, scan in (("none", True), ("minimal", False)):
        config = TINY.replace(remat=remat, scan_layers=scan)
        value, gradient = _loss_and_grads_fn(config)(
            stacked if scan else unrolled_params, batch, None
        )
        if scan:
            gradient = stacks.unstack_layers(gradient)
        assert abs(float(value - loss)) < 1e-6, (remat, scan)
        assert _max_difference(gradient, grads) < 1e-6, (remat, scan)
    # With dropout: unrolled, scanned and scanned with full remat drop the
    # same units (layer i's key is the i-th split of its stack's key).
    key = jax.random.PRNGKey(7)
    plain = _loss_and_grads_fn(TINY)(unrolled_params, batch, key)
    assert abs(float(plain[0] - loss)) > 1e-3  # dropout did act
    for remat in ("none", "full"):
        value, gradient = _loss_and_grads_fn(TINY.replace(scan_layers=True, remat=remat))(
            stacked, batch, key
        )
        assert abs(float(value - plain[0])) < 1e-6, remat
        assert _max_difference(stacks.unstack_layers(gradient), plain[1]) < 1e-6, remat


@pytest.mark.parametrize("settings", [{}, {"momentum": 0.9, "weight_decay": 1e-2}])
def test_adafactor_updates_scanned_layers_as_the_unrolled_ones(settings):
    from seahorse_metrics.training.optimizers import OptimizerConfig, make_optimizer

    # [256, 300] kernels are factored; clipping and the parameter scale are
    # per layer (a whole-stack RMS would tie the layers together).
    rng = np.random.RandomState(0)
    per_layer = {
        "encoder": {
            f"layers_{i}": {
                "kernel": rng.normal(size=(256, 300)) * (i + 1),
                "scale": rng.normal(size=(300,)),
            }
            for i in range(3)
        },
        "shared": {"embedding": rng.normal(size=(300, 256))},
    }
    per_layer = jax.tree.map(lambda a: jnp.asarray(a, jnp.float32), per_layer)
    grads = jax.tree.map(
        lambda p: jnp.asarray(rng.normal(size=p.shape) * 3, jnp.float32), per_layer
    )
    optimizer = make_optimizer(OptimizerConfig(**settings), 10)
    params, stacked = per_layer, stacks.stack_layers(per_layer)
    unrolled_state, scanned_state = optimizer.init(params), optimizer.init(stacked)
    for _ in range(3):
        update, unrolled_state = optimizer.update(grads, unrolled_state, params)
        params = optax.apply_updates(params, update)
        update, scanned_state = optimizer.update(stacks.stack_layers(grads), scanned_state, stacked)
        stacked = optax.apply_updates(stacked, update)
    assert _max_difference(stacks.unstack_layers(stacked), params) < 1e-6
    assert _max_difference(params, per_layer) > 1e-3  # the updates did act


def test_microbatches_give_the_whole_batch_loss_and_update():
    from seahorse_metrics.model.partitioning import make_mesh
    from seahorse_metrics.training import step as step_lib
    from seahorse_metrics.training.optimizers import OptimizerConfig

    batch = _batch(8, seed=1)
    whole, micro = (
        step_lib.compiled_step(
            TINY.replace(dropout_rate=0.0),
            OptimizerConfig(),
            0,
            1e-4,
            None,
            make_mesh(1),
            microbatches,
        )
        for microbatches in (1, 4)
    )
    with sharding_context(whole.mesh):
        state_whole, metrics_whole = whole.step_fn(whole.init_state(0), batch)
        state_micro, metrics_micro = micro.step_fn(whole.init_state(0), batch)
    for name in ("loss", "cross_entropy", "z_loss", "accuracy", "num_tokens", "grad_norm"):
        assert float(metrics_micro[name]) == pytest.approx(float(metrics_whole[name]), rel=1e-5), (
            name
        )
    assert float(metrics_whole["z_loss"]) > 0
    assert _max_difference(state_micro.params, state_whole.params) < 1e-6
    with pytest.raises(ValueError, match="microbatches=3 must be >= 1 and divide the 8 rows"):
        step_lib.check_microbatches(3, 8, whole.mesh)


def test_microbatches_split_rows_strided_and_draw_their_own_dropout(unrolled_params):
    from seahorse_metrics.training import step as step_lib

    split = step_lib.split_microbatches({"x": jnp.arange(8)}, 4)["x"]
    assert split.tolist() == [[0, 4], [1, 5], [2, 6], [3, 7]]
    # Each microbatch draws dropout from its own key: two identical rows in two
    # microbatches get different losses, the same rows in one batch the same.
    model, params = EncoderDecoderModel(TINY), unrolled_params
    row = {k: v[:1] for k, v in _batch(1, seed=3).items()}
    twice = {k: jnp.concatenate([v, v]) for k, v in row.items()}
    key = jax.random.PRNGKey(5)
    per_row = [model.loss(params, row, jax.random.fold_in(key, i))[1] for i in range(2)]
    assert float(per_row[0]["cross_entropy"]) != float(per_row[1]["cross_entropy"])
    # ... and a constant loss normaliser divides the summed token losses of all of them.
    (_, aux), _ = jax.jit(step_lib._accumulated_loss_and_grads, static_argnums=(0, 4, 5, 6))(
        model, params, twice, key, 0.0, 37.0, 2
    )
    summed = sum(float(r["cross_entropy"] * r["num_tokens"]) for r in per_row)
    assert float(aux["cross_entropy"]) == pytest.approx(summed / 37.0, rel=1e-5)


@pytest.mark.slow
def test_scanned_microbatched_run_resumes_exactly_and_saves_per_layer(train_sample, tmp_path):
    from seahorse_metrics import checkpoints
    from seahorse_metrics.model.partitioning import logical_to_sharding, make_mesh

    settings = {
        "TrainConfig.scan_layers": True,
        "TrainConfig.microbatches": 2,
        "TrainConfig.remat": "full",
        "TrainConfig.eval_every": 6,
        "TrainConfig.checkpoint_every": 6,
        "TrainConfig.keep_checkpoints": 3,
    }
    reference, resumed = tmp_path / "reference", tmp_path / "resumed"
    train_utils.train_sample_run(str(reference), train_sample, **settings)
    train_utils.train_sample_run(
        str(resumed), train_sample, **settings, **{"TrainConfig.train_steps": 6}
    )
    train_utils.train_sample_run(
        str(resumed),
        train_sample,
        **settings,
        **{"TrainConfig.train_steps": 12, "TrainConfig.allow_config_change": True},
    )
    final = train_utils.checkpoint_params(str(reference), 12)
    assert any("layers" in name and "layers_" not in name for name in final)  # stacked in the state
    again = train_utils.checkpoint_params(str(resumed), 12)
    assert sorted(final) == sorted(again)
    for name in final:
        np.testing.assert_array_equal(final[name], again[name], err_msg=name)

    # best/ holds per-layer files; stacked again (on the device, as a scanned
    # run starting from it does) they are the run's parameters bit for bit.
    best_dir = str(reference / "best")
    with open(os.path.join(best_dir, "best.json"), encoding="utf-8") as handle:
        best_step = json.load(handle)["step"]
    saved = train_utils.checkpoint_params(str(reference), best_step)
    mesh = make_mesh(1)
    config, loaded = checkpoints.load_checkpoint(best_dir, mesh=mesh)
    assert not config.scan_layers and "layers_1" in loaded["encoder"]
    scanned = EncoderDecoderModel(config.replace(scan_layers=True))
    unrolled_probs = EncoderDecoderModel(config).first_token_probs(
        loaded, _batch(2)["encoder_input_tokens"], (3, 4)
    )
    shardings = logical_to_sharding(scanned.param_logical_axes(), mesh)
    restacked = stacks.stack_layers(loaded, shardings, release=True)
    flat = {
        jax.tree_util.keystr(k): np.asarray(v)
        for k, v in jax.tree_util.tree_leaves_with_path(restacked)
    }
    assert sorted(flat) == sorted(saved)
    for name in saved:
        np.testing.assert_array_equal(flat[name], saved[name], err_msg=name)
    scanned_probs = scanned.first_token_probs(restacked, _batch(2)["encoder_input_tokens"], (3, 4))
    np.testing.assert_allclose(np.asarray(scanned_probs), np.asarray(unrolled_probs), rtol=1e-5)


def test_plan_fit_picks_a_setting_a_direct_compile_confirms(capsys, caplog):
    from seahorse_metrics.model.partitioning import make_mesh

    config = get_config("tiny", scan_layers=True)
    shapes = dict(input_length=32, batch_size=2)
    unchanged = programs.plan_train_step(config, make_mesh(1), **shapes).per_device_bytes
    budget = unchanged - 1  # the run as it is does not fit
    with caplog.at_level("INFO"):  # --fit searches scanned layers unless told otherwise
        status = cli_main(
            [
                "plan",
                "--model",
                "tiny",
                "--fit",
                "--devices",
                "1",
                "--device_memory",
                str(budget),
                "--memory_fraction",
                "1",
                "--input_length",
                "32",
                "--batch_size",
                "2",
            ]
        )
    printed = capsys.readouterr().out
    assert status == 0, printed
    # Issue 48 point 17: what is compiled, and how far the search is, as it goes.
    bound = fitting.max_compilations(config, 1, 2)
    compiles = [
        r.getMessage() for r in caplog.records if "compiling the train step" in r.getMessage()
    ]
    assert compiles and len(compiles) <= bound == 3 * 2, compiles  # remat x bisection of [1, 2]
    settings = [line.split(": ", 1)[1] for line in compiles]
    assert len(settings) == len(set(settings)), compiles  # no setting compiled twice
    assert compiles[0] == (
        f"compiling the train step 1 of at most {bound}: remat=none, "
        "microbatches=2, data=1 x model=1, scanned layers"
    )
    assert any("searching with scanned layers" in r.getMessage() for r in caplog.records)
    lines = printed.splitlines()
    tried = [line for line in lines if line.startswith("remat=")]
    assert any(
        line.startswith("remat=none    microbatches=1 ")
        and "does not fit" in line
        and memory.format_bytes(unchanged) in line
        for line in tried
    ), printed
    chosen = next(line for line in lines if line.startswith("train with: "))
    remat = chosen.split("TrainConfig.remat='")[1].split("'")[0]
    microbatches = int(chosen.split("TrainConfig.microbatches=")[1].split()[0])
    assert "TrainConfig.scan_layers=True" in chosen and "TrainConfig.model_parallel=1" in chosen
    # Compiled anew (plan_train_step would return the search's own figure).
    confirmed = programs.compile_train_step(
        config.replace(remat=remat),
        make_mesh(1),
        shapes["input_length"],
        shapes["batch_size"],
        microbatches=microbatches,
    )[1]
    assert confirmed.per_device_bytes <= budget
    assert (remat, microbatches) != ("none", 1)
    # More recomputation with fewer microbatches is offered too, and fits as well.
    other = next(line for line in lines if line.startswith("fewer microbatches with more "))
    other_remat = other.split("remat=")[1].split(",")[0]
    other_microbatches = int(other.split("microbatches=")[1].split(",")[0])
    assert other_remat != "none" and other_microbatches < microbatches
    assert (
        programs.plan_train_step(
            config.replace(remat=other_remat),
            make_mesh(1),
            **shapes,
            microbatches=other_microbatches,
        ).per_device_bytes
        <= budget
    )
    result = fitting.FitResult(
        [fitting.Trial(remat, microbatches, 1, 1, confirmed.per_device_bytes, True)],
        None,
        budget,
        True,
        "float32",
    )
    assert fitting.cheapest(result.trials).microbatches == microbatches


def test_an_unrolled_fit_says_up_front_what_it_costs(capsys, caplog):
    with caplog.at_level("INFO"):
        status = cli_main(
            [
                "plan",
                "--model",
                "mt5_xxl",
                "--fit",
                "--no_scan_layers",
                "--devices",
                "8",
                "--device_memory",
                "1MiB",
                "--batch_size",
                "128",
            ]
        )
    assert status == 1  # nothing fits in 1 MiB: every mesh is left out without compiling
    said = caplog.text
    bound = fitting.max_compilations(get_config("mt5_xxl"), 8, 128)
    assert bound == 3 * (4 + 5 + 5 + 5)  # remat x (the bisections over 16, 32, 64, 128 rows)
    assert (
        f"searching unrolled layers: each of up to {bound} compilations compiles the train "
        "step's 24+24 layers one by one"
    ) in said, said
    assert "--scan_layers" in said
    assert "compiling the train step" not in said
    assert "TrainConfig.scan_layers" not in capsys.readouterr().out


@pytest.mark.parametrize(
    "arguments, message",
    [
        (
            ["--input_length", "100000000", "--batch_size", "100000000", "--mesh", "data=1"],
            "TiB per device for one layer's attention alone",
        ),
        (
            ["--input_length", "0", "--batch_size", "2", "--mesh", "data=1"],
            "--input_length must be a positive integer, got 0",
        ),
        (
            ["--batch_size", "2", "--mesh", "data=1000000,model=1000000"],
            "has 1,000,000,000,000 devices; plans go up to 65,536",
        ),
        (
            ["--batch_size", "8", "--fit", "--devices", "1", "--device_memory", "lots"],
            "device memory 'lots' is not a size",
        ),
    ],
)
def test_plan_refuses_impossible_requests_in_one_line(arguments, message, capsys):
    status = cli_main(["plan", "--model", "mt5_xxl", *arguments])
    error = capsys.readouterr().err.strip()
    assert status == 2 and message in error and len(error.splitlines()) == 1, error


def test_device_memory_sizes():
    assert fitting.parse_memory("80GiB") == 80 * 2**30
    assert fitting.parse_memory("16 GB") == 16 * 10**9
    assert fitting.DEVICE_MEMORY["tpu-v5e"] == 16 * 2**30
    assert fitting.mesh_shapes(get_config("mt5_xxl"), 8, 128) == [(8, 1), (4, 2), (2, 4), (1, 8)]


def test_scorer_runs_scanned_layers_with_the_unrolled_scores(tiny_hf_dir, tmp_path):
    from seahorse_metrics import Scorer

    articles = ["the cat sat on the mat " * 6, "a dog ran in the park " * 3]
    summaries = ["the cat sat", "a cat ran"]
    for quantize in (None, "int8"):
        unrolled = Scorer.load(tiny_hf_dir, quantize=quantize, max_input_length=64)
        scanned = Scorer.load(tiny_hf_dir, quantize=quantize, max_input_length=64, scan_layers=True)
        assert scanned.options.scan_layers and not unrolled.options.scan_layers
        assert scanned.model.config.scan_layers and "layers" in scanned.params["encoder"]
        expected = unrolled.score(articles, summaries)
        np.testing.assert_allclose(scanned.score(articles, summaries), expected, rtol=1e-5)
    # The command line's --scan_layers (float32; `expected` is int8's, so recompute).
    expected = Scorer.load(tiny_hf_dir, max_input_length=64).score(articles, summaries)
    pairs, output = tmp_path / "pairs.jsonl", tmp_path / "scores.jsonl"
    pairs.write_text(
        "".join(
            json.dumps({"article": a, "summary": s}) + "\n" for a, s in zip(articles, summaries)
        )
    )
    assert (
        cli_main(
            [
                "score",
                "--checkpoint",
                tiny_hf_dir,
                "--input",
                str(pairs),
                "--output",
                str(output),
                "--max_input_length",
                "64",
                "--scan_layers",
            ]
        )
        == 0
    )
    scores = [json.loads(line)["score"] for line in output.read_text().splitlines()]
    np.testing.assert_allclose(scores, expected, rtol=1e-5)
    with pytest.raises(ValueError, match="scan_layers=True is the jax engine's"):
        from seahorse_metrics.engines.choice import check_settings

        check_settings("ctranslate2", scan_layers=True)
