"""Which instruction sets the engines' kernels use on this host, and how to cap them.

    from seahorse_metrics.engines import isa
    isa.describe()            # {"cpu": "AMD EPYC ...", "xla": "AVX512_BF16", ...}
    isa.xla_int8_products()   # "bfloat16" where the CPU multiplies bfloat16 natively
    isa.int8_gemm_exact()     # False where CTranslate2's int8 products can saturate

Scores depend on the host in two places, and both are chosen here:

* **CTranslate2's int8 products.** Its CPU GEMMs (oneDNN, or Intel MKL on
  Intel CPUs) multiply unsigned 8-bit activations by signed 8-bit weights.
  With VNNI (`avx512_vnni`, `avx_vnni`) every product is summed in 32 bits.
  Without it (AVX2, or AVX-512 before Cascade Lake) two neighbouring
  products are first added in a signed 16-bit lane, which saturates once
  255 x |w1| + 255 x |w2| passes 32767 (oneDNN's "Nuances of int8
  computations"): on an AVX2-only EPYC a trained metric's ranks fell to a
  Spearman of 0.94-0.96 against float32. Weights quantized to 63 levels
  (7 bits, `INT8_WEIGHT_LEVELS`) can never saturate there (255 x 63 x 2 =
  32130), so int8 conversions for such hosts keep 7 bits
  (`ctranslate2_weight_levels`).
* **JAX's int8 products.** `T5Config.int8_products`: bfloat16 products of
  the int8 weights run at about twice float32's rate where the CPU has
  AVX512-BF16 (or AMX), and slower than float32 where it has not (an
  AVX2-only host scored JAX int8 at 0.62x JAX float32); there they run in
  float32.

Caps, to reproduce another host's choices on this one:

* `CT2_FORCE_CPU_ISA` (GENERIC, AVX, AVX2, AVX512) is CTranslate2's own
  cap for its kernels; its GEMM libraries have their own
  (`ONEDNN_MAX_CPU_ISA`, `MKL_ENABLE_INSTRUCTIONS`). `apply_ctranslate2_cap`
  extends CTranslate2's cap to them (unless they are set), so
  `CT2_FORCE_CPU_ISA=AVX2` makes a Zen 4 multiply as an AVX2-only EPYC does.
* `XLA_FLAGS=--xla_cpu_max_isa=AVX2` caps the code XLA:CPU generates and,
  here, the choice of int8 products. XLA's library dots (YNNPACK) still
  dispatch on the CPU's own features, so a capped run gives an AVX2 host's
  numbers, not its speed.
"""

from __future__ import annotations

import functools
import os
import re
from typing import Optional

CT2_CAP_VAR = "CT2_FORCE_CPU_ISA"
ONEDNN_CAP_VARS = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")
MKL_CAP_VAR = "MKL_ENABLE_INSTRUCTIONS"
XLA_CAP_FLAG = "xla_cpu_max_isa"
# Full int8 range, and the 7 bits that cannot saturate a 16-bit pair sum.
INT8_WEIGHT_LEVELS = {True: 127, False: 63}

# XLA:CPU's feature ladder (`--xla_cpu_max_isa` values), lowest first.
XLA_LEVELS = ("SSE4_2", "AVX", "AVX2", "AVX512", "AVX512_VNNI", "AVX512_BF16", "AMX")
# oneDNN's ladder (`ONEDNN_MAX_CPU_ISA` values) as far as int8 products go.
ONEDNN_LEVELS = (
    "SSE41",
    "AVX",
    "AVX2",
    "AVX2_VNNI",
    "AVX2_VNNI_2",
    "AVX512_CORE",
    "AVX512_CORE_VNNI",
    "AVX512_CORE_BF16",
    "AVX512_CORE_FP16",
    "AVX512_CORE_AMX",
    "AVX512_CORE_AMX_FP16",
)
_ONEDNN_EXACT_INT8 = {
    "AVX2_VNNI",
    "AVX2_VNNI_2",
    "AVX512_CORE_VNNI",
    "AVX512_CORE_BF16",
    "AVX512_CORE_FP16",
    "AVX512_CORE_AMX",
    "AVX512_CORE_AMX_FP16",
}
# CT2_FORCE_CPU_ISA -> the caps it implies for oneDNN and MKL.
_CT2_TO_ONEDNN = {"GENERIC": "SSE41", "AVX": "AVX", "AVX2": "AVX2"}
_CT2_TO_MKL = {"GENERIC": "SSE4_2", "AVX": "AVX", "AVX2": "AVX2"}
# MKL_ENABLE_INSTRUCTIONS values below VNNI -> the oneDNN level they allow at most.
_MKL_TO_ONEDNN = {"SSE4_2": "SSE41", "AVX": "AVX", "AVX2": "AVX2", "AVX512": "AVX512_CORE"}
_AVX512_CORE = {"avx512f", "avx512bw", "avx512vl", "avx512dq"}


