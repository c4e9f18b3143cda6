"""The one equivalence verdict: is a port's output the spec's function?

`compare_tensor` decides for any tensor against a reference and a tolerance: the shapes must be
equal, every value finite (a NaN or an infinity FAILS, never passes by comparing false), and the
largest absolute difference within the tolerance. `check_logits` applies it to a port's logits
against the float64 reference with the project's tolerance (`tolerance.logit_atol`) and adds the
parameter count, which must equal `spec.derived.params`. `compare.py verify`, the timing gate
and `compare.py trace` all decide through these, so they cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from shared.core.precision import FLOAT32, Precision
from shared.core.spec import ModelSpec
from shared.core.tolerance import logit_atol, max_abs_diff, max_rel_diff, rung_floor

PAIRWISE_FACTOR = 2.0  # two ports, each within the tolerance of the reference, are within twice it


@dataclass(frozen=True)
class Verdict:
    passed: bool
    tolerance: float
    max_abs_diff: float | None = None  # None when not comparable (shape, non-finite values)
    max_rel_diff: float | None = None
    reason: str | None = None  # why it failed, one line; None when it passed


def compare_tensor(got: np.ndarray, reference: np.ndarray, tolerance: float,
                   what: str = "logits") -> Verdict:
    """`got` against `reference`: same shape, all finite, max |got - reference| <= tolerance."""
    got = np.asarray(got)
    reference = np.asarray(reference, dtype=np.float64)
    if got.shape != reference.shape:
        return Verdict(False, tolerance, reason=f"{what} shape {got.shape}, expected {reference.shape}")
    finite = np.isfinite(got)
    if not finite.all():
        bad = int(got.size - np.count_nonzero(finite))
        return Verdict(False, tolerance, reason=f"{bad} of {got.size} values of the {what} are not "
                                                "finite (NaN or infinity)")
    err, rel = max_abs_diff(got, reference), max_rel_diff(got, reference)
    if not err <= tolerance:
        return Verdict(False, tolerance, err, rel,
                       f"max |{what} - reference| {err:.3g} > tolerance {tolerance:.2g}")
    return Verdict(True, tolerance, err, rel)


def check_logits(spec: ModelSpec, logits: np.ndarray, reference: np.ndarray,
                 param_count: int | None = None, precision: Precision = FLOAT32,
                 emulated_gap: float | None = None) -> Verdict:
    """A port's logits vs the float64 reference for the same weights and images at a precision
    rung, and (when given) its own parameter count vs the spec's. Below float32 the bound and the
    floor are multiples of `emulated_gap` (shared/core/rounding.py, on the same case), and the gap
    must reach the floor: a gap of float32's order means the rung did not run."""
    verdict = compare_tensor(logits, reference, logit_atol(spec, reference, precision, emulated_gap))
    floor = rung_floor(spec, reference, precision, emulated_gap)
    if verdict.passed and verdict.max_abs_diff is not None and verdict.max_abs_diff < floor:
        return Verdict(False, verdict.tolerance, verdict.max_abs_diff, verdict.max_rel_diff,
                       f"max |logits - reference| {verdict.max_abs_diff:.3g} is below {precision.rung}'s "
                       f"floor {floor:.2g}: the port did not compute at {precision.rung}")
    expected = spec.derived.params
    if verdict.passed and param_count is not None and param_count != expected:
        return Verdict(False, verdict.tolerance, verdict.max_abs_diff, verdict.max_rel_diff,
                       f"{param_count:,} parameters, spec says {expected:,}")
    return verdict


def check_pair(a: np.ndarray, b: np.ndarray, tolerance: float) -> Verdict:
    """Two ports' logits against each other, within PAIRWISE_FACTOR x the logit tolerance."""
    return compare_tensor(a, b, PAIRWISE_FACTOR * tolerance)


def tap_budget(spec: ModelSpec, reference: np.ndarray, precision: Precision = FLOAT32,
               emulated: np.ndarray | None = None) -> float:
    """An intermediate tensor's tolerance: rounding is relative, so the logit tolerance scales
    with the tensor's magnitude, `logit_atol(spec) * max(1, max |reference|)`. Below float32,
    the rung's multiple of that tensor's own emulated gap, max |`emulated` - reference| (the
    rung-emulating reference's tap, shared/core/rounding.py), and never under float32's budget."""
    scale = max(1.0, float(np.max(np.abs(reference))))
    if precision.rung == "float32":
        return logit_atol(spec) * scale
    gap = None if emulated is None else max_abs_diff(emulated, reference)
    return max(logit_atol(spec, None, precision, gap), logit_atol(spec) * scale)


def first_nonfinite(taps: dict[str, np.ndarray]) -> str | None:
    """The first named intermediate (taps are recorded in computation order) holding a NaN or an
    infinity: where a forward pass overflowed, e.g. float32 inputs near 3e38."""
    for name, value in taps.items():
        if not np.all(np.isfinite(np.asarray(value))):
            return name
    return None


def nonfinite_message(what: str, first: str | None) -> str:
    where = f"; the first non-finite tensor is {first!r}" if first else ""
    return (f"{what} are not finite (NaN or infinity){where}: the inputs or weights overflow "
            "float32 inside the model")
