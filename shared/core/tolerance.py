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
"""

from __future__ import annotations

import numpy as np

from shared.core.spec import ModelSpec

SMALL_MODEL_ATOL = 5e-6
LARGE_MODEL_ATOL = 1e-5
LARGE_MODEL_PARAMS = 10_000_000  # ViT-S/16 and up: 12 blocks of width >= 384
MEASURED_LOGIT_RANGE = 4.0  # largest |logit| the bounds above were measured at, rounded up


def logit_atol(spec: ModelSpec, reference_logits: np.ndarray | None = None) -> float:
    base = LARGE_MODEL_ATOL if spec.derived.params >= LARGE_MODEL_PARAMS else SMALL_MODEL_ATOL
    largest = 0.0 if reference_logits is None else float(np.max(np.abs(reference_logits)))
    scale = max(1.0, largest / MEASURED_LOGIT_RANGE)
    return base * scale


def max_abs_diff(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))


def max_rel_diff(a: np.ndarray, b: np.ndarray) -> float:
    """Largest |a - b| relative to the scale of the reference logits, max |b|. (Relative to each
    logit instead, a logit that happens to be near zero would dominate the figure.)"""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-12))
