"""What bench/accelerator.py derives from its parts' figures, and the table it prints.

`summarize(record)` adds, in place, to each part what follows from its
figures and the device (model FLOPs utilisation, measured / planned memory,
measured / CPU-compiler memory, the numerics' Spearman and largest
|delta log P("1")|), and returns the record's `anchors` and `goals`.
"""

from __future__ import annotations

import math
from typing import Any, Optional

GiB = 2**30
# NVIDIA JAX-Toolbox's T5X table: training throughput per GPU of T5 v1.1-large
# (32k vocabulary) at 512 input / 128 target tokens.
ANCHORS = (
    {
        "source": "NVIDIA JAX-Toolbox T5X",
        "model": "T5 v1.1-large",
        "device": "A100",
        "precision": "bf16",
        "input_length": 512,
        "target_length": 128,
        "sequences_per_s_per_gpu": 75.8,
    },
    {
        "source": "NVIDIA JAX-Toolbox T5X",
        "model": "T5 v1.1-large",
        "device": "H100",
        "precision": "fp8",
        "input_length": 512,
        "target_length": 128,
        "sequences_per_s_per_gpu": 174.1,
    },
)
MFU_GOAL = 0.45  # mT5-XL at 2048 tokens on one H100
PLAN_TOLERANCE = 0.15  # |measured / planned - 1| for every setting plan calls fitting
XXL_CAP_BYTES = 24 * 10**9


def _ratio(numerator: Optional[float], denominator: Optional[float]) -> Optional[float]:
    return numerator / denominator if numerator is not None and denominator else None


def derive_training(part: dict, peak_flops: Optional[float], cpu: dict) -> None:
    """MFU and the memory ratios of one training part, in place."""
    peak = (part.get("memory") or {}).get("peak_bytes")
    part["mfu"] = _ratio(part.get("achieved_flops"), peak_flops)
    part["peak_over_plan"] = _ratio(peak, part.get("planned_bytes"))
    part["cpu_planned_bytes"] = cpu.get("cpu_planned_bytes")
    part["peak_over_cpu_plan"] = _ratio(peak, cpu.get("cpu_planned_bytes"))
    part["plan_over_cpu_plan"] = _ratio(part.get("planned_bytes"), cpu.get("cpu_planned_bytes"))


def compare_numerics(device: dict, reference: dict) -> dict:
    """Per dtype and metric: Spearman and the largest |delta log P("1")| of
    the device's scores against XLA:CPU's float32."""
    from scipy.stats import spearmanr

    compared = {}
    for dtype, metrics in device["log_p"].items():
        compared[dtype] = {}
        for name, values in metrics.items():
            want = reference["log_p"]["float32"][name]
            rho = spearmanr(want, values).statistic
            compared[dtype][name] = {
                "spearman": None if math.isnan(rho) else float(rho),
                "max_abs_delta_log_p": max(abs(a - b) for a, b in zip(want, values)),
            }
    return compared


def _numerics(parts: dict) -> None:
    device, reference = parts.get("numerics", {}), parts.get("numerics_cpu_reference", {})
    if device.get("status") == "ok" and reference.get("status") == "ok":
        device["against_cpu_float32"] = compare_numerics(device, reference)
    for part in (device, reference):
        part.pop("log_p", None)  # per-row values: not kept in the record


def _goals(record: dict) -> list[dict]:
    parts = record["parts"]
    xl = parts.get("train_mt5_xl", {})
    fitting = [
        p
        for p in parts.values()
        if p.get("role") == "train" and p.get("expect_fit") and p.get("peak_over_plan") is not None
    ]
    worst = max((abs(p["peak_over_plan"] - 1) for p in fitting), default=None)
    xxl = next((p for name, p in parts.items() if name.startswith("score_mt5_xxl")), {})
    xxl_peak = (xxl.get("memory") or {}).get("peak_bytes")
    nofit = parts.get("does_not_fit", {})
    return [
        {
            "goal": "mT5-XL training MFU at 2048 tokens",
            "target": f">= {MFU_GOAL:.0%}",
            "value": xl.get("mfu"),
            "met": None if xl.get("mfu") is None else xl["mfu"] >= MFU_GOAL,
        },
        {
            "goal": "plan within 15% of the measured peak, every setting it calls fitting",
            "target": f"<= {PLAN_TOLERANCE:.0%}",
            "value": worst,
            "met": None if worst is None else worst <= PLAN_TOLERANCE,
        },
        {
            "goal": "mT5-XXL int8 scoring inside 24 GB",
            "target": f"peak <= {XXL_CAP_BYTES}",
            "value": xxl_peak,
            "met": None
            if xxl_peak is None or not xxl.get("cap_enforced")
            else xxl.get("status") == "ok" and xxl_peak <= XXL_CAP_BYTES,
        },
        {
            "goal": "the setting plan says does not fit fails with out-of-memory",
            "target": "out of memory",
            "value": nofit.get("status"),
            "met": None
            if nofit.get("status") in (None, "not run", "skipped")
            else nofit["status"] == "out of memory",
        },
    ]


