"""`plan --compile_for DEVICE`: the programs compiled by a GPU's or TPU's own compiler, with no
such device here.

The compiling tests run the planning child given JAX's CUDA plugin or libtpu (each installed
once into the tests' cache, `fixtures/compiler_plugins.py`): the test environment has neither,
as most CPU machines have neither, and the refusal there is tested too.
"""

import subprocess
import sys

import pytest

from seahorse_metrics.cli import main as cli_main
from seahorse_metrics.planning import compile_only, fitting, memory

from fixtures import compiler_plugins, paths

H100 = "NVIDIA H100 80GB HBM3"
TINY = ("--model", "tiny", "--input_length", "64", "--scan_layers")


@pytest.fixture(scope="module")
def cuda_environ() -> dict:
    return compiler_plugins.environ_with(compiler_plugins.installed_compiler("cuda"))


@pytest.fixture(scope="module")
def tpu_environ() -> dict:
    return compiler_plugins.environ_with(compiler_plugins.installed_compiler("tpu"))


def _plan_against_cpu(environ: dict, monkeypatch, name: str, devices: int):
    """The tiny model's plan on `devices` x `name` (4 rows a step: data parallel) from the
    compile-only devices, and XLA:CPU's plan of one device's share on this process's CPU."""
    from seahorse_metrics.model.config import get_config
    from seahorse_metrics.model.partitioning import make_mesh

    monkeypatch.setenv("PYTHONPATH", environ["PYTHONPATH"])
    config = get_config("tiny", scan_layers=True)
    compiled = memory.plan_in_subprocess(config, devices, 1, 64, 4, compile_for=name)
    cpu = memory.plan_memory(config, make_mesh(1), 64, 4 // devices)
    assert cpu.source == memory.CPU_ESTIMATE
    return compiled, cpu


def _assert_same_arguments_other_temporaries(compiled, cpu) -> None:
    """What the arguments hold per device is exact whatever compiles; the temporaries are the
    compiler's own."""
    for on_device, on_cpu in zip(compiled.steps, cpu.steps):
        per_device = {name: size.per_device for name, size in on_device.arguments.items()}
        assert per_device == {name: size.per_device for name, size in on_cpu.arguments.items()}
        assert on_device.temp_bytes != on_cpu.temp_bytes, on_device.name


@pytest.mark.slow
def test_plan_compiles_for_two_h100s_without_one(cuda_environ, monkeypatch):
    gpu, cpu = _plan_against_cpu(cuda_environ, monkeypatch, "h100-80g", 2)
    assert gpu.compiled_for == H100 and gpu.mesh == {"data": 2, "model": 1}
    report = gpu.report()
    assert f"(2 x {H100})" in report
    assert f"per-device figures: GPU compiler for {H100}, compiled without the device" in report
    _assert_same_arguments_other_temporaries(gpu, cpu)


@pytest.mark.slow
def test_plan_compiles_for_a_tpu_v5e_slice_without_one(tpu_environ, monkeypatch):
    tpu, cpu = _plan_against_cpu(tpu_environ, monkeypatch, "tpu-v5e", 4)
    assert tpu.compiled_for == "TPU v5 lite" and tpu.mesh == {"data": 4, "model": 1}
    report = tpu.report()
    assert "per-device figures: TPU compiler for TPU v5 lite, compiled without the device" in report
    _assert_same_arguments_other_temporaries(tpu, cpu)


@pytest.mark.slow
def test_fit_searches_with_the_gpu_compiler_and_that_gpus_memory(cuda_environ):
    """`plan --fit --compile_for` fits the GPU's memory (no --device needed) with XLA:GPU's
    figures, and ends with the bindings for `train`."""
    done = subprocess.run(
        [sys.executable, "-m", "seahorse_metrics", "plan", *TINY, "--fit", "--devices", "1"]
        + ["--batch_size", "1", "--compile_for", "a100-40g"],
        capture_output=True,
        text=True,
        env=cuda_environ,
        cwd=paths.REPO,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "36.00 GiB usable (0.9 of a100-40g" in out
    assert "per-device figures: GPU compiler for NVIDIA A100-SXM4-40GB, compiled without" in out
    assert "cheapest fit in 36.00 GiB per device: remat=none, microbatches=1" in out
    assert "train with: --gin.TrainConfig.remat='none'" in out


@pytest.mark.parametrize(
    "name, install",
    [
        ("a100-40g", "pip install --no-deps --target DIR jax-cuda12-plugin=="),
        ("tpu-v4", "pip install --no-deps --target DIR libtpu=="),
    ],
)
def test_without_the_compiler_plan_names_the_install(monkeypatch, capsys, name, install):
    monkeypatch.setattr(compile_only, "compiler_installed", lambda target: False)
    args = ["plan", *TINY, "--mesh", "data=4", "--batch_size", "4", "--compile_for", name]
    assert cli_main(args) != 0
    said = capsys.readouterr().err
    assert f"--compile_for {name} compiles with XLA:" in said
    assert install in said and "PYTHONPATH=DIR seahorse-metrics plan" in said


def test_compile_for_and_a_device_record_are_refused_together(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(compile_only, "compiler_installed", lambda target: True)
    monkeypatch.setattr(
        memory, "read_device_correction", lambda path: memory.DeviceCorrection("x", 1.1, 1, path)
    )
    args = ["plan", *TINY, "--mesh", "data=1", "--batch_size", "2", "--compile_for", "h100-80g"]
    assert cli_main(args + ["--device_record", str(tmp_path / "record.json")]) != 0
    assert "pass one of them" in capsys.readouterr().err
    # A device count the accelerator has no topology of is refused before anything compiles.
    args = ["plan", *TINY, "--fit", "--devices", "12", "--batch_size", "12"]
    assert cli_main(args + ["--compile_for", "tpu-v4"]) != 0
    assert (
        "TPU v4 slices have 4, 8, 16, ... chips (powers of two), not 12" in capsys.readouterr().err
    )


def test_gpu_topologies_fill_hosts_of_eight():
    h100 = compile_only.TARGETS["h100-80g"]
    assert [h100.topology(n)[0] for n in (1, 8, 64)] == ["1x1x1", "1x1x8", "1x8x8"]
    with pytest.raises(ValueError, match="do not fill hosts of 8"):
        h100.topology(12)
    with pytest.raises(ValueError, match="--compile_for 'v100'"):
        compile_only.check_target("v100")


def test_tpu_slices_are_the_shapes_cloud_tpu_offers():
    v4, v5e = compile_only.TARGETS["tpu-v4"], compile_only.TARGETS["tpu-v5e"]
    shapes = {n: v4.topology(n)[0] for n in (4, 8, 16, 32, 64, 128, 256)}
    assert shapes == {
        4: "v4:2x2x1",
        8: "v4:2x2x2",
        16: "v4:2x2x4",
        32: "v4:2x4x4",
        64: "v4:4x4x4",
        128: "v4:4x4x8",
        256: "v4:4x8x8",
    }
    assert v4.topology(32)[1]["wrap"] == (False,) * 3 and v4.topology(64)[1]["wrap"] == (True,) * 3
    assert v4.topology(4)[1]["chip_config_name"] == "megacore"  # one device per chip
    assert compile_only.TARGETS["tpu-v5p"].topology(8)[0] == "v5:2x2x2"
    assert v5e.topology(1) == (
        "v5e:1x1",
        {
            "chip_config_name": "default",
            "chips_per_host_bounds": (1, 1, 1),
            "num_slices": 1,
            "wrap": (False, False, False),
        },
    )
    assert [v5e.topology(n)[0] for n in (4, 8, 64)] == ["v5e:2x2", "v5e:2x4", "v5e:8x8"]
    assert v5e.topology(128)[1]["wrap"] == (False, True, False)
    assert v5e.topology(256)[1]["wrap"] == (True, True, False)
    for target, count in ((v4, 2), (v4, 12), (v5e, 6)):
        with pytest.raises(ValueError, match="slices have"):
            target.topology(count)


def test_every_gpu_target_is_a_device_fit_knows_with_its_memory():
    """The memory a GPU target describes to the compiler is the one --fit fits (nominal,
    within the few percent the driver keeps), and its text names what XLA:GPU reads."""
    for name, target in compile_only.TARGETS.items():
        assert name in fitting.DEVICE_MEMORY, name
        if target.platform != "gpu":
            continue
        nominal = fitting.DEVICE_MEMORY[name]
        assert 0.94 * nominal <= target.memory_bytes <= 1.08 * nominal, name
        text = target.target_config()
        assert f"device_memory_size: {target.memory_bytes}" in text
        assert f"core_count: {target.cores}" in text
        assert f'device_description_str: "{target.description}"' in text


def test_a_compiler_that_cannot_compile_here_is_named_in_one_error(monkeypatch):
    """A plugin that is installed but refuses (an older jaxlib without compile-only GPU
    topologies says "topology not implemented") becomes a ValueError naming the device."""
    from jax.experimental import topologies

    def refuse(*args, **kwargs):
        raise NotImplementedError("topology not implemented for cuda")

    monkeypatch.setattr(compile_only, "compiler_installed", lambda target: True)
    monkeypatch.setattr(topologies, "get_topology_desc", refuse)
    with pytest.raises(ValueError, match=f"JAX cannot compile for {H100} here: topology not"):
        compile_only.compile_only_devices("h100-80g", 1)
    with pytest.raises(ValueError, match="at least one device, got 0"):
        compile_only.compile_only_devices("h100-80g", 0)


def test_fit_takes_its_memory_from_one_place(capsys):
    """--fit fits --device, --device_memory or --compile_for's device; both of the first two,
    or none of the three, are refused in one line naming the flags."""
    args = ["plan", *TINY, "--fit", "--devices", "1", "--batch_size", "1"]
    assert cli_main(args + ["--device", "h100-80g", "--device_memory", "16GiB"]) != 0
    assert "plan --fit takes one of --device_memory SIZE and --device NAME" in (
        capsys.readouterr().err
    )
    assert cli_main(args) != 0
    said = capsys.readouterr().err
    assert "needs the memory to fit: --device NAME, --device_memory SIZE or --compile_for" in said
