"""The equivalence gate run before any timing: a port's logits vs the float64 NumPy reference
for the same canonical weights and images, decided by shared/core/equivalence.py exactly as
`compare.py verify` decides (tolerance, finiteness, shape, parameter count). A port that fails
is INVALID and is never ranked: timing a different function would be a confound, not a result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from shared.core import reference
from shared.core.equivalence import check_logits
from shared.core.inputs import probe_batch
from shared.core.precision import FLOAT32, Precision
from shared.core.rounding import emulated_gap
from shared.core.spec import ModelSpec
from shared.core.tolerance import bound_multiple, derivation, logit_atol, rung_floor
from shared.core.weights import init_weights
from shared.runtime.verify import Case, Entry, pairwise_gaps

GATE_IMAGES = 4  # the reference runs in float64 NumPy: a few images are enough to catch errors


def tolerance(spec: ModelSpec, reference_logits: np.ndarray | None = None,
              precision: Precision = FLOAT32, emulated: float | None = None) -> float:
    """The project's logit tolerance at a rung (shared/core/tolerance.py, the one source of truth)."""
    return logit_atol(spec, reference_logits, precision, emulated)


def tolerance_rule(spec: ModelSpec, precision: Precision) -> dict[str, Any]:
    """The gate's tolerance as the results file's conditions state it before any case is run:
    float32's number, or a low rung's multiple of each check's emulated gap."""
    if precision.rung == "float32":
        return {"atol": tolerance(spec, None, precision), "rung": precision.rung,
                "note": "shared/core/tolerance.logit_atol"}
    return {"atol": None, "multiple": bound_multiple(precision.rung), "rung": precision.rung,
            "note": "shared/core/tolerance.logit_atol: multiple x each check's emulated_gap (its atol)"}


def rung(config: dict[str, Any]) -> Precision:
    """The precision rung the run computes at (float32 unless the parent asked for another)."""
    return Precision.from_dict(config.get("precision"))


def gate_failure(row: dict[str, Any]) -> str | None:
    failed = [mode for mode, check in row["equivalence"].items() if not check["passed"]]
    if not failed:
        return None
    return (f"equivalence gate failed in {', '.join(failed)} mode: "
            f"{row['equivalence'][failed[0]]['reason']}")


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


def reference_logits(path: str | Path) -> np.ndarray:
    with np.load(path, allow_pickle=False) as data:
        return np.asarray(data["logits"], dtype=np.float64)


def reference_emulated_gap(path: str | Path) -> float | None:
    """The emulated rounding gap `write_reference` stored (None at float32)."""
    with np.load(path, allow_pickle=False) as data:
        value = float(data["emulated_gap"]) if "emulated_gap" in data.files else float("nan")
    return None if np.isnan(value) else value


def compare(spec: ModelSpec, port_logits: np.ndarray, ref: np.ndarray,
            param_count: int | None = None, precision: Precision = FLOAT32,
            emulated: float | None = None) -> dict[str, Any]:
    """One mode's gate check at the run's rung, as the results file records it (`max_abs_err`
    is infinite when the logits cannot be compared: wrong shape or non-finite values); below
    float32 with the emulated gap the bound was derived from, and how."""
    verdict = check_logits(spec, port_logits, ref, param_count, precision, emulated)
    err = verdict.max_abs_diff
    check = {"passed": verdict.passed, "max_abs_err": float("inf") if err is None else err,
             "max_rel_err": verdict.max_rel_diff, "atol": verdict.tolerance,
             "images": int(ref.shape[0]), "reason": verdict.reason}
    if precision.rung != "float32":
        check["emulated_gap"] = emulated
        check["bound"] = derivation(spec, ref, precision, emulated)
    return check


def verdicts(spec: ModelSpec, batch: int, seed: int, rows: list[dict[str, Any]],
             logits: dict[str, np.ndarray],
             precision: Precision = FLOAT32) -> tuple[Case, list[Entry], list[dict[str, Any]]]:
    """The timing run's gate as `compare.py verify` reports it: one entry per framework (every
    compiled mode folded in: the worst error, the first failure), and the pairwise gaps between
    the ports' gated logits. `logits` holds framework -> gated eager logits and "reference"."""
    ref = logits["reference"]
    # Below float32 each check carries the emulated gap its bound came from (the same for all).
    emulated = next((c["emulated_gap"] for row in rows for c in (row.get("equivalence") or {}).values()
                     if c.get("emulated_gap") is not None), None)
    case = Case(spec, {}, gate_images(spec, batch, seed), precision=precision, reference=ref,
                emulated_gap=emulated)
    checked = precision.rung == "float32" or emulated is not None
    atol = tolerance(spec, ref, precision, emulated) if checked else float("nan")
    bound = derivation(spec, ref, precision, emulated) if checked else "no port's logits were checked"
    entries = []
    for row in rows:
        checks = row.get("equivalence") or {}
        failed = [(mode, c) for mode, c in checks.items() if not c["passed"]]
        errors = [c["max_abs_err"] for c in checks.values()]
        rel = [c["max_rel_err"] for c in checks.values() if c.get("max_rel_err") is not None]
        reason = (f"{failed[0][0]} mode: {failed[0][1]['reason']}" if failed
                  else None if checks else row.get("reason") or "the worker checked nothing")
        entries.append(Entry(
            spec.name, spec.spec_hash, row["framework"],
            device=(row.get("conditions") or {}).get("device_class"), param_count=row.get("param_count"),
            expected_params=spec.derived.params, max_abs_diff=max(errors) if errors else None,
            max_rel_diff=max(rel) if rel else None, tolerance=atol, rung=precision.rung,
            floor=rung_floor(spec, ref, precision, emulated) if checked else 0.0,
            emulated_gap=emulated, bound=bound if precision.low else None,
            passed=bool(checks) and not failed, error=reason, versions=row.get("versions") or {},
            logits=logits.get(row["framework"])))
    return case, entries, pairwise_gaps(case, entries, ref)
