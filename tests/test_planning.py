"""mT5-XXL by the compiler: the train step and the scoring step compiled from
shapes alone on 8 simulated devices (model=8) really split the parameters.

The compiled programs have XXL's widths and its 250112-row vocabulary with one
encoder and one decoder layer: every layer is the same program, and the full
24+24 layers take minutes to compile on 2 cores (`seahorse-metrics plan
--model mt5_xxl` does it). What is checked is the split.
"""
import math

import jax
import pytest

from seahorse_metrics import planning
from seahorse_metrics.cli import main as cli_main
from seahorse_metrics.model import EncoderDecoderModel, get_config

MiB = 2 ** 20


def test_xxl_train_and_scoring_steps_split_parameters_eight_ways(caplog):
    config = get_config("mt5_xxl", dtype="bfloat16", num_encoder_layers=1, num_decoder_layers=1)
    with caplog.at_level("INFO"):
        plan = planning.plan_in_subprocess(config, data=1, model=8, input_length=64, batch_size=8,
                                           model_name="mt5_xxl 1+1", timeout=900)
    # The child process says what it compiles, as it goes (issue 48 point 17).
    assert [r.getMessage().split(":")[0] for r in caplog.records
            if r.getMessage().startswith("compiling")] == [
        "compiling the train step of mt5_xxl 1+1", "compiling the scoring step of mt5_xxl 1+1"]
    assert plan.mesh == {"data": 1, "model": 8} and plan.platform == "cpu"
    abstract = EncoderDecoderModel(config).abstract_params()
    assert plan.parameter_count == sum(math.prod(a.shape) for a in jax.tree.leaves(abstract))
    train, score = plan.steps
    params32 = train.arguments["parameters (float32)"]
    assert params32.total == 4 * plan.parameter_count
    # Norm scales and the small position-bias tables stay whole; all else is split.
    assert params32.total / 8 <= params32.per_device < params32.total / 8 + 2 * MiB
    params16 = score.arguments["parameters (bfloat16)"]
    assert params16.total == 2 * plan.parameter_count
    assert params16.total / 8 <= params16.per_device < params16.total / 8 + MiB
    for step in (train, score):
        name, size = step.largest_whole  # no 250112-row matrix is replicated
        assert size < MiB, (step.name, name, size)
        assert step.temp_bytes > 0
    # Adafactor keeps factored statistics: a row and a column vector per matrix,
    # the one along the split axis split, the other whole (as T5X does).
    optimizer = train.arguments["optimizer state"]
    assert optimizer.per_device < 0.5 * optimizer.total < 0.001 * params32.total
    report = plan.report()
    assert "model=8" in report and "largest parameter left whole" in report


def test_adamw_state_is_split_like_the_parameters():
    # Adam's moments have the parameters' shapes: their shardings must be the
    # parameters' (read from the plan, no compile needed).
    from seahorse_metrics.model.partitioning import make_mesh
    from seahorse_metrics.training import optimizers, state

    config = get_config("tiny")
    model = EncoderDecoderModel(config)
    optimizer = optimizers.make_optimizer(optimizers.OptimizerConfig(name="adamw"), 10)
    abstract, shardings = state.plan_state(model, optimizer, make_mesh(1))
    params = jax.tree.leaves(shardings.params)
    moments = [s for s, a in zip(jax.tree.leaves(shardings.opt_state), jax.tree.leaves(abstract.opt_state))
               if a.ndim > 0]
    assert len(moments) == 2 * len(params)
    assert [s.spec for s in moments] == [s.spec for s in params] * 2


def test_plan_command_prints_per_device_memory(capsys, caplog):
    with caplog.at_level("INFO"):
        status = cli_main(["plan", "--model", "tiny", "--mesh", "data=1,model=1", "--input_length",
                           "32", "--batch_size", "2", "--dtype", "bfloat16"])
    assert status == 0
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("compiling")]
    assert said == [
        "compiling the train step of tiny: batch 2, compute bfloat16, remat none, 1 microbatch, "
        "2+2 layers unrolled, inputs of 32 tokens, on a data=1 x model=1 mesh",
        "compiling the scoring step of tiny: batch 2, weights bfloat16, inputs of 32 tokens, on a "
        "data=1 x model=1 mesh"], said
    printed = capsys.readouterr().out
    assert "data=1 x model=1 mesh" in printed
    for line in ("parameters (float32)", "optimizer state", "parameters (bfloat16)",
                 "activations, temporaries", "total"):
        assert line in printed, line
    with pytest.raises(SystemExit):
        cli_main(["plan", "--model", "tiny", "--mesh", "data=2,pipeline=4", "--batch_size", "2"])
    assert "is not data=N or model=N" in capsys.readouterr().err
