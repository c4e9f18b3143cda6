"""The equivalence gate run before any timing: a port's logits vs the float64 NumPy reference
for the same canonical weights and images, decided in the worker by
shared/core/equivalence.check_logits, the one function `compare.py verify` decides by
(tolerance, floor, finiteness, shape, parameter count, and below float32 the precision contract
on the dtypes the worker read). Each mode's `PortVerdict` is the row's `equivalence[mode]`
(its `to_dict`); the verify table the timing run prints is made of the same records, never
decided again. A port that fails is INVALID and is never ranked: timing a different function
would be a confound, not a result."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from shared.core import reference
from shared.core.equivalence import PortVerdict, check_logits, not_run
from shared.core.inputs import probe_batch
from shared.core.precision import FLOAT32, Precision
from shared.core.rounding import emulated_gap
from shared.core.spec import ModelSpec
from shared.core.tolerance import bound_multiple, logit_atol
from shared.core.weights import init_weights
from shared.runtime.verify import VerifyCase, pairwise_gaps

GATE_IMAGES = 4  # the reference runs in float64 NumPy: a few images are enough to catch errors


def tolerance_rule(spec: ModelSpec, precision: Precision) -> dict[str, Any]:
    """The gate's tolerance as the results file's conditions state it before any case is run:
    float32's number, or a low rung's multiple of each check's emulated gap."""
    if precision.rung == "float32":
        return {"atol": logit_atol(spec, None, precision), "rung": precision.rung,
                "note": "shared/core/tolerance.logit_atol"}
    return {"atol": None, "multiple": bound_multiple(precision.rung), "rung": precision.rung,
            "note": "shared/core/tolerance.logit_atol: multiple x each check's emulated_gap (its atol)"}


def rung(config: dict[str, Any]) -> Precision:
    """The precision rung the run computes at (float32 unless the parent asked for another)."""
    return Precision.from_dict(config.get("precision") or {})


def mode_verdicts(row: dict[str, Any]) -> dict[str, PortVerdict]:
    """The row's verdict per mode, read back from its `equivalence` checks."""
    return {mode: PortVerdict.from_dict(check) for mode, check in (row.get("equivalence") or {}).items()}


def gate_failure(row: dict[str, Any]) -> str | None:
    """Why the row is INVALID (its first failing mode's verdict), or None when every mode passed."""
    failed = [(mode, v) for mode, v in mode_verdicts(row).items() if not v.passed]
    if not failed:
        return None
    return (f"equivalence gate failed in {', '.join(mode for mode, _ in failed)} mode: "
            f"{failed[0][1].reason}")


def gate_rows(spec: ModelSpec) -> int:
    """The rows of the timed batch's logits the gate reads: its first GATE_IMAGES inputs' (a packed
    sequence has a row per image, pack_images of them)."""
    return GATE_IMAGES * spec.pack_images


def gate_images(spec: ModelSpec, batch: int, seed: int) -> np.ndarray:
    """The images the gate checks: the first GATE_IMAGES of the timed batch."""
    return probe_batch(spec, batch=batch, seed=seed)[:GATE_IMAGES]


def write_reference(path: str | Path, spec: ModelSpec, batch: int, seed: int,
                    weights_seed: int, precision: Precision = FLOAT32) -> np.ndarray:
    """Reference logits for the gate's images, computed once by the parent, and below float32
    the emulated rounding gap the bound is a multiple of (NaN at float32); the logits returned."""
    weights, images = init_weights(spec, seed=weights_seed), gate_images(spec, batch, seed)
    logits = reference.forward(spec, weights, images)
    emulated = emulated_gap(spec, weights, images, precision, logits)
    np.savez(path, logits=logits, emulated_gap=np.float64(np.nan if emulated is None else emulated))
    return logits


def read_reference(path: str | Path) -> tuple[np.ndarray, float | None]:
    """The logits and the emulated rounding gap `write_reference` stored (the gap None at float32)."""
    with np.load(path, allow_pickle=False) as data:
        logits = np.asarray(data["logits"], dtype=np.float64)
        gap = float(data["emulated_gap"])
    return logits, None if np.isnan(gap) else gap


def judge(row: dict[str, Any], spec: ModelSpec, logits: np.ndarray, config: dict[str, Any],
          tap_dtypes: dict[str, str] | None = None) -> PortVerdict:
    """In the worker: logits (the gate's images) judged by `check_logits` against the reference
    the parent wrote, with the port's parameter count and the dtypes the worker read."""
    expected, emulated = read_reference(config["reference_npz"])
    return check_logits(spec, logits, expected, row["param_count"], rung(config), emulated,
                        tap_dtypes=tap_dtypes, framework=row["framework"],
                        device=row["conditions"]["device_class"], versions=row["versions"])


def row_verdict(spec: ModelSpec, row: dict[str, Any], precision: Precision,
                logits: np.ndarray | None = None) -> PortVerdict:
    """The row as one line of verify's table: its first failing mode's verdict (the reason names
    the mode), else its worst mode's; a row the worker checked nothing for, as not run."""
    verdicts = mode_verdicts(row)
    if not verdicts:
        reason = row.get("reason") or "the worker checked nothing"
        return not_run(spec, row["framework"], precision, reason, row.get("status") == "unavailable")
    failed = [(mode, v) for mode, v in verdicts.items() if not v.passed]
    if failed:
        mode, verdict = failed[0]
        verdict = replace(verdict, reason=f"{mode} mode: {verdict.reason}")
    else:
        verdict = max(verdicts.values(), key=lambda v: v.max_abs_diff or 0.0)
    return replace(verdict, framework=row["framework"], logits=logits)


def verdicts(spec: ModelSpec, batch: int, seed: int, rows: list[dict[str, Any]],
             logits: dict[str, np.ndarray],
             precision: Precision = FLOAT32) -> tuple[VerifyCase, list[PortVerdict], list[dict[str, Any]]]:
    """The timing run's gate as `compare.py verify` reports it: one verdict per framework (the
    records its worker made, every mode folded in by `row_verdict`), and the pairwise gaps
    between the ports' gated logits. `logits` holds framework -> gated eager logits and
    "reference"."""
    ref = logits["reference"]
    case = VerifyCase(spec, {}, gate_images(spec, batch, seed), precision=precision, reference=ref)
    table = [row_verdict(spec, row, precision, logits.get(row["framework"])) for row in rows]
    return case, table, pairwise_gaps(case, table, ref)
