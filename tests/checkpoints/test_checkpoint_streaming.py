"""Tensor-by-tensor loading equals reading whole files, bit for bit, in every
format; broken shards stop the load naming the file, with nothing half-loaded.

The reference is the plain way: every weight file read whole (safetensors'
`load_file`, `torch.load`, the HF model's own state dict), mapped with
`hf.parameter_map` and cast with numpy. The streaming loader is run with tiny
row blocks so that every tensor is read in several pieces.
"""

import os
import shutil

import ml_dtypes
import numpy as np
import pytest

from seahorse_metrics.checkpoints import (
    CheckpointError,
    load_checkpoint,
    save_checkpoint,
    streaming,
)
from seahorse_metrics.checkpoints.hf import parameter_map
from seahorse_metrics.checkpoints.params import flatten, unflatten

from fixtures import tiny_model

HF_WEIGHTS = ["safetensors", "sharded", "bin", "bin_sharded", "flax"]


def reference_params(hf_model, dtype="float32", stored_dtype=None):
    """The HF model's state dict mapped onto our names and cast with numpy."""
    import torch

    config = tiny_model.tiny_config()
    state = {name: tensor.detach() for name, tensor in hf_model.state_dict().items()}
    if stored_dtype == "bfloat16":
        state = {name: tensor.to(torch.bfloat16).float() for name, tensor in state.items()}
    state = {name: tensor.numpy() for name, tensor in state.items()}
    flat = {"token_embedder/embedding": state["shared.weight"]}
    for ours, (theirs, transposed) in parameter_map(config).items():
        flat[ours] = state[theirs].T if transposed else state[theirs]
    target = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    return {name: np.ascontiguousarray(value).astype(target) for name, value in flat.items()}


def assert_bitwise_equal(loaded, expected):
    loaded = flatten(loaded)
    assert sorted(loaded) == sorted(expected)
    for name, value in expected.items():
        array = np.asarray(loaded[name])
        assert array.dtype == value.dtype and array.shape == value.shape, name
        assert array.tobytes() == value.tobytes(), name


@pytest.fixture
def small_blocks(monkeypatch):
    # 1 KiB row blocks: every tiny tensor but the norms is read in several
    # pieces, and transposed 3 rows at a time (a partial tile at the end).
    monkeypatch.setattr(streaming, "CHUNK_BYTES", 1024)
    monkeypatch.setattr(streaming, "_TRANSPOSE_ROWS", 3)


@pytest.fixture(scope="module")
def bf16_hf_dir(tmp_path_factory, tiny_hf_model):
    """The tiny model saved with bfloat16 weights (HF torch_dtype=bfloat16)."""
    import copy

    import torch

    model = copy.deepcopy(tiny_hf_model).to(torch.bfloat16)
    return tiny_model.save_hf_model(model, str(tmp_path_factory.mktemp("bf16")))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("weights", HF_WEIGHTS)
def test_hf_streaming_equals_whole_file_load(tmp_path, tiny_hf_model, small_blocks, weights, dtype):
    directory = tiny_model.save_hf_model(tiny_hf_model, str(tmp_path / weights), weights=weights)
    _, params = load_checkpoint(directory, dtype=dtype)
    assert_bitwise_equal(params, reference_params(tiny_hf_model, dtype))


def test_whole_file_reference_is_what_the_files_hold(tmp_path, tiny_hf_model):
    # The reference above is the state dict; the files written from it hold the same.
    import torch
    from safetensors.numpy import load_file

    directory = tiny_model.save_hf_model(
        tiny_hf_model, str(tmp_path / "sharded"), weights="sharded"
    )
    stored = {}
    for name in os.listdir(directory):
        if name.endswith(".safetensors"):
            stored.update(load_file(os.path.join(directory, name)))
    for name, tensor in tiny_hf_model.state_dict().items():
        if name in stored:
            assert stored[name].tobytes() == tensor.detach().numpy().tobytes(), name
    bin_dir = tiny_model.save_hf_model(tiny_hf_model, str(tmp_path / "bin"), weights="bin")
    state = torch.load(os.path.join(bin_dir, "pytorch_model.bin"), weights_only=True)
    assert (
        state["lm_head.weight"].numpy().tobytes()
        == tiny_hf_model.lm_head.weight.detach().numpy().tobytes()
    )


