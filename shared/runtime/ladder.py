"""The precision ladder measured: every preset in every native port at every rung against the
float64 reference, against the rung-emulating reference (shared/core/rounding.py) and pairwise
(`compare.py tolerances`). The ratios port gap / emulated gap, measured on each arithmetic path
of the CPU (native bfloat16 kernels, and the AVX2-limited emulation), are what the low-rung
bounds in shared/core/tolerance.py are multiples of: the largest ratio x MARGIN is a rung's
bound, the smallest x FLOOR_FRACTION its floor.

Gaps are also shown normalised by max(1, max |float64 logit|), so presets can be compared."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

import numpy as np

from ports import NATIVE
from shared.core.data_record import Bound, DataRecord, derived
from shared.core.equivalence import Gap, PortVerdict
from shared.core.inputs import probe_batch
from shared.core.precision import LOW_RUNGS, RUNGS, Precision
from shared.core.presets import PRESETS, get_preset
from shared.core.tolerance import (
    FLOOR_FRACTION,
    LARGE_MODEL_PARAMS,
    MARGIN,
    bound_multiple,
    floor_multiple,
    logit_scale,
    size_class,
)
from shared.core.weights import init_weights
from shared.runtime.verify import VerifyCase, verify

SMALL_BATCH, LARGE_BATCH = 8, 2  # ViT-S/B-sized presets at batch 2: a reference pass is seconds
SCHEMA = "portbench.tolerances/2"  # a `compare.py tolerances --json` file: `LadderFile`
Rung = Literal[RUNGS]
Port = Literal[NATIVE]  # the ladder measures the native ports only


def check_preset(record: DataRecord, name: str) -> None:
    """A record's `spec` names a preset (`tolerances --presets` measures nothing else)."""
    if name not in PRESETS:
        record.refuse(f".spec is {name!r:.40}, expected a preset name (compare.py tolerances --presets)")


@dataclass(frozen=True)
class Measured(DataRecord):
    """One port at one rung on one preset, its gaps normalised by max(1, max |float64 logit|)
    (`compare.py tolerances --json`: one per entry, read back by `--from`)."""

    KIND: ClassVar[str] = "ladder entry"

    spec: str
    size: Literal["small", "large"]  # shared/core/tolerance.size_class
    rung: Rung
    framework: Port
    gap: Gap | None  # normalised |port - float64|; None when unavailable or not comparable
    status: Literal["PASS", "FAIL", "UNAVAILABLE"]  # as the verdict states it (PortVerdict.status)
    reason: str | None = None
    emulated: Gap | None = None  # normalised |emulated - float64| on the same case
    # gap / emulated gap: what a low rung's bound is a multiple of
    ratio: Annotated[float, Bound(low=0)] | None = derived()

    def derived_values(self) -> dict[str, Any]:
        return {"ratio": None if self.gap is None or not self.emulated else self.gap / self.emulated}

    def validate(self) -> None:
        """A preset's entry, whose ratio is a number (a gap of 1e308 over a small emulated gap
        would be an infinite one: no port's logits are that far off)."""
        check_preset(self, self.spec)
        if self.ratio is not None and not math.isfinite(self.ratio):
            self.refuse(f".gap is {self.gap!r}, expected a gap whose ratio to the emulated gap "
                        f"{self.emulated!r} is finite")


@dataclass(frozen=True)
class Pair(DataRecord):
    """Two ports at one rung on one preset (shared/runtime/verify.pairwise_gaps), with `gap`, their
    largest difference normalised as the entries' gaps are; NaN where it could not be computed."""

    KIND: ClassVar[str] = "ladder pair"

    spec: str
    rung: Rung
    a: Port
    b: Port
    max_abs_diff: Annotated[float, Bound(low=0, nan=True)]
    passed: bool
    gap: Annotated[float, Bound(low=0, nan=True)]

    def validate(self) -> None:
        check_preset(self, self.spec)


@dataclass(frozen=True, kw_only=True)
class LadderFile(DataRecord):
    """A `compare.py tolerances --json` file: one arithmetic path's run, checked field by field
    before it is written and when `--from` reads it back."""

    KIND: ClassVar[str] = "tolerances file"

    schema: Literal[SCHEMA]
    date: str
    path: str  # the arithmetic path's label (`compare.py tolerances`, arithmetic_path)
    entries: list[Measured]
    pairwise: list[Pair]


def ladder_cases(presets: list[str], rungs: tuple[str, ...] = LOW_RUNGS) -> list[VerifyCase]:
    cases = []
    for name in presets:
        spec = get_preset(name)
        batch = LARGE_BATCH if spec.derived.params >= LARGE_MODEL_PARAMS else SMALL_BATCH
        tensors, images = init_weights(spec, 0), probe_batch(spec, batch)
        cases += [VerifyCase(spec, tensors, images, precision=Precision.from_rung(r)) for r in rungs]
    return cases


def measure(presets: list[str], frameworks: list[str], rungs: tuple[str, ...] = LOW_RUNGS,
            timeout: float = 1800.0, device: str = "cpu") -> tuple[list[Measured], list[dict[str, Any]]]:
    """Every case in one worker per framework; normalised gaps per entry and per pair."""
    cases = ladder_cases(presets, rungs)
    verdicts, pairwise = verify(cases, frameworks, device, timeout)
    by_key = {(c.spec.name, c.precision.rung): c for c in cases}
    measured = [_measured(v, by_key[(v.spec, v.rung)]) for v in verdicts]
    pairs = []
    for p in pairwise:
        case = by_key[(p["spec"], p["rung"])]
        pairs.append({**p, "gap": p["max_abs_diff"] / logit_scale(case.reference)})
    return measured, pairs


