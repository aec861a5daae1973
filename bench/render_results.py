"""Renders bench/results/*.json as the documentation's benchmark page: tables and plots.

    python bench/render_results.py --output_dir /tmp/benchmarks   # results.md + plots/*.png

The documentation build (docs/hooks.py) calls `render` on every build, so the
page always shows the records as they are; nothing here is written by hand.
A record is either a benchmark record (`seahorse-metrics/bench/1`, written by
every bench/ script through `common.make_record`) or an accelerator run
(`seahorse-metrics/accelerator-run/1`, bench/accelerator.py); the schemas are
in bench/results/README.md.
"""

from __future__ import annotations

import argparse
import glob
import io
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import RECORD_SCHEMA, RESULTS_DIR, check_bench_record  # noqa: E402

ACCELERATOR_SCHEMA = "seahorse-metrics/accelerator-run/1"
# The page's sections, in order: (bench, heading, what the script measures).
SECTIONS = (
    (
        "score",
        "Scoring throughput (`bench/score.py`)",
        "mT5-small shape, random weights: our scorer (JAX float32, packed, int8; the CTranslate2 "
        "engine) against Hugging Face PyTorch and raw CTranslate2 on the same token ids.",
    ),
    (
        "real_size",
        "Scoring at real size (`bench/real_size.py`)",
        "A random mT5-large (or XL) written as the hub serves it, loaded and scored by each engine "
        "in its own process: speed, load time and peak memory.",
    ),
    (
        "kernels",
        "Kernels (`bench/kernels.py`)",
        "The matrix products of scoring, one self-attention, and the first-step program with its "
        "cross-attention folded against projected.",
    ),
    (
        "train",
        "Training step (`bench/train.py`)",
        "Our train step against Hugging Face PyTorch's, mT5-small shape, and the settings of "
        "training at size (remat, scanned layers, packing).",
    ),
    (
        "plan_fit",
        "Memory plans (`seahorse-metrics plan`)",
        "What `plan` and `plan --fit` printed for the paper's run: per-device memory of each "
        "setting tried, from the CPU compiler (a guide for accelerators: see the training guide).",
    ),
    (
        "plan_compilers",
        "The CPU compiler's plan against the GPU compiler's (`bench/plan_compilers.py`)",
        "The same training and scoring programs compiled by XLA:CPU (`plan` without a GPU) and by "
        "XLA:GPU for a GPU that is not here (`plan --compile_for`): each one's per-device figure.",
    ),
    (
        "multi_question",
        "Six questions, one metric (`bench/multi_question.py`)",
        "One multi-question metric scoring all six questions (one encoder pass, the questions' "
        "decoder prefixes side by side) against one question and against six single metrics.",
    ),
    (
        "int8_agreement",
        "Int8 against float32 (`bench/int8_agreement.py`)",
        "How int8 scores of the demo's trained metrics rank against their float32 scores.",
    ),
    (
        "ct2_int8_emulation",
        "CTranslate2's int8, emulated (`bench/ct2_int8_emulation.py`)",
        "CTranslate2's int8 arithmetic emulated in PyTorch, switched on part by part.",
    ),
    (
        "bfloat16",
        "bfloat16 against float32 (`bench/bfloat16.py`)",
        "How bfloat16 scores of the demo's trained metrics rank against their float32 scores.",
    ),
    (
        "serve",
        "Serving (`bench/serve.py`)",
        "`seahorse-metrics serve` under concurrent clients against in-process scoring.",
    ),
    (
        "beam",
        "Apache Beam (`bench/beam.py`)",
        "`score --runner DirectRunner` on two workers against `score` in one process.",
    ),
    (
        "gpu_attention",
        "GPU attention (`bench/gpu_attention.py`)",
        "cuDNN's fused attention against XLA's and ours, and whole networks in bfloat16.",
    ),
    (
        "accelerator",
        "Accelerator runs (`bench/accelerator.py`)",
        "Training, memory, scoring and numerics on a lent accelerator (see the accelerator page).",
    ),
)
MARKER = "<!-- bench-results -->"


