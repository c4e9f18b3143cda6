"""The terminal table for timing rows (from one run or merged result files): cells, marks, the
legend and the notes under the table. The CSV and the chart are in shared/measure/exports.py."""

from __future__ import annotations

import math
from typing import Any

from shared.core.terminal import CELL_LIMIT, printable, wrap
from shared.measure.contention import is_contended
from shared.measure.guard import (
    FORWARD,
    IncomparableRunsError,
    decided_ranks,
    label,
    metric_value,
    worker_foreign,
)
from shared.measure.roofline import above_roof, best_fraction
from shared.measure.rounds import gemm_warning
from shared.measure.timing_row import PHASES

SHORT = {
    "import": "import", "build_load": "build+load", "first_call_eager": "1st eager",
    "compile": "compile", "prepare": "prepare", "forward_eager": "fwd eager",
    "forward_compiled": "fwd compiled", "train_step": "train step", "eval_pass": "eval pass",
}


def fmt_seconds(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if value >= scale or unit == "us":
            return f"{value / scale:.3g}{unit}"
    return f"{value:.3g}s"


def fmt_bytes(value: int | None) -> str:
    if value is None:
        return "n/a"
    if value >= 2**30:
        return f"{value / 2**30:.3g}GiB"
    return f"{value / 2**20:.0f}MiB"


def peak_memory(row: dict[str, Any]) -> tuple[int | None, str]:
    """(bytes, source): the framework allocator's peak on an accelerator, else peak RSS (a CPU
    allocator's counter, where a framework keeps one, misses most of what it holds)."""
    memory = row.get("memory") or {}
    on_cpu = (row.get("conditions") or {}).get("device_class") in (None, "cpu")
    if not on_cpu and isinstance(memory.get("allocator_peak_bytes"), int):
        return memory["allocator_peak_bytes"], "allocator peak"
    return memory.get("peak_rss_bytes"), "peak RSS"


def phase_cell(phase: dict[str, Any] | None) -> str:
    if not phase:
        return "-"
    if phase.get("status") != "ok":
        return "n/a"
    if phase.get("n", 1) == 1:
        return fmt_seconds(phase["median"])
    return f"{fmt_seconds(phase['median'])} ±{fmt_seconds(phase['iqr'] / 2)}"


COMPACT_PHASES = ("forward_eager", "forward_compiled", "train_step")
COMPACT_HEADER = ["rank", "port", *[SHORT[p] for p in COMPACT_PHASES], "compile", "peak mem", "roof",
                  "status"]
WIDE_HEADER = ["rank", "framework", "spec", "status", "device", *[SHORT[p] for p, _ in PHASES], "cache",
               "peak RSS", "alloc peak", "gate |err|", "GFLOP/s", "GEMM GFLOP/s", "roof"]
MARKS = {"ok": "ok", "invalid": "INVALID", "crashed": "CRASHED", "timeout": "TIMEOUT",
         "unavailable": "UNAVAIL"}
LEGEND = ("times: median ±IQR/2 of n repeats (n and raw samples in the JSON); compile: one "
          "measurement per fresh process, cold or warm compile cache; peak mem: the process's peak "
          "RSS on a CPU, the framework allocator's peak on an accelerator; roof: the faster "
          "forward's analytic GFLOP/s as a share of the framework's own GEMM rate (in the run's "
          "dtype and mode) on the spec's matmul shapes, `?` when that rate was contended, `!` above "
          "100% (a note says why); --wide shows every phase")
WIDE_LEGEND = ("times: median ±IQR/2 of n repeats (n and raw samples in the JSON); single values "
               "are one cold measurement per fresh process")


def table(rows: list[dict[str, Any]], metric: str = FORWARD, allow_mixed: bool = False,
          wide: bool = False) -> str:
    """Rows as an aligned text table with a rank column, then the legend, the guard's verdict
    and every row's notes. By default at most WIDTH columns (rank, port, the forward modes, the
    train step, compile, peak memory, roofline, a status mark); `wide`: every column."""
    notes: list[str] = []
    ranks: dict[int, int] = {}
    ranked_by: dict[str, list[str]] = {}  # phase -> the rows ranked by it: one note per phase
    refused: list[str] = []  # rows the rounds' rule leaves unranked (shared/measure/rounds.py)
    single = False
    try:
        for decided in decided_ranks(rows, metric, allow_mixed):
            row = decided["row"]
            if decided["rank"] is None:
                refused.append(f"{label(row)}: not comparable: {decided['why']}")
                continue
            ranks[id(row)] = decided["rank"]
            ranked_by.setdefault(SHORT[decided["phase"]], []).append(label(row))
            single = single or len(worker_foreign(row)) == 1
    except IncomparableRunsError as exc:
        notes.insert(0, str(exc))
        ranks, ranked_by = {}, {}
    if metric == FORWARD:  # each row's faster forward mode decides its rank
        notes += [f"ranked by {phase}: {', '.join(names)}" for phase, names in ranked_by.items()]
    if single:
        notes.append("ranks: one round, so the order was not checked across rounds (--processes 2 "
                     "checks it)")
    notes += refused
    lines = [WIDE_HEADER if wide else COMPACT_HEADER]
    for row in rows:
        position = str(ranks.get(id(row), "-"))
        lines.append(_wide_cells(row, position) if wide else _compact_cells(row, position))
        notes.extend(row_notes(row))
    # a results file's text: escaped, and a cell no wider than CELL_LIMIT (shared/core/terminal.py)
    lines = [[printable(cell, CELL_LIMIT) for cell in line] for line in lines]
    notes = [printable(note) for note in [*roof_line(rows), *patches_line(rows), *mode_line(rows), *notes]]
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    text = "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
                     for line in lines)
    legend = WIDE_LEGEND if wide else LEGEND
    return "\n".join([text, *wrap(legend), *[w for n in notes for w in wrap(n)]])


