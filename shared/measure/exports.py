"""The files a timing run writes beside its JSON: the rows as a long-format CSV (one line per run
and phase) and a PNG chart of every phase's median with its spread."""

from __future__ import annotations

import csv
import io
from typing import Any

from shared.errors import PortbenchError
from shared.measure.guard import label
from shared.measure.output import SHORT
from shared.measure.timing_row import PHASES

CSV_FIELDS = ("source", "framework", "status", "reason", "spec_name", "spec_hash", "batch", "dtype",
              "precision", "threads", "device_class", "device_name", "phase", "phase_status", "median_s",
              "q1_s", "q3_s", "iqr_s", "n", "cpu_util", "foreign_cpu", "phase_note", "peak_rss_bytes",
              "allocator_peak_bytes", "gate_max_abs_err", "compile_cache", "gflops", "gemm_gflops",
              "roof_fraction")


def csv_text(rows: list[dict[str, Any]]) -> str:
    """Long format: one line per (run, phase), so a spreadsheet can pivot it any way."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        cond, mem = row.get("conditions", {}), row.get("memory", {})
        eq = row.get("equivalence") or {}
        err = max((c.get("max_abs_err", 0.0) for c in eq.values()), default=None)
        record = row.get("roofline") or {}
        gemm = (record.get("gemm") or {}).get("gflops")
        for name, _ in PHASES:
            phase = row.get("phases", {}).get(name)
            if phase is None:
                continue
            achieved = (record.get("phases") or {}).get(name) or {}
            writer.writerow({
                "source": row.get("source", ""), "framework": row["framework"], "status": row["status"],
                "reason": row.get("reason") or "", **{k: cond.get(k) for k in (
                    "spec_name", "spec_hash", "batch", "dtype", "threads", "device_class", "device_name")},
                "precision": cond.get("precision", "float32"),
                "phase": name, "phase_status": phase.get("status"), "median_s": phase.get("median"),
                "q1_s": phase.get("q1"), "q3_s": phase.get("q3"), "iqr_s": phase.get("iqr"),
                "n": phase.get("n"), "cpu_util": phase.get("cpu_util"),
                "foreign_cpu": phase.get("foreign_cpu"),
                "phase_note": phase.get("note") or phase.get("reason") or "",
                "peak_rss_bytes": mem.get("peak_rss_bytes"),
                "allocator_peak_bytes": mem.get("allocator_peak_bytes"), "gate_max_abs_err": err,
                "compile_cache": phase.get("cache") or "", "gflops": achieved.get("gflops"),
                "gemm_gflops": gemm if achieved else None, "roof_fraction": achieved.get("fraction"),
            })
    return buffer.getvalue()


def chart_png(rows: list[dict[str, Any]], title: str) -> bytes:
    """Per-phase median times per run as grouped horizontal bars on a log axis (phases span
    microseconds to tens of seconds), with the interquartile range as error bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [r for r in rows if r.get("phases")]
    if not shown:
        raise PortbenchError("nothing to chart: no run measured any phase")
    names = [p for p, _ in PHASES if any(r["phases"].get(p, {}).get("status") == "ok" for r in shown)]
    several_specs = len({r.get("conditions", {}).get("spec_hash") for r in shown}) > 1
    height = 0.8 / len(shown)
    fig, ax = plt.subplots(figsize=(9, 1.0 + 0.45 * len(names) * max(1, len(shown)) ** 0.5 + 1))
    for k, row in enumerate(shown):
        ys, meds, lo, hi = [], [], [], []
        for i, name in enumerate(names):
            phase = row["phases"].get(name)
            if not phase or phase.get("status") != "ok":
                continue
            ys.append(i + k * height)
            meds.append(phase["median"])
            lo.append(phase["median"] - phase.get("q1", phase["median"]))
            hi.append(phase.get("q3", phase["median"]) - phase["median"])
        status = "" if row.get("status") == "ok" else f" ({row['status'].upper()})"
        spec = f" [{row['conditions'].get('spec_name')}]" if several_specs else ""
        ax.barh(ys, meds, height=height, xerr=[lo, hi], capsize=2, label=label(row) + spec + status)
    ax.set_yticks([i + 0.4 - height / 2 for i in range(len(names))], [SHORT[n] for n in names])
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("seconds (median; bars = interquartile range; log scale)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(axis="x", which="both", alpha=0.3)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return buffer.getvalue()