def _measured(verdict: PortVerdict, case: VerifyCase) -> Measured:
    scale = logit_scale(case.reference)
    gap = None if verdict.max_abs_diff is None else verdict.max_abs_diff / scale
    emulated = None if case.emulated_gap is None else case.emulated_gap / scale
    return Measured(verdict.spec, size_class(case.spec), verdict.rung, verdict.framework, gap, verdict.status,
                    verdict.reason, emulated)


def ratio_summary(measured: list[Measured]) -> dict[str, tuple[float, float]]:
    """rung -> (smallest, largest) port gap / emulated gap over every port that ran."""
    out: dict[str, tuple[float, float]] = {}
    for m in measured:
        if m.ratio is None:
            continue
        low, high = out.get(m.rung, (np.inf, 0.0))
        out[m.rung] = (min(low, m.ratio), max(high, m.ratio))
    return out


HEADER = """# Measured tolerances, {date}

Written by `python compare.py tolerances --from A.json --from B.json --markdown docs/tolerances.md
--force` from one `compare.py tolerances --json` run per arithmetic path. Each case is a preset's
seeded weights and probe batch ({small} images; {large} for ViT-S/16 and ViT-B/16). *gap* is
max |port logits - float64 logits| and *emulated* max |rung-emulating reference - float64 logits|
on the same case (shared/core/rounding.py), both divided by max(1, max |float64 logit|); *ratio*
is gap / emulated. A rung's bound is (its largest ratio on any path) x {margin:g} x the case's
emulated gap; its floor, below which a port did not compute at the rung, is (its smallest ratio)
x {fraction:g} x it (shared/core/tolerance.py, MEASURED_RATIOS)."""


def _ratios_table(summaries: dict[str, dict[str, tuple[float, float]]]) -> list[str]:
    """The measured ratio ranges per path beside the multiples shared/core/tolerance.py states
    (from its MEASURED_RATIOS: these ranges, rounded outwards)."""
    rungs = list(dict.fromkeys(r for s in summaries.values() for r in s))
    heads = [label.split(" (")[0] for label in summaries]
    lines = ["| rung | " + " | ".join(f"ratios, {h}" for h in heads) + " | bound multiple | floor multiple |",
             "|---|" + "---|" * (len(summaries) + 2)]
    for rung in rungs:
        cells = [f"{s[rung][0]:.2f} .. {s[rung][1]:.2f}" if rung in s else "-" for s in summaries.values()]
        lines.append(f"| {rung} | " + " | ".join(cells)
                     + f" | {bound_multiple(rung):.3g} | {floor_multiple(rung):.3g} |")
    return ["", *lines, "", *(f"- {label}" for label in summaries)]


def _same_on_both(paths: dict[str, tuple[list[Measured], list[dict[str, Any]]]]) -> list[str]:
    """Per framework, how many gaps were bit-identical on every path (its kernels ignore the ISA)."""
    if len(paths) < 2:
        return []
    runs = [{(m.spec, m.rung, m.framework): m.gap for m in measured if m.gap is not None}
            for measured, _ in paths.values()]
    counts = []
    for fw in dict.fromkeys(k[2] for k in runs[0]):
        keys = [k for k in runs[0] if k[2] == fw]
        same = sum(all(r.get(k) == runs[0][k] for r in runs[1:]) for k in keys)
        counts.append(f"{fw} {same} of {len(keys)}")
    return ["", "Gaps bit-identical on every path: " + ", ".join(counts) + "."]


def _entries_table(label: str, measured: list[Measured], pairs: list[dict[str, Any]]) -> list[str]:
    lines = ["", f"## Every port, every preset: {label}", "",
             "| preset | rung | framework | gap | emulated | ratio | status |", "|---" * 7 + "|"]
    for m in measured:
        gap = "-" if m.gap is None else f"{m.gap:.2e}"
        emulated = "-" if m.emulated is None else f"{m.emulated:.2e}"
        ratio = "-" if m.ratio is None else f"{m.ratio:.2f}"
        status = m.status if m.status != "UNAVAILABLE" else f"unavailable: {m.reason}"
        lines.append(f"| {m.spec} | {m.rung} | {m.framework} | {gap} | {emulated} | {ratio} | {status} |")
    worst: dict[str, float] = {}  # NaN (a pair whose gap could not be computed) stays NaN: shown "nan"
    for p in pairs:
        known, gap = worst.get(p["rung"], 0.0), p["gap"]
        worst[p["rung"]] = known if math.isnan(known) else gap if math.isnan(gap) else max(known, gap)
    return [*lines, "", f"Pairwise (two ports at one rung), {label}:", "",
            "| rung | largest gap between two ports |", "|---|---|",
            *(f"| {r} | {g:.2e} |" for r, g in worst.items())]


def markdown(paths: dict[str, tuple[list[Measured], list[dict[str, Any]]]], date: str) -> str:
    """docs/tolerances.md: the ratios per rung and path, the multiples they give, then every
    measurement they come from. `paths`: path label -> (entries, pairs) measured on it."""
    lines = [HEADER.format(date=date, small=SMALL_BATCH, large=LARGE_BATCH, margin=MARGIN,
                           fraction=FLOOR_FRACTION)]
    lines += _ratios_table({label: ratio_summary(m) for label, (m, _) in paths.items()})
    lines += _same_on_both(paths)
    for label, (measured, pairs) in paths.items():
        lines += _entries_table(label, measured, pairs)
    return "\n".join(lines) + "\n"
