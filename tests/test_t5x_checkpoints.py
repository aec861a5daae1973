"""T5X checkpoints as T5X writes them today and as it restores them.

- T5X's `train.py` saves with Orbax (`use_orbax=True`): `checkpoint_<step>/state/`
  is an Orbax PyTree (OCDBT) of T5X's state dict, written here the way T5X's
  `checkpoints.OrbaxCheckpointManagerInterface` writes it (an Orbax
  `CheckpointManager` with step prefix `checkpoint` and a `state` item handled
  by `PyTreeCheckpointHandler(use_ocdbt=True)`), with orbax-checkpoint, not T5X.
- Our `export --to t5x` holds what T5X's strict restore compares against:
  T5X's `Adafactor.init_state` (t5x/adafactor.py) gives every parameter the
  slots `v_row`, `v_col`, `v`, `m`; unused ones are zeros((1,)), a factored
  matrix (second-largest dimension >= 128) keeps `v_row`/`v_col`, the rest `v`.
- A checkpoint cut short (a lost chunk, a lost data file) or one whose
  metadata claims more than its files hold is refused naming the array.
"""
import json
import os

import numpy as np
import pytest

from fixtures import tiny_model
from seahorse_metrics.checkpoints import CheckpointError, detect_format, load_checkpoint
from seahorse_metrics.checkpoints.params import flatten, unflatten
from seahorse_metrics.checkpoints.t5x import adafactor_initial_state, initial_optimizer_state


def write_t5x_orbax_checkpoint(model_dir, params, step, param_states=True):
    """Writes T5X's state dict `{"target": params, "state": {"step", "param_states"}}`
    the way T5X's OrbaxCheckpointManagerInterface.save does; returns the step dir."""
    import orbax.checkpoint as ocp

    shapes = {name: np.shape(value) for name, value in flatten(params).items()}
    state = initial_optimizer_state(shapes, step) if param_states else {"step": np.int32(step)}
    state_dict = {"target": params, "state": state}
    manager = ocp.CheckpointManager(
        os.path.abspath(model_dir),
        options=ocp.CheckpointManagerOptions(step_prefix="checkpoint"),
        item_handlers={"state": ocp.PyTreeCheckpointHandler(use_ocdbt=True)})
    manager.save(step, args=ocp.args.Composite(state=ocp.args.PyTreeSave(state_dict)))
    manager.wait_until_finished()
    manager.close()
    return os.path.join(model_dir, f"checkpoint_{step}")


@pytest.fixture(scope="module")
def tiny_params(tiny_hf_dir):
    _, params = load_checkpoint(tiny_hf_dir)
    return params


def _assert_equal_trees(actual, expected):
    actual, expected = flatten(actual), flatten(expected)
    assert set(actual) == set(expected)
    for name in expected:
        np.testing.assert_array_equal(np.asarray(actual[name]), np.asarray(expected[name]),
                                      err_msg=name)


# ------------------------------------------------------------- Orbax layout
def test_orbax_layout_reads_equal_to_the_legacy_layout(tmp_path, tiny_params):
    legacy = tiny_model.write_t5x_checkpoint(str(tmp_path / "legacy"), tiny_params, step=5)
    model_dir = str(tmp_path / "orbax")
    step_dir = write_t5x_orbax_checkpoint(model_dir, tiny_params, step=5)
    assert {"_CHECKPOINT_METADATA", "state"} <= set(os.listdir(step_dir))
    assert "checkpoint" not in os.listdir(step_dir)  # no msgpack file in this layout
    assert detect_format(model_dir) == detect_format(step_dir) == "t5x"
    legacy_config, legacy_params = load_checkpoint(legacy)
    config, params = load_checkpoint(model_dir)
    assert config == legacy_config
    _assert_equal_trees(params, legacy_params)
    _assert_equal_trees(params, tiny_params)


def test_orbax_layout_streams_onto_a_mesh_in_bfloat16(tmp_path, tiny_params):
    import jax

    from seahorse_metrics.model import partitioning

    step_dir = write_t5x_orbax_checkpoint(str(tmp_path / "m"), tiny_params, step=2)
    mesh = partitioning.mesh_from_spec(f"data=1,model={len(jax.devices())}")
    _, params = load_checkpoint(step_dir, dtype="bfloat16", mesh=mesh)
    kernel = params["encoder"]["layers_0"]["mlp"]["wi_0"]["kernel"]
    assert isinstance(kernel, jax.Array) and kernel.dtype == jax.numpy.bfloat16
    assert kernel.sharding.mesh.shape == mesh.shape
    expected = tiny_params["encoder"]["layers_0"]["mlp"]["wi_0"]["kernel"]
    np.testing.assert_array_equal(np.asarray(kernel, np.float32),
                                  np.asarray(expected).astype(jax.numpy.bfloat16).astype(np.float32))


def test_latest_step_of_either_layout_is_read(tmp_path, tiny_params):
    model_dir = str(tmp_path / "mixed")
    tiny_model.write_t5x_checkpoint(model_dir, tiny_params, step=10)
    shifted = unflatten({name: np.asarray(value) + 1 for name, value in flatten(tiny_params).items()})
    write_t5x_orbax_checkpoint(model_dir, shifted, step=20)
    _, params = load_checkpoint(model_dir)
    _assert_equal_trees(params, shifted)