# ------------------------------------------------------------------ reading
def load_records(directory: str = RESULTS_DIR) -> list[dict]:
    """Every record in `directory`, each with `_file` (its file name).

    Raises:
      ValueError: naming the file of a record that is not JSON or fails its schema.
    """
    records = []
    for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
        try:
            with open(path, encoding="utf-8") as handle:
                record = json.load(handle)
        except (OSError, json.JSONDecodeError) as error:
            raise ValueError(f"{path}: not a JSON record ({error})") from error
        try:
            check_any_record(record)
        except ValueError as error:
            raise ValueError(f"{path}: {error}") from error
        record["_file"] = os.path.basename(path)
        records.append(record)
    return records


def check_any_record(record: dict) -> None:
    """Checks a record of either schema; raises ValueError naming what is wrong."""
    schema = record.get("schema") if isinstance(record, dict) else None
    if schema == RECORD_SCHEMA:
        check_bench_record(record)
    elif schema == ACCELERATOR_SCHEMA:
        from accelerator_report import check_record

        check_record(record)
    else:
        raise ValueError(
            f"schema {schema!r} is neither {RECORD_SCHEMA!r} nor {ACCELERATOR_SCHEMA!r}"
        )


# ------------------------------------------------------------------ formatting
def figure_text(value) -> str:
    """A figure as a table cell: 4 significant digits, ranges as low-high."""
    if value is None:
        return ""
    if isinstance(value, list):
        return f"{figure_text(value[0])}-{figure_text(value[1])}"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10000 else str(value)
    if isinstance(value, float):
        if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e6):
            return f"{value:.2e}"
        return f"{value:.4g}"
    return str(value).replace("|", "\\|")


def host_text(record: dict) -> str:
    """The host (or device) a record was measured on, in a line."""
    if record.get("device", {}).get("kind"):
        device = record["device"]
        return f"{device['kind']} ({device.get('platform') or 'device'})"
    host = record["host"]
    if isinstance(host.get("cpu"), str) and host["cpu"].startswith("cpu:"):
        return host["cpu"][4:].strip()  # an accelerator record's machine line
    numbers = ", ".join(
        part
        for part in (
            f"family {host['family']}" if host.get("family") else "",
            f"model {host['model']}" if host.get("model") else "",
        )
        if part
    )
    text = host.get("cpu") or "unknown CPU"
    text += f" ({numbers})" if numbers else ""
    text += f", {host['cores']} cores" if host.get("cores") else ""
    flags = host.get("flags")
    return text + (", " + " ".join(flags) if flags else "")


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + [
        "| " + " | ".join(row) + " |" for row in rows
    ]


def variants_table(record: dict) -> list[str]:
    """Variant x figure, the primary figure first."""
    primary = record["primary"]
    figures = [primary] + sorted(
        {figure for values in record["variants"].values() for figure in values} - {primary}
    )
    header = ["variant"] + [
        f"{name} ({record['unit']})" if name == primary else name for name in figures
    ]
    rows = [
        [figure_text(name)] + [figure_text(values.get(figure)) for figure in figures]
        for name, values in record["variants"].items()
    ]
    return table(header, rows)


