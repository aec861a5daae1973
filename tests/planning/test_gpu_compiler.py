"""`plan --compile_for GPU`: the programs compiled by XLA:GPU for a GPU that is not here.

The compiling tests run `plan` in a child process given JAX's CUDA plugin (installed once into
the tests' cache, `fixtures/cuda_plugin.py`): the test environment has no plugin, as most CPU
machines have none, and the refusal there is tested too.
"""

import subprocess
import sys

import pytest

from seahorse_metrics.cli import main as cli_main
from seahorse_metrics.planning import fitting, gpu_compiler, memory

from fixtures import cuda_plugin, paths

H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture(scope="module")
def plugin_environ() -> dict:
    return cuda_plugin.environ_with(cuda_plugin.installed_cuda_plugin())


TINY = ("--model", "tiny", "--input_length", "64", "--scan_layers")


@pytest.mark.slow
def test_plan_compiles_for_two_h100s_without_one(plugin_environ, monkeypatch):
    """The plan is the GPU compiler's, for the GPU named, on a mesh of two of them; what the
    arguments hold per device is exact whatever compiles (XLA:CPU's plan of one device's share
    agrees), the temporaries are XLA:GPU's own."""
    from seahorse_metrics.model.config import get_config
    from seahorse_metrics.model.partitioning import make_mesh

    monkeypatch.setenv("PYTHONPATH", plugin_environ["PYTHONPATH"])
    config = get_config("tiny", scan_layers=True)
    gpu = memory.plan_in_subprocess(config, 2, 1, 64, 4, compile_for="h100-80g")
    cpu = memory.plan_memory(config, make_mesh(1), 64, 2)  # one device's share: 2 rows
    assert gpu.compiled_for == H100 and gpu.mesh == {"data": 2, "model": 1}
    report = gpu.report()
    assert f"(2 x {H100})" in report
    assert f"per-device figures: GPU compiler for {H100}, compiled without the device" in report
    assert cpu.source == memory.CPU_ESTIMATE
    for on_gpu, on_cpu in zip(gpu.steps, cpu.steps):
        per_device = {name: size.per_device for name, size in on_gpu.arguments.items()}
        assert per_device == {name: size.per_device for name, size in on_cpu.arguments.items()}
        assert on_gpu.temp_bytes != on_cpu.temp_bytes, on_gpu.name


@pytest.mark.slow
def test_fit_searches_with_the_gpu_compiler_and_that_gpus_memory(plugin_environ):
    """`plan --fit --compile_for` fits the GPU's memory (no --device needed) with XLA:GPU's
    figures, and ends with the bindings for `train`."""
    done = subprocess.run(
        [sys.executable, "-m", "seahorse_metrics", "plan", *TINY, "--fit", "--devices", "1"]
        + ["--batch_size", "1", "--compile_for", "a100-40g"],
        capture_output=True,
        text=True,
        env=plugin_environ,
        cwd=paths.REPO,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "36.00 GiB usable (0.9 of a100-40g" in out
    assert "per-device figures: GPU compiler for NVIDIA A100-SXM4-40GB, compiled without" in out
    assert "cheapest fit in 36.00 GiB per device: remat=none, microbatches=1" in out
    assert "train with: --gin.TrainConfig.remat='none'" in out


def test_without_the_plugin_plan_names_the_install(monkeypatch, capsys):
    monkeypatch.setattr(gpu_compiler, "plugin_installed", lambda: False)
    args = ["plan", *TINY, "--mesh", "data=1", "--batch_size", "2", "--compile_for", "a100-40g"]
    assert cli_main(args) != 0
    said = capsys.readouterr().err
    assert "--compile_for a100-40g compiles with XLA:GPU" in said
    assert "pip install --no-deps --target DIR jax-cuda12-plugin==" in said
    assert "PYTHONPATH=DIR seahorse-metrics plan" in said


def test_compile_for_and_a_device_record_are_refused_together(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(gpu_compiler, "plugin_installed", lambda: True)
    monkeypatch.setattr(
        memory, "read_device_correction", lambda path: memory.DeviceCorrection("x", 1.1, 1, path)
    )
    args = [
        "plan",
        *TINY,
        "--mesh",
        "data=1",
        "--batch_size",
        "2",
        "--compile_for",
        "h100-80g",
        "--device_record",
        str(tmp_path / "record.json"),
    ]
    assert cli_main(args) != 0
    assert "pass one of them" in capsys.readouterr().err


def test_topologies_fill_hosts_of_eight():
    assert gpu_compiler.topology(1) == "1x1x1"
    assert gpu_compiler.topology(8) == "1x1x8"
    assert gpu_compiler.topology(64) == "1x8x8"
    with pytest.raises(ValueError, match="do not fill hosts of 8"):
        gpu_compiler.topology(12)
    with pytest.raises(ValueError, match="--compile_for 'v100'"):
        gpu_compiler.check_target("v100")


def test_every_gpu_target_is_a_device_fit_knows_with_its_memory():
    """The memory a target describes to the compiler is the one --fit fits (nominal, within
    the few percent the driver keeps), and its text names what XLA:GPU reads."""
    for name, target in gpu_compiler.TARGETS.items():
        nominal = fitting.DEVICE_MEMORY[name]
        assert 0.94 * nominal <= target.memory_bytes <= 1.08 * nominal, name
        text = target.target_config()
        assert f"device_memory_size: {target.memory_bytes}" in text
        assert f"core_count: {target.cores}" in text
        assert f'device_description_str: "{target.description}"' in text
