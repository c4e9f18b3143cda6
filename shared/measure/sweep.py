"""How cost grows with work (`compare.py sweep`): the same fair harness (shared/measure/runner.py)
at every (batch, image size) point, then per port a least-squares fit on log values,

    log time = a + b·log batch + c·log tokens      (and the same for peak memory),

so `b` is the slope against batch and `c` against the token count. A time slope against batch
well below 1 means a fixed cost per call (eager dispatch) still dominates; near 1, time grows
with the work. Against tokens, near 1 the linear layers dominate; toward 2, attention's n².
Every point is checked against the memory estimate (shared/core/budget.py) before anything runs.
"""

from __future__ import annotations

import csv
import dataclasses
import io
from collections.abc import Callable
from typing import Any

import numpy as np

from shared.core.budget import check_fits
from shared.core.spec import ModelSpec
from shared.measure.guard import FORWARD, metric_value
from shared.measure.output import peak_memory
from shared.measure.runner import RunConfig, run_all

Progress = Callable[[str], None]


def at_image(spec: ModelSpec, side: int | None) -> ModelSpec:
    """The spec with square `side`-pixel images (the token count follows), or as it is."""
    if side is None or (side == spec.image_height and side == spec.image_width):
        return spec
    return spec.replace(name=f"{spec.name}@{side}px", image_height=side, image_width=side)


def plan(spec: ModelSpec, batches: list[int], images: list[int] | None) -> list[tuple[ModelSpec, int]]:
    """Every (spec at an image size, batch) point, each refused before any runs if it cannot fit."""
    points = [(at_image(spec, side), batch) for side in (images or [None]) for batch in batches]
    for point_spec, batch in points:
        check_fits(point_spec, batch, "this sweep point")
    return points


def run_sweep(points: list[tuple[ModelSpec, int]], frameworks: list[str], config: RunConfig,
              progress: Progress = print) -> list[dict[str, Any]]:
    """Every point through the fair harness; each row says which point it is."""
    rows: list[dict[str, Any]] = []
    for i, (spec, batch) in enumerate(points, 1):
        progress(f"sweep point {i}/{len(points)}: {spec.name}, batch {batch}, "
                 f"{spec.derived.seq_len} tokens")
        point = {"batch": batch, "image": [spec.image_height, spec.image_width],
                 "tokens": spec.derived.seq_len}
        for row in run_all(frameworks, dataclasses.replace(config, spec=spec, batch=batch), progress):
            rows.append({**row, "sweep_point": point})
    return rows


def point_time(row: dict[str, Any]) -> float | None:
    """The row's best forward median (seconds), None when it has none or is not valid."""
    found = metric_value(row, FORWARD)
    return None if found is None else found[0]


def fit_slopes(batches: list[float], tokens: list[float], values: list[float]) -> dict[str, float | None]:
    """Least squares of log value on log batch and log tokens (intercept included). A variable
    that takes one value only has no slope (None); so has a fit with fewer points than terms."""
    if len(values) != len(batches) or len(values) != len(tokens):
        raise ValueError("batches, tokens and values must have one entry per point")
    y = np.log(np.asarray(values, dtype=np.float64))
    columns, names = [np.ones_like(y)], []
    for name, xs in (("batch", batches), ("tokens", tokens)):
        if len(set(xs)) > 1:
            columns.append(np.log(np.asarray(xs, dtype=np.float64)))
            names.append(name)
    out: dict[str, float | None] = {"batch": None, "tokens": None}
    if len(y) < len(columns) or not names:
        return out
    coefficients, *_ = np.linalg.lstsq(np.stack(columns, axis=1), y, rcond=None)
    out.update({name: float(c) for name, c in zip(names, coefficients[1:], strict=True)})
    return out


def fits(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """framework -> {"time": {"batch": slope, "tokens": slope}, "memory": {...}, "points": n}."""
    out: dict[str, dict[str, Any]] = {}
    for framework in dict.fromkeys(r["framework"] for r in rows):
        mine = [r for r in rows if r["framework"] == framework and "sweep_point" in r]
        timed = [(r, t) for r in mine if (t := point_time(r)) is not None and t > 0]
        sized = [(r, m) for r in mine if (m := peak_memory(r)[0])]
        out[framework] = {"points": len(timed),
                          "time": _fit([r for r, _ in timed], [t for _, t in timed]),
                          "memory": _fit([r for r, _ in sized], [float(m) for _, m in sized]),
                          "memory_source": peak_memory(mine[0])[1] if mine else None}
    return out


def _fit(rows: list[dict[str, Any]], values: list[float]) -> dict[str, float | None]:
    return fit_slopes([r["sweep_point"]["batch"] for r in rows],
                      [r["sweep_point"]["tokens"] for r in rows], values)


SWEEP_CSV_FIELDS = ("framework", "status", "batch", "image_height", "image_width", "tokens",
                    "time_median_s", "time_iqr_s", "mode", "peak_bytes", "memory_source")


def csv_text(rows: list[dict[str, Any]]) -> str:
    """One line per (port, point)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=SWEEP_CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        point = row["sweep_point"]
        found = metric_value(row, FORWARD)
        phase = row["phases"].get(found[1], {}) if found else {}
        peak, source = peak_memory(row)
        writer.writerow({"framework": row["framework"], "status": row["status"], "batch": point["batch"],
                         "image_height": point["image"][0], "image_width": point["image"][1],
                         "tokens": point["tokens"], "time_median_s": phase.get("median"),
                         "time_iqr_s": phase.get("iqr"), "mode": found[1] if found else "",
                         "peak_bytes": peak, "memory_source": source})
    return buffer.getvalue()


def chart_png(rows: list[dict[str, Any]], title: str) -> bytes:
    """Best forward time against batch (at the first image size) and, when the sweep has
    several image sizes, against tokens (at the first batch): one line per port, log-log."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = [r["sweep_point"] for r in rows]
    first_image, first_batch = points[0]["image"], points[0]["batch"]
    panels = [("batch", lambda p: p["image"] == first_image, f"image {first_image[0]}x{first_image[1]}")]
    if len({p["tokens"] for p in points}) > 1:
        panels.append(("tokens", lambda p: p["batch"] == first_batch, f"batch {first_batch}"))
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.2), squeeze=False)
    for ax, (axis, keep, fixed) in zip(axes[0], panels, strict=True):
        for framework in dict.fromkeys(r["framework"] for r in rows):
            line = sorted((r["sweep_point"][axis], t) for r in rows if r["framework"] == framework
                          and keep(r["sweep_point"]) and (t := point_time(r)) is not None)
            if line:
                ax.plot([x for x, _ in line], [t for _, t in line], marker="o", label=framework)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(f"{axis} ({fixed})")
        ax.set_ylabel("best forward, median seconds")
        ax.grid(which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return buffer.getvalue()
