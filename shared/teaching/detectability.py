"""What an equivalence test can still see at each precision rung.

Every forward entry of the catalogue (`shared.teaching.divergences`) moves the logits by a
measured amount: the float64 gap between the pinned function and each unpinned variant
(`shared.teaching.variants`) on a preset's seeded weights and probe batch. That gap is normalised
by `logit_scale` = max(1, max |reference logit|) and set beside each rung's bound on that case
(`logit_atol(spec, reference, rung, emulated gap) / logit_scale`: below float32 a multiple of the
case's own emulated rounding gap, shared/core/rounding.py; read from `shared.core.tolerance` when
this runs, never copied): a test at that rung catches the difference when the gap is more than
MARGIN x the bound, misses it when the gap is under the bound / MARGIN, and in between the
verdict is decided by that run's rounding noise ("marginal": the port's own error, up to
bound / MARGIN, adds to or cancels the gap). MARGIN is tolerance.MARGIN, the factor between the
largest port error measured and the bound, so both verdicts hold for any port within it.

Entries whose demonstration lives in a framework API (no variant through the reference) are
listed with their demonstration's headline gap, which is not a logit gap on a seeded case, and
"not modelled" at every rung.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import ClassVar, Literal, get_args

import numpy as np

from shared.core.data_record import DataRecord, stored_as
from shared.core.equivalence import Gap
from shared.core.precision import LOW_RUNGS, Precision
from shared.core.reference import forward
from shared.core.rounding import emulated_gap
from shared.core.spec import ModelSpec
from shared.core.tolerance import MARGIN, logit_atol, logit_scale
from shared.teaching.demo import demo_case, gap
from shared.teaching.divergences import CATALOGUE, entry
from shared.teaching.row import Entry
from shared.teaching.variants import Case, variant

RUNG_COLUMNS = ("float32", *LOW_RUNGS)  # TF32 is unmeasured: it borrows float16-pure's bound
# MARGIN (shared/core/tolerance.py): within this factor of a bound either way, a verdict is
# rounding noise: "marginal"
Verdict = Literal["caught", "missed", "marginal", "not modelled"]
CAUGHT, MISSED, MARGINAL, NOT_MODELLED = get_args(Verdict)

@dataclass(frozen=True)
class Measured:
    """One variant on one case: the pinned case, the mutated one and the float64 gap."""

    entry: str
    variant: str
    label: str  # the spec it ran on, as printed: "quadrant", "quadrant (channels=3)"
    case: Case
    mutated: Case
    reference: np.ndarray  # float64 logits of the pinned case
    gap: float  # max |mutated - pinned| float64 logits
    emulated: dict[str, float | None]  # rung -> the pinned case's emulated rounding gap

    @property
    def scale(self) -> float:
        return logit_scale(self.reference)

    def bound(self, rung: str) -> float:
        """The rung's logit bound on this case, normalised like the gap."""
        precision = Precision.from_rung(rung)
        return logit_atol(self.case.spec, self.reference, precision, self.emulated[rung]) / self.scale

    def verdict(self, rung: str) -> str:
        return classify(self.gap / self.scale, self.bound(rung))


@dataclass(frozen=True)
class Row(DataRecord):
    """One variant (or a variant-less entry's demonstration) against every rung's bound
    (`lessons --rungs --json`: one per row)."""

    KIND: ClassVar[str] = "detectability row"

    entry: str
    variant: str | None  # None for an entry without a variant
    label: str = stored_as("spec")  # the spec measured on, or where the demonstration's gap comes from
    gap: Gap | None  # normalised logit gap; for a demonstration, its own headline
    verdicts: dict[str, Verdict] = field(default_factory=dict)  # rung -> caught | missed | ...
    bounds: dict[str, Gap] = field(default_factory=dict)  # rung -> normalised bound


def classify(gap_value: float, bound: float) -> str:
    if gap_value > MARGIN * bound:
        return CAUGHT
    if gap_value < bound / MARGIN:
        return MISSED
    return MARGINAL


