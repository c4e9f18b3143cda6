"""The precision ladder measured: every preset in every native port at every rung against the
float64 reference and pairwise (`compare.py tolerances`). Its maxima, times a stated safety
factor, are the low-rung bounds in shared/core/tolerance.py; its minima give each rung's floor.

Gaps are normalised by max(1, max |float64 logit|), as the bounds are (rounding is relative)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from shared.core.inputs import probe_batch
from shared.core.precision import LOW_RUNGS, Precision
from shared.core.presets import get_preset
from shared.core.tolerance import FLOOR_FRACTION, LARGE_MODEL_PARAMS, SAFETY, logit_scale, size_class
from shared.core.weights import init_weights
from shared.runtime.verify import Case, Entry, verify

SMALL_BATCH, LARGE_BATCH = 8, 2  # ViT-S/B-sized presets at batch 2: a reference pass is seconds


@dataclass
class Measured:
    spec: str
    size: str
    rung: str
    framework: str
    gap: float | None  # normalised |port - float64|; None when unavailable or not comparable
    status: str
    reason: str | None = None


def ladder_cases(presets: list[str], rungs: tuple[str, ...] = LOW_RUNGS) -> list[Case]:
    cases = []
    for name in presets:
        spec = get_preset(name)
        batch = LARGE_BATCH if spec.derived.params >= LARGE_MODEL_PARAMS else SMALL_BATCH
        tensors, images = init_weights(spec, 0), probe_batch(spec, batch)
        cases += [Case(spec, tensors, images, precision=Precision.from_rung(r)) for r in rungs]
    return cases


def measure(presets: list[str], frameworks: list[str], rungs: tuple[str, ...] = LOW_RUNGS,
            timeout: float = 1800.0, device: str = "cpu") -> tuple[list[Measured], list[dict[str, Any]]]:
    """Every case in one worker per framework; normalised gaps per entry and per pair."""
    cases = ladder_cases(presets, rungs)
    entries, pairwise = verify(cases, frameworks, device, timeout)
    scales = {(c.spec.name, c.precision.rung): logit_scale(c.reference) for c in cases}
    measured = [_measured(e, scales[(e.spec, e.rung)], cases) for e in entries]
    pairs = []
    for p in pairwise:
        case = next(c for c in cases if c.spec.name == p["spec"] and c.precision.rung == p["rung"])
        pairs.append({**p, "gap": p["max_abs_diff"] / scales[(case.spec.name, p["rung"])]})
    return measured, pairs


def _measured(entry: Entry, scale: float, cases: list[Case]) -> Measured:
    spec = next(c.spec for c in cases if c.spec.name == entry.spec)
    gap = None if entry.max_abs_diff is None else entry.max_abs_diff / scale
    return Measured(entry.spec, size_class(spec), entry.rung, entry.framework, gap, entry.status,
                    entry.error)


def summary(measured: list[Measured]) -> dict[str, dict[str, tuple[float, float]]]:
    """rung -> size class -> (smallest, largest) normalised gap over every port that ran."""
    out: dict[str, dict[str, tuple[float, float]]] = {}
    for m in measured:
        if m.gap is None:
            continue
        low, high = out.setdefault(m.rung, {}).get(m.size, (np.inf, 0.0))
        out[m.rung][m.size] = (min(low, m.gap), max(high, m.gap))
    return out


def markdown(measured: list[Measured], pairs: list[dict[str, Any]], date: str) -> str:
    """docs/tolerances.md: the bounds, then every measurement they come from."""
    table = summary(measured)
    lines = [f"# Measured tolerances, {date}", "",
             "Written by `python compare.py tolerances --markdown docs/tolerances.md --force`. Each gap is",
             "max |port logits - float64 logits| / max(1, max |float64 logit|) on the preset's seeded",
             f"weights and probe batch ({SMALL_BATCH} images; {LARGE_BATCH} for ViT-S/16 and ViT-B/16), on",
             f"this machine's CPU. The bound is the largest gap x {SAFETY:g}; the floor (below it a port",
             "did not compute at the rung) is a quarter of the smallest.", "",
             "| rung | size | smallest gap | largest gap | bound | floor |", "|---|---|---|---|---|---|"]
    for rung, sizes in table.items():
        for size, (low, high) in sorted(sizes.items()):
            bound, floor = high * SAFETY, low * FLOOR_FRACTION
            lines.append(f"| {rung} | {size} | {low:.2e} | {high:.2e} | {bound:.2e} | {floor:.2e} |")
    lines += ["", "## Every port, every preset", "", "| preset | rung | framework | gap | status |",
              "|---|---|---|---|---|"]
    for m in measured:
        gap = "-" if m.gap is None else f"{m.gap:.2e}"
        status = m.status if m.status != "UNAVAILABLE" else f"unavailable: {m.reason}"
        lines.append(f"| {m.spec} | {m.rung} | {m.framework} | {gap} | {status} |")
    worst: dict[str, float] = {}
    for p in pairs:
        worst[p["rung"]] = max(worst.get(p["rung"], 0.0), p["gap"])
    lines += ["", "## Pairwise (two ports at one rung)", "", "| rung | largest gap between two ports |",
              "|---|---|"] + [f"| {r} | {g:.2e} |" for r, g in worst.items()]
    return "\n".join(lines) + "\n"
