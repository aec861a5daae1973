"""What each engine's kernels run on, from the CPU's flags and the caps users set."""

import os

import pytest

from seahorse_metrics.engines import isa

AVX2_EPYC = frozenset("sse4_2 avx avx2 fma".split())
ZEN4 = AVX2_EPYC | frozenset("avx512f avx512bw avx512vl avx512dq avx512_vnni avx512_bf16".split())
SKYLAKE_X = AVX2_EPYC | frozenset("avx512f avx512bw avx512vl avx512dq".split())
ALDER_LAKE = AVX2_EPYC | {"avx_vnni"}
CAPS = (
    "XLA_FLAGS",
    "CT2_FORCE_CPU_ISA",
    "ONEDNN_MAX_CPU_ISA",
    "DNNL_MAX_CPU_ISA",
    "MKL_ENABLE_INSTRUCTIONS",
    "CT2_USE_MKL",
)


@pytest.fixture
def host(monkeypatch):
    """Pretends to run on a CPU with the given flags, no caps set."""
    for name in CAPS:
        # setenv first, so that what the library writes there is undone too (a
        # delenv of an unset variable records nothing): an ONEDNN_MAX_CPU_ISA
        # left behind reached later tests' child processes, whose XLA:CPU
        # oneDNN kernels then computed other float32 roundings than this one.
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)

    def on(flags):
        monkeypatch.setattr(isa, "_cpuinfo", lambda: ("AuthenticAMD", "test CPU", flags))

    return on


@pytest.mark.parametrize(
    "flags, xla, gemm, exact, products",
    [
        (AVX2_EPYC, "AVX2", "AVX2", False, "float32"),
        (SKYLAKE_X, "AVX512", "AVX512_CORE", False, "float32"),
        (ALDER_LAKE, "AVX2", "AVX2_VNNI", True, "float32"),
        (ZEN4, "AVX512_BF16", "AVX512_CORE_BF16", True, "bfloat16"),
    ],
)
def test_each_host_gets_its_levels_and_its_int8_choices(host, flags, xla, gemm, exact, products):
    host(flags)
    assert (isa.xla_level(), isa.ctranslate2_gemm_level()) == (xla, gemm)
    assert isa.int8_gemm_exact() is exact
    assert isa.ctranslate2_weight_levels() == (127 if exact else 63)
    assert isa.xla_int8_products() == products


def test_caps_bring_a_zen4_down_to_an_avx2_host(host, monkeypatch):
    host(ZEN4)
    monkeypatch.setenv(
        "XLA_FLAGS", "--xla_force_host_platform_device_count=2 --xla_cpu_max_isa=avx2"
    )
    assert isa.xla_cap() == "AVX2" and isa.xla_level() == "AVX2"
    assert isa.xla_int8_products() == "float32"

    monkeypatch.setenv("CT2_FORCE_CPU_ISA", "AVX2")
    assert isa.ctranslate2_gemm_level() == "AVX2" and not isa.int8_gemm_exact()
    isa.apply_ctranslate2_cap()  # CTranslate2's cap reaches its GEMM libraries.
    assert os.environ["ONEDNN_MAX_CPU_ISA"] == "AVX2"
    assert os.environ["MKL_ENABLE_INSTRUCTIONS"] == "AVX2"


def test_a_library_cap_the_user_set_is_kept(host, monkeypatch):
    host(ZEN4)
    monkeypatch.setenv("CT2_FORCE_CPU_ISA", "AVX2")
    monkeypatch.setenv("DNNL_MAX_CPU_ISA", "AVX512_CORE_VNNI")
    isa.apply_ctranslate2_cap()
    assert "ONEDNN_MAX_CPU_ISA" not in os.environ
    assert isa.ctranslate2_gemm_level() == "AVX512_CORE_VNNI" and isa.int8_gemm_exact()
    # A cap above the CPU changes nothing; a cap below VNNI makes products inexact.
    monkeypatch.setenv("DNNL_MAX_CPU_ISA", "AVX512_CORE")
    assert not isa.int8_gemm_exact()


def test_describe_names_the_cpu_and_each_engine(host):
    host(AVX2_EPYC)
    described = isa.describe()
    assert described["cpu"] == "test CPU" and "avx2" in described["flags"]
    assert described["xla"]["int8_products"] == "float32"
    assert described["ctranslate2"] == {
        "gemm_level": "AVX2",
        "cap": None,
        "int8_exact": False,
        "int8_weight_levels": 63,
    }
    assert isa.engine_isa("ctranslate2") == "avx2" and isa.engine_isa("jax") == "avx2"


def test_on_mkl_the_mkl_cap_counts(host, monkeypatch):
    host(ZEN4)
    monkeypatch.setenv("CT2_USE_MKL", "1")
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")  # Not the library in use.
    assert isa.uses_mkl() and isa.int8_gemm_exact()
    monkeypatch.setenv("MKL_ENABLE_INSTRUCTIONS", "AVX2")
    assert isa.ctranslate2_gemm_level() == "AVX2" and not isa.int8_gemm_exact()