def summarize(record: dict) -> dict:
    """Derived figures into the parts (in place); returns anchors and goals."""
    parts, peak_flops = record["parts"], record["device"].get("bf16_peak_flops")
    cpu = {
        s["part"]: s
        for part in parts.values()
        if part.get("role") == "cpu_plan"
        for s in part.get("settings", [])
    }
    for name, part in parts.items():
        if part.get("role") == "train" and part.get("setting"):
            derive_training(part, peak_flops, cpu.get(name, {}))
    _numerics(parts)
    anchor = next(
        (dict(p, part=name) for name, p in parts.items() if name.startswith("anchor")), None
    )
    ours = (
        None
        if anchor is None
        else {
            "part": anchor["part"],
            "model": "mT5-large (250k vocabulary)",
            "status": anchor.get("status"),
            "examples_per_s": anchor.get("examples_per_s"),
            "device": record["device"].get("kind"),
            "precision": "bf16 compute, float32 weights",
        }
    )
    return {"anchors": {"published": list(ANCHORS), "ours": ours}, "goals": _goals(record)}


# -------------------------------------------------------------------- table
def _bytes(size: Optional[float]) -> str:
    return "-" if size is None else f"{size / GiB:.2f} GiB"


def _number(value: Optional[float], form: str = "{:.1f}") -> str:
    return "-" if value is None else form.format(value)


def _training_lines(parts: dict) -> list[str]:
    lines = [
        "training (bfloat16, Adafactor, scanned layers, random init): part | status | "
        "batch | remat x microbatches | examples/s | tokens/s | MFU | step s median "
        "(spread) | peak | plan (source) | peak/plan | peak/CPU-compiler"
    ]
    for name, p in parts.items():
        if p.get("role") != "train":
            continue
        setting = p.get("setting") or {}
        lines.append(
            f"  {name} | {p['status']} | {p.get('batch_size', '-')} | {setting.get('remat', '-')}"
            f" x {setting.get('microbatches', '-')} | {_number(p.get('examples_per_s'), '{:.2f}')}"
            f" | {_number(p.get('tokens_per_s'), '{:.0f}')} | {_number(p.get('mfu'), '{:.1%}')}"
            f" | {_number(p.get('median_s'), '{:.3f}')} ({_number(p.get('spread'), '{:.1%}')}) | "
            f"{_bytes((p.get('memory') or {}).get('peak_bytes'))} | "
            f"{_bytes(p.get('planned_bytes'))}"
            f" ({p.get('plan_source', '-')}) | {_number(p.get('peak_over_plan'), '{:.2f}')} | "
            f"{_number(p.get('peak_over_cpu_plan'), '{:.2f}')}"
            + (
                f" | {p['error'] if 'error' in p else p.get('note', '')}"
                if p["status"] != "ok"
                else ""
            )
        )
    return lines


def _scoring_lines(parts: dict) -> list[str]:
    lines = ["scoring: part | status | examples/s | weights | peak | cap"]
    for name, p in parts.items():
        if p.get("role") == "score":
            cap = _bytes(p.get("cap_bytes")) + (
                "" if p.get("cap_enforced") or not p.get("cap_bytes") else " (not enforced here)"
            )
            lines.append(
                f"  {name} | {p['status']} | {_number(p.get('examples_per_s'), '{:.2f}')}"
                f" | {_bytes(p.get('weights_in_use_bytes'))} | "
                f"{_bytes((p.get('memory') or {}).get('peak_bytes'))} | {cap}"
                + (f" | {p.get('error', p.get('note', ''))}" if p["status"] != "ok" else "")
            )
    return lines