def _compact_cells(row: dict[str, Any], position: str) -> list[str]:
    phases = row.get("phases", {})
    _, fraction = best_fraction(row)
    return [position, port_cell(row), *[phase_cell(phases.get(p)) for p in COMPACT_PHASES],
            compile_cell(phases.get("compile")), fmt_bytes(peak_memory(row)[0]),
            roof_cell(row, fraction), status_mark(row)]


def _wide_cells(row: dict[str, Any], position: str) -> list[str]:
    phases, mem = row.get("phases", {}), row.get("memory", {})
    eq = row.get("equivalence") or {}
    err = max((c.get("max_abs_err", 0.0) for c in eq.values()), default=None)
    status = row.get("status", "?").upper() if row.get("status") != "ok" else "ok"
    achieved, fraction = best_fraction(row)
    gemm = ((row.get("roofline") or {}).get("gemm") or {}).get("gflops")
    return [position, port_cell(row), str(row.get("conditions", {}).get("spec_name") or "-"), status,
            str(row.get("conditions", {}).get("device_class") or "-"),
            *[phase_cell(phases.get(p)) for p, _ in PHASES],
            str((phases.get("compile") or {}).get("cache") or "-"),
            fmt_bytes(mem.get("peak_rss_bytes")), fmt_bytes(mem.get("allocator_peak_bytes")),
            "-" if err is None else f"{err:.1e}", _gflops(achieved), _gflops(gemm), roof_cell(row, fraction)]


def roof_cell(row: dict[str, Any], fraction: float | None) -> str:
    """The share, with `?` when its GEMM rate was measured while contended and `!` above 100%
    (roofline.above_roof: the ceiling was not measured as the forward runs); a note says which."""
    if fraction is None:
        return "-"
    gemm = (row.get("roofline") or {}).get("gemm") or {}
    return (f"{100 * fraction:.0f}%" + ("?" if is_contended(gemm.get("foreign_cpu")) else "")
            + ("!" if fraction > 1 else ""))


