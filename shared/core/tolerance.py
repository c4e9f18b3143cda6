"""Equivalence tolerances for float32 ports against the float64 reference, and why.

Measured on this project's presets with its seeded weights (O(1) logits), pinned ports land at
1e-7 .. 2e-6 from float64 on the small presets and ~4e-6 on ViT-B/16 (12 blocks of width 768:
more accumulated rounding; the MLX port 5.3e-6 .. 5.9e-6).
The bounds leave ~2.5x headroom (1.7x for MLX on ViT-B/16) and still catch every semantic
difference the catalogue lists: LayerNorm eps 1e-5 vs 1e-6 moves small-model logits by ~2.6e-5,
tanh vs exact GELU by ~4e-4, layout errors by O(1). A 1e-3 bound would hide the first two.
The bounds were measured on logits of magnitude up to ~3.2 (ViT-B/16); beyond that range they
grow with the largest reference logit, because float32 rounding is relative (trained weights can
give logits of 10 or more). Within it they do not: scaling ViT-B's 1e-5 by its logit of 3.2 would
let torch's default epsilon (a 2.0e-5 gap) pass.

Below float32 (shared/core/precision.py) rounding is the error, so the bounds are relative: the
largest |port - float64| divided by max(1, max |float64 logit|), measured by `compare.py
tolerances` on every preset in every port at every rung (LOW_RUNG_MEASURED, with its date), times
SAFETY. A rung also has a floor: a gap below a quarter of the smallest gap measured at that rung
means the port did not compute at that rung (a bfloat16 run that lands at 1e-7 ran in float32),
which is a failure, not a pass. TF32 has not been measured (no CUDA machine): it borrows float16's
bounds (the same 10-bit mantissa) and says so.
"""

from __future__ import annotations

import numpy as np

from shared.core.precision import FLOAT32, Precision
from shared.core.spec import ModelSpec

SMALL_MODEL_ATOL = 5e-6
LARGE_MODEL_ATOL = 1e-5
LARGE_MODEL_PARAMS = 10_000_000  # ViT-S/16 and up: 12 blocks of width >= 384
MEASURED_LOGIT_RANGE = 4.0  # largest |logit| the bounds above were measured at, rounded up


SAFETY = 2.0  # low rungs: measured maximum x SAFETY
FLOOR_FRACTION = 0.25  # low rungs: a gap under this x the smallest measured one is not that rung
MEASURED_ON = "2026-12-01"
# rung -> size class -> (smallest, largest) measured |port - float64| / max(1, max |logit|), over
# every preset and every native port that offers the rung (`compare.py tolerances`).
LOW_RUNG_MEASURED: dict[str, dict[str, tuple[float, float]]] = {
    "bfloat16-pure": {"small": (1.89e-3, 1.84e-2), "large": (9.77e-3, 1.46e-2)},
    "bfloat16-mixed": {"small": (1.89e-3, 1.62e-2), "large": (6.89e-3, 9.31e-3)},
    "float16-pure": {"small": (4.24e-4, 2.60e-3), "large": (1.20e-3, 2.60e-3)},
    "float16-mixed": {"small": (3.06e-4, 2.45e-3), "large": (7.78e-4, 2.57e-3)},
}
UNMEASURED_RUNGS = {"tf32": "float16-pure"}  # no CUDA machine yet: the same 10-bit mantissa


def size_class(spec: ModelSpec) -> str:
    return "large" if spec.derived.params >= LARGE_MODEL_PARAMS else "small"


def logit_scale(reference_logits: np.ndarray | None) -> float:
    """max(1, max |reference logit|): what a relative bound is multiplied by."""
    return max(1.0, 0.0 if reference_logits is None else float(np.max(np.abs(reference_logits))))


def logit_atol(spec: ModelSpec, reference_logits: np.ndarray | None = None,
               precision: Precision = FLOAT32) -> float:
    if precision.rung != "float32":
        rung = UNMEASURED_RUNGS.get(precision.rung, precision.rung)
        return LOW_RUNG_MEASURED[rung][size_class(spec)][1] * SAFETY * logit_scale(reference_logits)
    base = LARGE_MODEL_ATOL if spec.derived.params >= LARGE_MODEL_PARAMS else SMALL_MODEL_ATOL
    largest = 0.0 if reference_logits is None else float(np.max(np.abs(reference_logits)))
    scale = max(1.0, largest / MEASURED_LOGIT_RANGE)
    return base * scale


def rung_floor(spec: ModelSpec, reference_logits: np.ndarray | None, precision: Precision) -> float:
    """The smallest gap a port that really computed at `precision` shows (0 for float32)."""
    if precision.rung not in LOW_RUNG_MEASURED:
        return 0.0
    smallest = LOW_RUNG_MEASURED[precision.rung][size_class(spec)][0]
    return smallest * FLOOR_FRACTION * logit_scale(reference_logits)


def max_abs_diff(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))


def max_rel_diff(a: np.ndarray, b: np.ndarray) -> float:
    """Largest |a - b| relative to the scale of the reference logits, max |b|. (Relative to each
    logit instead, a logit that happens to be near zero would dominate the figure.)"""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-12))