def _numerics_lines(parts: dict) -> list[str]:
    part = parts.get("numerics", {})
    compared = part.get("against_cpu_float32")
    if not compared:
        return [
            f"numerics: {part.get('status', 'not run')}: {part.get('note', part.get('error', ''))}"
        ]
    lines = ["numerics against XLA:CPU float32: dtype | metric | Spearman | max |delta log P(1)|"]
    for dtype, metrics in compared.items():
        lines += [
            f"  {dtype} | {name} | {_number(v['spearman'], '{:.5f}')} | "
            f"{v['max_abs_delta_log_p']:.2e}"
            for name, v in metrics.items()
        ]
    return lines


def table(record: dict) -> list[str]:
    """The printed summary of a record."""
    device, parts = record["device"], record["parts"]
    peak = device.get("bf16_peak_flops")
    lines = [
        f"device: {device.get('kind')} ({device.get('platform')}), memory "
        f"{_bytes(device.get('memory_bytes'))}, bf16 peak "
        f"{_number(peak and peak / 1e12, '{:.0f}')} TFLOP/s; versions {record.get('versions')}"
    ]
    lines += _training_lines(parts)
    nofit = parts.get("does_not_fit")
    if nofit:
        lines.append(
            f"does not fit: {nofit.get('setting')}: planned {_bytes(nofit.get('predicted_bytes'))}"
            f" > cap {_bytes(nofit.get('cap_bytes'))}: {nofit['status']} "
            f"{nofit.get('error', nofit.get('note', ''))}"
        )
    lines += _scoring_lines(parts) + _numerics_lines(parts)
    anchors = record["anchors"]
    for anchor in anchors["published"]:
        lines.append(
            f"anchor: {anchor['source']}, {anchor['model']} on {anchor['device']} "
            f"({anchor['precision']}), {anchor['input_length']}/{anchor['target_length']}"
            f" tokens: {anchor['sequences_per_s_per_gpu']} sequences/s per GPU"
        )
    ours = anchors["ours"]
    if ours:
        lines.append(
            f"ours at that shape: {ours['model']} on {ours['device']}: "
            f"{_number(ours.get('examples_per_s'), '{:.1f}')} sequences/s ({ours['status']})"
        )
    for goal in record["goals"]:
        lines.append(
            f"goal: {goal['goal']} ({goal['target']}): value {goal['value']}, met {goal['met']}"
        )
    return lines


# ------------------------------------------------------------------- schema
# The record's fields (README, "Accelerators"): top level, device, and what a
# part with status "ok" holds per role.
RECORD_FIELDS = (
    "schema",
    "date",
    "mode",
    "command",
    "commit",
    "budget_s",
    "wall_s",
    "host",
    "device",
    "versions",
    "shapes",
    "memory_fraction",
    "parts",
    "anchors",
    "goals",
)
DEVICE_FIELDS = ("platform", "kind", "count", "memory_bytes", "bf16_peak_flops", "peak_source")
PART_FIELDS = ("status", "role")
OK_FIELDS = {
    "probe": ("platform", "kind", "count", "memory", "versions"),
    "train": (
        "preset",
        "input_length",
        "target_length",
        "batch_size",
        "setting",
        "fit",
        "planned_bytes",
        "plan_source",
        "step_s",
        "median_s",
        "spread",
        "examples_per_s",
        "tokens_per_s",
        "model_flops_per_step",
        "mfu",
        "memory",
        "peak_over_plan",
        "cpu_planned_bytes",
        "peak_over_cpu_plan",
    ),
    "score": (
        "preset",
        "dtype",
        "quantize",
        "examples_per_s",
        "weights_in_use_bytes",
        "memory",
        "cap_bytes",
        "cap_enforced",
    ),
    "numerics": ("rows",),
    "cpu_plan": ("settings",),
}


def check_record(record: dict) -> None:
    """Raises ValueError naming the first field the record lacks."""

    def need(where: str, holder: Any, fields: tuple) -> None:
        if not isinstance(holder, dict):
            raise ValueError(f"accelerator record: {where} is not an object")
        missing = [field for field in fields if field not in holder]
        if missing:
            raise ValueError(f"accelerator record: {where} lacks {missing}")

    need("the record", record, RECORD_FIELDS)
    need("device", record["device"], DEVICE_FIELDS)
    for name, part in record["parts"].items():
        need(f"parts.{name}", part, PART_FIELDS)
        if part["status"] == "ok":
            need(f"parts.{name}", part, OK_FIELDS.get(part["role"], ()))
    need("anchors", record["anchors"], ("published", "ours"))
    for goal in record["goals"]:
        need("a goal", goal, ("goal", "target", "value", "met"))