def test_legacy_torch_pickle_is_read_whole(tmp_path, tiny_hf_model, small_blocks):
    # Files from torch < 1.6 cannot be memory-mapped; they are still read (weights_only).
    import torch

    directory = tiny_model.save_hf_model(tiny_hf_model, str(tmp_path / "legacy"), weights="bin")
    path = os.path.join(directory, "pytorch_model.bin")
    torch.save(torch.load(path, weights_only=True), path, _use_new_zipfile_serialization=False)
    _, params = load_checkpoint(directory, dtype="bfloat16")
    assert_bitwise_equal(params, reference_params(tiny_hf_model, "bfloat16"))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_bfloat16_weights_stream_into_either_dtype(bf16_hf_dir, tiny_hf_model, small_blocks, dtype):
    _, params = load_checkpoint(bf16_hf_dir, dtype=dtype)
    assert_bitwise_equal(params, reference_params(tiny_hf_model, dtype, stored_dtype="bfloat16"))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_t5x_and_ours_stream_bit_for_bit(tmp_path, tiny_hf_model, small_blocks, dtype):
    expected32 = reference_params(tiny_hf_model)
    expected = reference_params(tiny_hf_model, dtype)
    step_dir = tiny_model.write_t5x_checkpoint(
        str(tmp_path / "t5x"),
        unflatten(expected32),
        step=3,
        inline=[name for name in expected32 if "relpos" in name],
    )
    _, params = load_checkpoint(step_dir, dtype=dtype)
    assert_bitwise_equal(params, expected)
    ours = save_checkpoint(str(tmp_path / "ours"), tiny_model.tiny_config(), unflatten(expected32))
    _, params = load_checkpoint(ours, dtype=dtype)
    assert_bitwise_equal(params, expected)


def test_host_arrays_are_aligned_for_zero_copy(tiny_hf_dir):
    import jax

    _, params = load_checkpoint(tiny_hf_dir)
    kernel = params["encoder"]["layers_0"]["mlp"]["wi_0"]["kernel"]
    assert kernel.ctypes.data % 64 == 0
    # On the CPU, jax wraps such a buffer instead of copying it.
    assert jax.device_put(kernel).unsafe_buffer_pointer() == kernel.ctypes.data


# ------------------------------------------------------------------ bad input
def _shards(directory, suffix):
    return sorted(name for name in os.listdir(directory) if name.endswith(suffix))


@pytest.mark.parametrize("weights, suffix", [("sharded", ".safetensors"), ("bin_sharded", ".bin")])
def test_missing_shard_is_named(tmp_path, tiny_hf_model, weights, suffix):
    directory = tiny_model.save_hf_model(tiny_hf_model, str(tmp_path / weights), weights=weights)
    shard = _shards(directory, suffix)[1]
    os.remove(os.path.join(directory, shard))
    with pytest.raises(FileNotFoundError, match=f"names the shard {shard}, which is missing"):
        load_checkpoint(directory)


@pytest.mark.parametrize("weights, suffix", [("sharded", ".safetensors"), ("bin_sharded", ".bin")])
def test_truncated_shard_is_named(tmp_path, tiny_hf_model, weights, suffix):
    directory = tiny_model.save_hf_model(tiny_hf_model, str(tmp_path / weights), weights=weights)
    shard = os.path.join(directory, _shards(directory, suffix)[-1])
    size = os.path.getsize(shard)
    with open(shard, "r+b") as handle:
        handle.truncate(size - 100)
    with pytest.raises(CheckpointError, match=shard):
        load_checkpoint(directory)


def test_index_naming_a_tensor_no_shard_has(tmp_path, tiny_hf_model):
    directory = tiny_model.save_hf_model(
        tiny_hf_model, str(tmp_path / "sharded"), weights="sharded"
    )
    index_path = os.path.join(directory, "model.safetensors.index.json")
    from seahorse_metrics.checkpoints.readers import read_json_object

    index = read_json_object(index_path)
    first_shard = sorted(set(index["weight_map"].values()))[0]
    index["weight_map"]["encoder.block.9.layer.0.SelfAttention.q.weight"] = first_shard
    tiny_model.write_json(index_path, index)
    with pytest.raises(
        CheckpointError,
        match=r"index\.json places tensor "
        r"encoder\.block\.9\.layer\.0\.SelfAttention\.q\.weight",
    ):
        load_checkpoint(directory)


def test_failed_read_names_the_array_and_releases_what_was_placed(
    tmp_path, tiny_hf_model, monkeypatch
):
    import jax
    from jax.sharding import Mesh

    step_dir = tiny_model.write_t5x_checkpoint(
        str(tmp_path / "t5x"), unflatten(reference_params(tiny_hf_model)), step=1
    )
    broken = os.path.join(step_dir, "target.encoder.layers_1.mlp.wo.kernel")
    for name in os.listdir(broken):
        if not name.startswith("."):  # the chunk files, not .zarray
            with open(os.path.join(broken, name), "wb") as handle:
                handle.write(b"not gzip data")
    placed = []
    place = streaming._place_sharded
    monkeypatch.setattr(
        streaming, "_place_sharded", lambda *args: placed.append(place(*args)) or placed[-1]
    )
    mesh = Mesh(np.asarray(jax.devices()[:1]).reshape(1, 1), ("data", "model"))
    with pytest.raises(
        CheckpointError, match=f"{broken}: cannot read tensor encoder/layers_1/mlp/wo/kernel"
    ):
        load_checkpoint(step_dir, mesh=mesh)
    assert placed and all(array.is_deleted() for array in placed)


def test_unreadable_torch_file_is_named(tmp_path, tiny_hf_model):
    directory = tiny_model.save_hf_model(tiny_hf_model, str(tmp_path / "bin"), weights="bin")
    path = os.path.join(directory, "pytorch_model.bin")
    with open(path, "wb") as handle:
        handle.write(b"\x80\x04not a pickle")
    with pytest.raises(CheckpointError, match=path):
        load_checkpoint(directory)
    shutil.rmtree(directory)