@functools.lru_cache(maxsize=None)
def _cpuinfo() -> tuple[str, str, frozenset[str]]:
    """(vendor, model name, flags) of the first CPU in /proc/cpuinfo."""
    vendor, model, flags = "", "", frozenset()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                key, value = key.strip(), value.strip()
                if key == "vendor_id" and not vendor:
                    vendor = value
                elif key == "model name" and not model:
                    model = value
                elif key == "flags" and not flags:
                    flags = frozenset(value.split())
                if vendor and model and flags:
                    break
    except OSError:  # Not Linux: no flags, so no ISA is claimed.
        pass
    return vendor, model, flags


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags as /proc/cpuinfo names them (empty elsewhere)."""
    return _cpuinfo()[2]


def cpu_model() -> str:
    """The CPU's model name ("" where /proc/cpuinfo is missing)."""
    return _cpuinfo()[1]


def _capped(level: str, cap: Optional[str], ladder: tuple[str, ...]) -> str:
    if cap is None or cap not in ladder:
        return level
    return ladder[min(ladder.index(level), ladder.index(cap))]


def host_xla_level(flags: Optional[frozenset[str]] = None) -> str:
    """The highest `XLA_LEVELS` entry the CPU supports."""
    flags = cpu_flags() if flags is None else flags
    if "amx_bf16" in flags:
        return "AMX"
    if _AVX512_CORE <= flags:
        if "avx512_bf16" in flags:
            return "AVX512_BF16"
        return "AVX512_VNNI" if "avx512_vnni" in flags else "AVX512"
    for level, flag in (("AVX2", "avx2"), ("AVX", "avx")):
        if flag in flags:
            return level
    return "SSE4_2"


def xla_cap() -> Optional[str]:
    """The `--xla_cpu_max_isa` value of XLA_FLAGS, upper-cased, or None."""
    found = re.findall(rf"--{XLA_CAP_FLAG}=(\S+)", os.environ.get("XLA_FLAGS", ""))
    return found[-1].upper() if found else None


def xla_level() -> str:
    """The instruction set XLA:CPU generates code for: the CPU's, capped."""
    return _capped(host_xla_level(), xla_cap(), XLA_LEVELS)


def xla_int8_products() -> str:
    """The dtype JAX's int8 kernels multiply in on this CPU: "bfloat16" where
    it has bfloat16 dot instructions (AVX512-BF16, AMX) and XLA is not capped
    below them, else "float32"."""
    level = xla_level()
    return "bfloat16" if XLA_LEVELS.index(level) >= XLA_LEVELS.index("AVX512_BF16") else "float32"


def jax_int8_products() -> str:
    """`xla_int8_products` on a CPU backend; "bfloat16" on accelerators."""
    import jax

    return xla_int8_products() if jax.default_backend() == "cpu" else "bfloat16"


def apply_ctranslate2_cap() -> None:
    """Extends `CT2_FORCE_CPU_ISA` to CTranslate2's GEMM libraries (oneDNN,
    MKL) where they have no cap of their own; call before CTranslate2 first
    multiplies (they read their variables once).

    The variables are set in `os.environ`, so child processes inherit them and
    XLA:CPU's own oneDNN kernels (which change float32 roundings under a cap)
    follow them where oneDNN had not started yet: call it before JAX computes
    where runs must agree bit for bit (the test suite's conftest does)."""
    forced = os.environ.get(CT2_CAP_VAR, "").upper()
    if forced in _CT2_TO_ONEDNN and not any(os.environ.get(v) for v in ONEDNN_CAP_VARS):
        os.environ[ONEDNN_CAP_VARS[0]] = _CT2_TO_ONEDNN[forced]
    if forced in _CT2_TO_MKL and not os.environ.get(MKL_CAP_VAR):
        os.environ[MKL_CAP_VAR] = _CT2_TO_MKL[forced]


def host_onednn_level(flags: Optional[frozenset[str]] = None) -> str:
    """The highest `ONEDNN_LEVELS` entry the CPU supports."""
    flags = cpu_flags() if flags is None else flags
    if _AVX512_CORE <= flags:
        for level, flag in (
            ("AVX512_CORE_AMX", "amx_int8"),
            ("AVX512_CORE_FP16", "avx512_fp16"),
            ("AVX512_CORE_BF16", "avx512_bf16"),
            ("AVX512_CORE_VNNI", "avx512_vnni"),
        ):
            if flag in flags:
                return level
        return "AVX512_CORE"
    for level, flag in (("AVX2_VNNI", "avx_vnni"), ("AVX2", "avx2"), ("AVX", "avx")):
        if flag in flags:
            return level
    return "SSE41"