def record_section(record: dict, plot_name: str | None) -> list[str]:
    """A benchmark record's heading, provenance, plot, tables and notes."""
    lines = [f"### {record['date'][:10]} · {host_text(record)}", "", record["title"] + ".", ""]
    provenance = [f"`{record['command']}`", f"record `bench/results/{record['_file']}`"]
    if record.get("commit"):
        provenance.append(f"commit `{record['commit'][:10]}`")
    if record["source"] != "measured":
        provenance.append(record["source"])
    lines += ["; ".join(provenance) + ".", ""]
    versions = {k: v for k, v in (record.get("versions") or {}).items() if v}
    if versions:
        lines += ["Versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()) + ".", ""]
    if record.get("conditions"):
        lines += [f"Conditions: {record['conditions']}.", ""]
    if plot_name:
        lines += [f"![{record['title']}](plots/{plot_name})", ""]
    lines += variants_table(record) + [""]
    if record["ratios"]:
        lines += table(
            ["ratio", "value"],
            [[figure_text(name), figure_text(value)] for name, value in record["ratios"].items()],
        ) + [""]
    for note in record.get("notes", []):
        lines += [f"- {note}"]
    return lines + ([""] if record.get("notes") else [])


def accelerator_section(record: dict) -> list[str]:
    from accelerator_report import table as accelerator_table

    return (
        [
            f"### {record['date'][:10]} · {host_text(record)} ({record['mode']})",
            "",
            f"`{record['command']}`; record `bench/results/{record['_file']}`.",
            "",
            "```text",
        ]
        + accelerator_table(record)
        + ["```", ""]
    )


# ------------------------------------------------------------------ plots
def plot_png(record: dict) -> bytes | None:
    """A horizontal bar chart of the primary figure per variant (None: fewer than two)."""
    primary = record["primary"]
    bars = [
        (name, values.get(primary))
        for name, values in record["variants"].items()
        if isinstance(values.get(primary), (int, float, list))
    ]
    if len(bars) < 2:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [name for name, _ in bars]
    middle = [sum(v) / 2 if isinstance(v, list) else v for _, v in bars]
    spread = [(v[1] - v[0]) / 2 if isinstance(v, list) else 0 for _, v in bars]
    plot = record.get("plot", {})
    colors = ["#4c72b0"] * len(bars)
    if plot.get("color_by"):  # e.g. a plan's "fits": yes / no
        colors = [
            "#55a868"
            if str(record["variants"][name].get(plot["color_by"])).startswith(("yes", "fits"))
            else "#c44e52"
            for name in names
        ]
    figure, axes = plt.subplots(figsize=(8, 0.9 + 0.32 * len(bars)), dpi=100)
    axes.barh(range(len(bars)), middle, xerr=spread if any(spread) else None, color=colors)
    axes.set_yticks(
        range(len(bars)),
        [name if len(name) <= 60 else name[:57] + "..." for name in names],
        fontsize=8,
    )
    axes.invert_yaxis()
    axes.set_xlabel(f"{primary} ({record['unit']})")
    if plot.get("line") is not None:
        axes.axvline(
            plot["line"], color="black", linestyle="--", linewidth=1, label=plot.get("line_label")
        )
        axes.legend(fontsize=8, loc="lower right")
    axes.set_title(f"{record['date'][:10]}: {record['bench']}", fontsize=9)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    return buffer.getvalue()


# ------------------------------------------------------------------ the page
def render(records: list[dict]) -> tuple[str, dict[str, bytes]]:
    """The page's Markdown (its sections, newest record first) and its plots
    ({file name under plots/: PNG bytes})."""
    lines, plots = [], {}
    order = [bench for bench, _, _ in SECTIONS]
    unknown = sorted({r.get("bench", "accelerator") for r in records} - set(order))
    if unknown:
        raise ValueError(
            f"records of unknown benchmarks {unknown}: add them to "
            "bench/render_results.py's SECTIONS"
        )
    for bench, heading, description in SECTIONS:
        found = sorted(
            (r for r in records if r.get("bench", "accelerator") == bench),
            key=lambda r: (r["date"], r["_file"]),
            reverse=True,
        )
        lines += [f"## {heading}", "", description, ""]
        if not found:
            lines += ["No record yet.", ""]
        for record in found:
            if record["schema"] == ACCELERATOR_SCHEMA:
                lines += accelerator_section(record)
                continue
            png = plot_png(record)
            name = slug(record["_file"][: -len(".json")]) + ".png" if png else None
            if png:
                plots[name] = png
            lines += record_section(record, name)
    return "\n".join(lines), plots


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results_dir", default=RESULTS_DIR)
    parser.add_argument(
        "--output_dir", required=True, help="Writes results.md and plots/*.png here."
    )
    args = parser.parse_args(argv)
    text, plots = render(load_records(args.results_dir))
    os.makedirs(os.path.join(args.output_dir, "plots"), exist_ok=True)
    with open(os.path.join(args.output_dir, "results.md"), "w", encoding="utf-8") as handle:
        handle.write(text + "\n")
    for name, png in plots.items():
        with open(os.path.join(args.output_dir, "plots", name), "wb") as handle:
            handle.write(png)
    print(f"{len(plots)} plots and results.md in {args.output_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
