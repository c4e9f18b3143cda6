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

Below float32 (shared/core/precision.py) rounding is the error, and how large it is depends on
the spec, the weights, the images and the CPU's arithmetic (native bfloat16 instructions, or
bfloat16 emulated through float32 and blocked sums). So a low rung's bound is not one machine's
maximum: it is a stated multiple of the *emulated gap*, |rung-emulating reference - float64|
(shared/core/rounding.py: the oracle rounded at exactly the contract's cast points), computed for
the case being checked. The multiple is the largest port gap / emulated gap that `compare.py
tolerances` measured over every preset, every native port and both arithmetic paths of an x86 CPU
(native avx512_bf16, and oneDNN/XLA limited to AVX2), times MARGIN (MEASURED_RATIOS, with its
date; docs/tolerances.md lists every measurement). A rung also has a floor: a gap under
FLOOR_FRACTION x the smallest measured ratio x the emulated gap means the port did not compute at
that rung (a bfloat16 run that lands at 1e-7 ran in float32), which is a failure, not a pass.
TF32 has not been measured (no CUDA machine): it borrows float16-pure's emulation and multiple
(the same 10-bit mantissa) and has no floor.
"""

from __future__ import annotations

import numpy as np

from shared.core.precision import FLOAT32, Precision
from shared.core.spec import ModelSpec

SMALL_MODEL_ATOL = 5e-6
LARGE_MODEL_ATOL = 1e-5
LARGE_MODEL_PARAMS = 10_000_000  # ViT-S/16 and up: 12 blocks of width >= 384
MEASURED_LOGIT_RANGE = 4.0  # largest |logit| the bounds above were measured at, rounded up


MARGIN = 2.0  # low rungs: bound = largest measured ratio x MARGIN x the emulated gap
# low rungs: floor = smallest measured ratio x FLOOR_FRACTION x the emulated gap. The ratio's lower
# tail depends on the batch (a max over fewer logits): torch on archive-keras at bfloat16-pure
# measured 0.45 at batch 8 and 0.22 at the ladder test's batch 4. A fifth still keeps every preset's
# floor at least 4x float32's bound (archive-keras, float16-mixed), about 100x a float32 run's gap.
FLOOR_FRACTION = 0.2
MEASURED_ON = "2026-12-01"
# The arithmetic paths measured (docs/tolerances.md): the CPU's own bfloat16/float16 kernels
# (avx512_bf16, AMX), and the AVX2-limited path an AVX2-only CPU takes.
PATHS = ("native", "avx2")
# rung -> arithmetic path -> (smallest, largest) measured |port - float64| / |emulated - float64|
# over every preset and every native port that offers the rung (`compare.py tolerances`).
MEASURED_RATIOS: dict[str, dict[str, tuple[float, float]]] = {  # lows rounded down, highs up
    "bfloat16-pure": {"native": (0.45, 1.53), "avx2": (0.45, 2.41)},
    "bfloat16-mixed": {"native": (0.83, 1.72), "avx2": (0.83, 4.28)},  # Keras' Eigen bf16 GEMM on AVX2
    "float16-pure": {"native": (0.54, 1.77), "avx2": (0.61, 1.76)},
    "float16-mixed": {"native": (0.75, 2.48), "avx2": (0.48, 2.77)},
}
UNMEASURED_RUNGS = {"tf32": "float16-pure"}  # no CUDA machine yet: the same 10-bit mantissa


def bound_multiple(rung: str) -> float:
    """A low rung's bound as a multiple of its emulated gap: the largest ratio seen x MARGIN."""
    ratios = MEASURED_RATIOS[UNMEASURED_RUNGS.get(rung, rung)]
    return max(high for _, high in ratios.values()) * MARGIN


def floor_multiple(rung: str) -> float:
    """A low rung's floor as a multiple of its emulated gap (0 for an unmeasured rung)."""
    if rung not in MEASURED_RATIOS:
        return 0.0
    return min(low for low, _ in MEASURED_RATIOS[rung].values()) * FLOOR_FRACTION


def size_class(spec: ModelSpec) -> str:
    return "large" if spec.derived.params >= LARGE_MODEL_PARAMS else "small"


# A verdict on logits that vary over the probe images by less than this many tolerances cannot see
# a wrong function: a spec mistake moves the logits by a fraction of how much the images move them
# (the smallest in the catalogue, an epsilon, by well under 0.1 %), which then stays under the
# tolerance; a zero-initialised head (logits: its bias, whatever the image) passes anything
DISCERNING_RATIO = 1000.0


def logit_spread(reference_logits: np.ndarray) -> float:
    """How far the logits move over the batch: max |logit - its mean over the images|."""
    return float(np.max(np.abs(reference_logits - reference_logits.mean(axis=0))))


def discerning(reference_logits: np.ndarray, tolerance: float) -> bool:
    """Whether a gap under `tolerance` on these logits says the function is the same."""
    return logit_spread(reference_logits) >= DISCERNING_RATIO * tolerance


def logit_scale(reference_logits: np.ndarray | None) -> float:
    """max(1, max |reference logit|): what a relative bound is multiplied by."""
    return max(1.0, 0.0 if reference_logits is None else float(np.max(np.abs(reference_logits))))


def float32_atol(spec: ModelSpec, reference_logits: np.ndarray | None = None) -> float:
    base = LARGE_MODEL_ATOL if size_class(spec) == "large" else SMALL_MODEL_ATOL
    return base * max(1.0, logit_scale(reference_logits) / MEASURED_LOGIT_RANGE)


def _emulated(precision: Precision, emulated_gap: float | None) -> float:
    if emulated_gap is None:
        raise ValueError(f"the {precision.rung} bound is a multiple of the case's emulated rounding gap "
                         "(shared/core/rounding.emulated_gap): pass emulated_gap")
    return emulated_gap


def logit_atol(spec: ModelSpec, reference_logits: np.ndarray | None = None,
               precision: Precision = FLOAT32, emulated_gap: float | None = None) -> float:
    """The largest |port logits - float64 logits| that passes. Below float32: the rung's multiple
    of `emulated_gap` (|emulated - float64| on the same case), never under float32's bound."""
    if precision.rung == "float32":
        return float32_atol(spec, reference_logits)
    gap = _emulated(precision, emulated_gap)
    return max(bound_multiple(precision.rung) * gap, float32_atol(spec, reference_logits))


def rung_floor(spec: ModelSpec, reference_logits: np.ndarray | None, precision: Precision,
               emulated_gap: float | None = None) -> float:
    """The smallest gap a port that really computed at `precision` shows (0 for float32)."""
    if precision.rung == "float32":
        return 0.0
    return floor_multiple(precision.rung) * _emulated(precision, emulated_gap)


def derivation(spec: ModelSpec, reference_logits: np.ndarray | None, precision: Precision,
               emulated_gap: float | None = None) -> str:
    """How the bound was derived, as one phrase for verify's output and the results files."""
    if precision.rung == "float32":
        return "float32: measured on the presets (shared/core/tolerance.py)"
    gap = _emulated(precision, emulated_gap)
    text = (f"{bound_multiple(precision.rung):.3g} x emulated {precision.rung} rounding gap {gap:.2e}")
    if bound_multiple(precision.rung) * gap < float32_atol(spec, reference_logits):
        text += " (under float32's bound, which applies)"
    floor = floor_multiple(precision.rung)
    return text + (f"; floor {floor:.3g} x it" if floor else "; no floor (unmeasured rung)")


def max_abs_diff(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))


def max_rel_diff(a: np.ndarray, b: np.ndarray) -> float:
    """Largest |a - b| relative to the scale of the reference logits, max |b|. (Relative to each
    logit instead, a logit that happens to be near zero would dominate the figure.)"""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-12))
