"""The verdict table, as `compare.py verify` and `compare.py time` (the timing run's equivalence
gate) both print it: one `PortVerdict` (shared/core/equivalence.py) per port and case, the
pairwise gaps under it, and the tally. One printer, so the two commands cannot drift apart."""

from __future__ import annotations

from typing import Any

from shared.cli._common import print_note
from shared.core.equivalence import PortVerdict
from shared.core.terminal import format_table, wrap, wrapped
from shared.runtime.verify import VerifyCase


def print_verdicts(cases: list[VerifyCase], verdicts: list[PortVerdict],
                   pairwise: list[dict[str, Any]]) -> None:
    """Per case: the spec, the rung's tolerance (and floor and bound below float32) as the
    checked verdicts state them, one row per port, why each row failed, the pairwise gaps."""
    for case in cases:
        mine = [v for v in verdicts if v.spec == case.spec.name and v.rung == case.precision.rung]
        checked = next((v for v in mine if v.checked), None)
        print()
        print(wrapped(f"spec {case.spec.name!r} ({case.spec.spec_hash}): {case.spec.derived.params:,} "
                      f"parameters, probe batch {case.images.shape[0]}"))
        if checked is None:
            print(wrapped(f"rung {case.precision.rung}: no port's logits were checked"))
        else:
            floor = f", floor {checked.floor:.1e}" if checked.floor else ""
            print(wrapped(f"rung {case.precision.rung}: tolerance {checked.tolerance:.1e}{floor} (max abs "
                          "vs float64 reference)"))
            if checked.bound:  # below float32: what the bound is a multiple of
                print(wrapped(f"bound: {checked.bound}"))
        print_note(case.note)
        rows, reasons = [], []  # why a row failed or could not run: under the table, so it stays narrow
        for v in mine:
            rows.append([v.framework, v.device or "-", f"{v.param_count:,}" if v.param_count else "-",
                         f"{v.max_abs_diff:.2e}" if v.max_abs_diff is not None else "-",
                         f"{v.max_rel_diff:.2e}" if v.max_rel_diff is not None else "-",
                         v.status + ("*" if v.reason else "")])
            if v.reason:
                reasons += wrap(f"* {v.framework}: {v.status}: {v.reason}")
        print(format_table(["framework", "device", "params", "max abs", "max rel", "status"], rows))
        if reasons:
            print("\n".join(reasons))
        pairs = [p for p in pairwise if p["spec"] == case.spec.name and p["rung"] == case.precision.rung]
        if pairs:
            gaps = ", ".join(f"{p['a']}~{p['b']} {p['max_abs_diff']:.1e}" for p in pairs)
            print(wrapped(f"pairwise max abs: {gaps}"))


def tally(verdicts: list[PortVerdict], pairwise: list[dict[str, Any]]) -> tuple[str, int]:
    """("N passed, M failed[, K unavailable]", M): every verdict of a port that ran, and every
    pair; a port that is not here is counted apart, never as a pass or a failure."""
    ran = [v for v in verdicts if not v.unavailable]
    failed = len([v for v in ran if not v.passed]) + len([p for p in pairwise if not p["passed"]])
    unavailable = len(verdicts) - len(ran)
    tail = f", {unavailable} unavailable" if unavailable else ""
    return f"{len(ran) + len(pairwise) - failed} passed, {failed} failed{tail}", failed