def _gflops(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def compile_cell(phase: dict[str, Any] | None) -> str:
    """The compile time and whether the compile cache was cold or warm."""
    cell = phase_cell(phase)
    cache = (phase or {}).get("cache")
    return f"{cell} {cache}" if cache and (phase or {}).get("status") == "ok" else cell


def status_mark(row: dict[str, Any]) -> str:
    """ok, or the failure in capitals; `*` when notes under the table qualify the row."""
    mark = MARKS.get(row.get("status", ""), str(row.get("status", "?")).upper())
    return mark + ("*" if row.get("status") == "ok" and row_notes(row) else "")


def port_cell(row: dict[str, Any]) -> str:
    """The row's label, and the mode it ran where its port offers several (`torch/explicit`)."""
    choice = row.get("mode_choice") or {}
    several = len(choice.get("offered") or []) > 1 and choice.get("chosen")
    return f"{label(row)}/{choice['chosen']}" if several else label(row)


def mode_line(rows: list[dict[str, Any]]) -> list[str]:
    """How each mode in the port column was chosen (shared/measure/modes.py): forced, cached or
    measured, with the measured candidates' medians and the ones that failed the gate."""
    parts, notes = [], []
    for row in rows:
        choice = row.get("mode_choice") or {}
        notes += [f"{label(row)}: {note}" for note in choice.get("notes") or []]
        if len(choice.get("offered") or []) < 2 or not choice.get("chosen"):
            continue
        timed = [f"{c.get('mode')} {fmt_seconds(c.get('median'))}" if c.get("status") == "ok" else
                 f"{c.get('mode')} FAILED ({str(c.get('reason') or 'no reason')[:60]})"
                 for c in choice.get("candidates") or []]
        parts.append(f"{label(row)} {choice['chosen']} ({choice.get('source')}"
                     + (f": {', '.join(timed)}" if timed else "") + ")")
    line = [f"mode, how each was chosen (--mode forces one): {'; '.join(parts)}"] if parts else []
    return line + notes


def roof_line(rows: list[dict[str, Any]]) -> list[str]:
    """The roofline column's numbers: achieved / ceiling GFLOP/s per row."""
    parts, dtypes = [], set()
    for row in rows:
        achieved, _ = best_fraction(row)
        record = (row.get("roofline") or {}).get("gemm") or {}
        if achieved is not None and record.get("gflops") is not None:
            parts.append(f"{label(row)} {achieved:.3g}/{record['gflops']:.3g}")
            dtypes.add(record.get("dtype", "float32"))  # files from before the ladder: float32
    dtype = "/".join(sorted(dtypes))
    return [f"roof, best forward / {dtype} GEMM GFLOP/s: {', '.join(parts)}"] if parts else []


def patches_line(rows: list[dict[str, Any]]) -> list[str]:
    """A batch with padding (naflex, packed): the unit that compares resolutions, real patches per
    second of each row's faster forward, and the share of the computed slots that was padding."""
    parts, batches = [], set()
    for row in rows:
        cond = row.get("conditions") or {}
        real, slots, best = cond.get("patches_real"), cond.get("patches_slots"), metric_value(row, FORWARD)
        if not real or not slots or real == slots:
            continue
        batches.add((real, slots))
        if best is not None:
            parts.append(f"{label(row)} {real / best[0]:,.0f}")
    if not batches:
        return []
    shown = "; ".join(f"{r:,} of {s:,} patch slots real, {1 - r / s:.0%} padding" for r, s in sorted(batches))
    return [f"real patches/s, best forward ({shown}): {', '.join(parts) or 'none timed'}"]


def row_notes(row: dict[str, Any]) -> list[str]:
    """Everything a reader must know about one row before trusting its numbers, one line each,
    naming the row: contended phases, oversubscribed threads, why it failed, what is n/a."""
    notes: list[str] = []
    phases = row.get("phases", {})
    contended = [p for p, v in phases.items() if is_contended(v.get("foreign_cpu"))]
    if contended:
        worst = max(phases[p]["foreign_cpu"] for p in contended)
        notes.append(f"{label(row)}: CONTENDED during {', '.join(SHORT[p] for p in contended)} "
                     f"(other processes used up to {worst:.2f} CPUs on its CPUs): noisy")
    affinity_note = (row.get("threads_applied") or {}).get("affinity_note")
    if affinity_note:  # e.g. more threads than usable CPUs: the row's times mean less
        notes.append(f"{label(row)}: WARNING: {affinity_note}")
    if row.get("status") != "ok" and row.get("reason"):
        notes.append(f"{label(row)}: {row['status'].upper()}: {row['reason']}")
    missing: dict[str, list[str]] = {}  # one note per reason, not one per phase
    for name, phase in phases.items():
        if phase.get("status") != "ok" and phase.get("reason"):
            missing.setdefault(phase["reason"], []).append(SHORT[name])
    for reason, names in missing.items():
        notes.append(f"{label(row)}: {', '.join(names)} n/a: {reason}")
    gemm = (row.get("roofline") or {}).get("gemm") or {}
    if gemm.get("status") == "n/a":
        notes.append(f"{label(row)}: roofline n/a: {gemm.get('reason')}")
    elif gemm.get("gflops") is not None and (warning := gemm_warning(label(row), gemm)):
        notes.append(warning)
    if above := above_roof(label(row), best_fraction(row)[0], gemm):
        notes.append(above)
    return notes