def measure(entry_key: str, variant_key: str) -> Measured | None:
    """The variant on the first of the entry's cases it applies to (`Entry.cases`: the specs of the
    float32 mutation tests), or None (it is the pinned setting on every one of them)."""
    for on in entry(entry_key).cases:
        case, reference, emulated = _pinned(on.spec())
        mutated = variant(variant_key).apply(case)
        if mutated is None:
            continue
        moved = gap(forward(mutated.spec, mutated.weights, mutated.images), reference)
        return Measured(entry_key, variant_key, on.label, case, mutated, reference, moved, dict(emulated))
    return None


@functools.lru_cache(maxsize=16)
def _pinned(spec: ModelSpec) -> tuple[Case, np.ndarray, dict[str, float | None]]:
    """The pinned case on `spec`, its float64 logits and its emulated rounding gap per rung: one
    rung-emulating pass per rung and spec, shared by every variant measured on that spec (most
    entries measure on quadrant). Variants never mutate the case they are applied to."""
    case = demo_case(spec)
    reference = forward(case.spec, case.weights, case.images)
    emulated = {r: emulated_gap(case.spec, case.weights, case.images, Precision.from_rung(r), reference)
                for r in RUNG_COLUMNS}
    return case, reference, emulated


def _demo_row(e: Entry, run_demos: bool) -> Row:
    demo = e.run_demo() if run_demos else None
    label = "demo: " + (demo.lines[0] if demo and demo.lines else "not run")
    return Row(e.key, None, label, demo.gap if demo else None, dict.fromkeys(RUNG_COLUMNS, NOT_MODELLED))


def forward_entries() -> list[str]:
    """The catalogue's forward divergences, the entries this table has a row for."""
    return [e.key for e in CATALOGUE if e.kind == "forward"]


def rows(run_demos: bool = True, only: str | None = None) -> tuple[list[Row], list[str]]:
    """One row per forward variant (in catalogue order) and per variant-less forward entry, or
    only entry `only`'s; and the variants left out because they compute the pinned function on
    every case tried."""
    out: list[Row] = []
    same: list[str] = []
    for e in CATALOGUE:
        if e.kind != "forward" or only not in (None, e.key):
            continue
        if not e.variants:
            out.append(_demo_row(e, run_demos))
            continue
        for key in e.variants:
            m = measure(e.key, key)
            if m is None or m.gap == 0.0:
                same.append(key)
                continue
            out.append(Row(e.key, key, m.label, m.gap / m.scale,
                           {r: m.verdict(r) for r in RUNG_COLUMNS},
                           {r: m.bound(r) for r in RUNG_COLUMNS}))
    return out, same


def bounds_line(table: list[Row]) -> str:
    """The bounds the verdicts were taken against (small models; each row's own is in Row)."""
    first = next((r for r in table if r.bounds), None)
    if first is None:
        return ""
    return "bounds / scale on " + first.label + ": " + ", ".join(
        f"{r} {b:.2g}" for r, b in first.bounds.items())


def _cells(row: Row) -> list[str]:
    shown = "-" if row.gap is None else f"{row.gap:.2g}"
    if not row.variant and row.gap is not None:  # the demonstration's own headline, not a logit gap
        shown = f"demo {shown}"
    return [row.entry, row.variant or "(no variant)", row.label if row.variant else "", shown,
            *(row.verdicts[r] for r in RUNG_COLUMNS)]


def text_table(table: list[Row], same: list[str]) -> list[str]:
    head = ["entry", "variant", "spec", "gap/scale", *RUNG_COLUMNS]
    body = [_cells(r) for r in table]
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(x, widths, strict=True)).rstrip() for x in [head, *body]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines += [bounds_line(table), f"caught: gap > {MARGIN:g} x bound; missed: gap < bound / {MARGIN:g}; "
              "marginal: in between (decided by the run's rounding noise)"]
    lines += [f"demo {r.entry}: {r.label.removeprefix('demo: ')}" for r in table if not r.variant]
    if same:
        lines.append("the pinned function on the specs tried (left out): " + "; ".join(same))
    return lines


def markdown_table(table: list[Row]) -> list[str]:
    head = ["entry", "variant", "spec", "gap / scale", *RUNG_COLUMNS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in table:
        cells = _cells(r)
        if r.variant:
            cells[1] = f"`{cells[1]}`"
        else:  # where the demonstration's headline comes from
            cells[2] = r.label.removeprefix("demo: ")
        lines.append("| " + " | ".join(cells) + " |")
    return lines