def ctranslate2_gemm_level() -> str:
    """The instruction set of CTranslate2's GEMMs: the CPU's, under the cap
    of the library it multiplies with (or the one `CT2_FORCE_CPU_ISA` implies)."""
    forced = os.environ.get(CT2_CAP_VAR, "").upper()
    if uses_mkl():
        cap = _MKL_TO_ONEDNN.get(
            os.environ.get(MKL_CAP_VAR, "").upper() or _CT2_TO_MKL.get(forced, "")
        )
    else:
        cap = next(
            (os.environ[v].upper() for v in ONEDNN_CAP_VARS if os.environ.get(v)),
            _CT2_TO_ONEDNN.get(forced),
        )
    return _capped(host_onednn_level(), cap, ONEDNN_LEVELS)


def uses_mkl() -> bool:
    """Whether CTranslate2 multiplies with Intel MKL (`CT2_USE_MKL`, by
    default on Intel CPUs) rather than oneDNN."""
    chosen = os.environ.get("CT2_USE_MKL")
    return chosen == "1" if chosen in ("0", "1") else _cpuinfo()[0] == "GenuineIntel"


def int8_gemm_exact() -> bool:
    """Whether CTranslate2's int8 products sum in 32 bits here (VNNI), so
    that full-range int8 weights cannot saturate (see the module docstring)."""
    return ctranslate2_gemm_level() in _ONEDNN_EXACT_INT8


def ctranslate2_weight_levels() -> int:
    """Levels of int8 weights for a CTranslate2 conversion used on this host:
    127 where int8 products are exact, 63 (7 bits) where they may saturate."""
    return INT8_WEIGHT_LEVELS[int8_gemm_exact()]


def engine_isa(engine: str) -> str:
    """A short name of what an engine's kernels run on: "avx512_bf16" or
    "avx2" for JAX on a CPU (XLA's level), the accelerator's kind for JAX
    on one ("NVIDIA H100 80GB HBM3"), and CTranslate2's GEMM level
    ("avx512_core_vnni", "avx2")."""
    if engine == "ctranslate2":
        return ctranslate2_gemm_level().lower()
    import jax

    device = jax.local_devices()[0]
    return xla_level().lower() if device.platform == "cpu" else device.device_kind


def capped_environment(level: str, environ: Optional[dict] = None) -> dict:
    """`environ` (default this process's) with both engines capped at
    `level` (an XLA and CTranslate2 name both take: "AVX2", "AVX"), for a
    child process that computes as a host of that level would."""
    environment = dict(os.environ if environ is None else environ)
    environment[CT2_CAP_VAR] = level
    flags = environment.get("XLA_FLAGS", "")
    environment["XLA_FLAGS"] = f"{flags} --{XLA_CAP_FLAG}={level}".strip()
    # The GEMM libraries' own caps, for CTranslate2 imported without this
    # package (`apply_ctranslate2_cap` sets the same ones where it is).
    if level.upper() in _CT2_TO_ONEDNN and not any(environment.get(v) for v in ONEDNN_CAP_VARS):
        environment[ONEDNN_CAP_VARS[0]] = _CT2_TO_ONEDNN[level.upper()]
    if level.upper() in _CT2_TO_MKL:
        environment.setdefault(MKL_CAP_VAR, _CT2_TO_MKL[level.upper()])
    return environment


def describe_line() -> str:
    """One line: what each engine's kernels run on here (for benchmarks)."""
    described = describe()
    ct2 = described["ctranslate2"]
    return (
        f"instruction sets: XLA {described['xla']['level']}"
        f"{' (capped)' if described['xla']['cap'] else ''}, its int8 products in "
        f"{described['xla']['int8_products']}; CTranslate2 GEMMs {ct2['gemm_level']}"
        f"{' (capped)' if ct2['cap'] else ''}, int8 products "
        f"{'exact (VNNI)' if ct2['int8_exact'] else 'saturating without VNNI'}, "
        f"int8 weights of {ct2['int8_weight_levels']} levels"
    )


def describe() -> dict:
    """The host and each engine's instruction set, for benchmarks and logs."""
    vendor, model, flags = _cpuinfo()
    return {
        "cpu": model,
        "vendor": vendor,
        "flags": sorted(f for f in flags if f.startswith(("avx", "amx")) or f == "fma"),
        "xla": {"level": xla_level(), "cap": xla_cap(), "int8_products": xla_int8_products()},
        "ctranslate2": {
            "gemm_level": ctranslate2_gemm_level(),
            "cap": os.environ.get(CT2_CAP_VAR) or None,
            "int8_exact": int8_gemm_exact(),
            "int8_weight_levels": ctranslate2_weight_levels(),
        },
    }
