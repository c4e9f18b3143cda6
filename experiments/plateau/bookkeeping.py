"""The quadrant plateau: how long a model's loss dwells near ln(2)/2 and which pair it leaves unsolved.

ln(2)/2 = 0.3466 is the mean cross-entropy of a model that separates one pair of quadrants and
not the other: on half the examples it splits evenly between two answers (loss ln 2 there, 0 on
the rest), so accuracy is 3/4 and the confusion matrix has one unresolved pair.

Bookkeeping, stated exactly:
- **dwell**: the per-update training loss (`trainloop.STEP_CURVE`) is smoothed by a trailing mean
  over `window` updates (a batch of 64 has a sampling std of ~0.04 on the plateau); an update is
  "in the band" when its smoothed loss is within `band` of ln(2)/2. `steps_in_band` counts them.
  The loss alone cannot tell a plateau from a slow descent (a model with every answer right but
  small logits also passes 0.35, for hundreds of updates at a small learning rate), so an update
  is "on the plateau" when it is in the band and the test accuracy at the end of its epoch is
  within `ACCURACY_TOL` of 3/4. `plateau_steps` counts those, `longest_plateau` is the longest
  run of consecutive ones, `stalled` says the last update of the budget is on the plateau.
- **plateau epoch**: of the epochs whose test loss is within `band` of ln(2)/2, the nearest one
  among those with test accuracy near 3/4 (any of them if none is); its test-set
  confusion matrix (rows: true quadrant, columns: predicted) names the unresolved pair, the
  unordered pair {i, j} with the most examples of i answered j or j answered i.

Framework-neutral: the runs themselves are `runs.py` (a worker per framework).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

TARGET = math.log(2) / 2
QUADRANTS = ("TL", "TR", "BL", "BR")  # labels 0..3 of shared.training.data.quadrant_images
BAND = 0.05
WINDOW = 16
ACCURACY_TOL = 0.1  # "3 of 4 right": test accuracy in [0.65, 0.85]


@dataclass(frozen=True)
class Dwell:
    steps_in_band: int  # smoothed loss within the band
    plateau_steps: int  # ... and test accuracy near 3/4
    longest_plateau: int
    first_step: int | None  # 1-based update at which the smoothed loss first enters the band
    stalled: bool


def smoothed(curve: list[float] | np.ndarray, window: int = WINDOW) -> np.ndarray:
    """Trailing mean over `window` updates (over fewer at the start)."""
    values = np.asarray(curve, dtype=float)
    if window < 1:
        raise ValueError(f"window = {window}: expected an integer >= 1")
    sums = np.cumsum(np.concatenate([[0.0], values]))
    ends = np.arange(1, len(values) + 1)
    starts = np.maximum(ends - window, 0)
    return (sums[ends] - sums[starts]) / (ends - starts)


def per_step(epoch_values: list[float], steps_per_epoch: int, steps: int) -> np.ndarray:
    """An epoch-end value repeated for each update of its epoch, cut to `steps` updates."""
    return np.repeat(np.asarray(epoch_values, dtype=float), steps_per_epoch)[:steps]


def dwell(curve: list[float] | np.ndarray, accuracy: np.ndarray | None = None, band: float = BAND,
          window: int = WINDOW, target: float = TARGET) -> Dwell:
    """How the smoothed per-update loss sits in [target - band, target + band]; `accuracy`
    (per update, e.g. `per_step` of the test accuracy) decides which of those are the plateau."""
    inside = np.abs(smoothed(curve, window) - target) <= band
    on = inside if accuracy is None else inside & (np.abs(np.asarray(accuracy) - 0.75) <= ACCURACY_TOL)
    longest = run = 0
    for flag in on:
        run = run + 1 if flag else 0
        longest = max(longest, run)
    hits = np.flatnonzero(inside)
    return Dwell(int(inside.sum()), int(on.sum()), longest, int(hits[0]) + 1 if len(hits) else None,
                 bool(len(on) and on[-1]))


def confusion(labels: np.ndarray, predicted: np.ndarray, classes: int = 4) -> np.ndarray:
    """counts[i, j]: examples of true class i answered j."""
    counts = np.zeros((classes, classes), dtype=np.int64)
    np.add.at(counts, (np.asarray(labels, dtype=np.int64), np.asarray(predicted, dtype=np.int64)), 1)
    return counts


def unresolved_pair(counts: np.ndarray) -> tuple[int, int, int]:
    """(i, j, examples) of the unordered pair with the most confusions either way, i < j."""
    pairs = [(int(counts[i, j] + counts[j, i]), -i, -j) for i in range(len(counts))
             for j in range(i + 1, len(counts))]
    mixed, i, j = max(pairs)  # ties: the lowest (i, j)
    return -i, -j, mixed


def pair_name(i: int, j: int) -> str:
    return f"{QUADRANTS[i]}/{QUADRANTS[j]}"


def plateau_epoch(test_loss: list[float], test_accuracy: list[float], band: float = BAND,
                  target: float = TARGET) -> int | None:
    """The 0-based plateau epoch (module docstring), None when no epoch's loss is in the band."""
    gaps = np.abs(np.asarray(test_loss, dtype=float) - target)
    three_quarters = np.abs(np.asarray(test_accuracy, dtype=float) - 0.75) <= ACCURACY_TOL
    for allowed in (three_quarters & (gaps <= band), gaps <= band):
        if allowed.any():
            return int(np.argmin(np.where(allowed, gaps, np.inf)))
    return None
