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
from shared.core.spec import ModelSpec
from shared.core.tolerance import logit_atol
from shared.core.weights import init_weights

GATE_IMAGES = 4  # the reference runs in float64 NumPy: a few images are enough to catch errors


def tolerance(spec: ModelSpec, reference_logits: np.ndarray | None = None) -> float:
    """The project's logit tolerance (shared/core/tolerance.py, the one source of truth for it)."""
    return logit_atol(spec, reference_logits)


def write_reference(path: str | Path, spec: ModelSpec, batch: int, seed: int, weights_seed: int) -> None:
    """Reference logits for the first images of the timed batch, computed once by the parent."""
    images = probe_batch(spec, batch=batch, seed=seed)[:GATE_IMAGES]
    logits = reference.forward(spec, init_weights(spec, seed=weights_seed), images)
    np.savez(path, logits=logits)


def reference_logits(path: str | Path) -> np.ndarray:
    with np.load(path, allow_pickle=False) as data:
        return np.asarray(data["logits"], dtype=np.float64)


def compare(spec: ModelSpec, port_logits: np.ndarray, ref: np.ndarray,
            param_count: int | None = None) -> dict[str, Any]:
    """One mode's gate check, as the results file records it (`max_abs_err` is infinite when
    the logits cannot be compared: wrong shape or non-finite values)."""
    verdict = check_logits(spec, port_logits, ref, param_count)
    err = verdict.max_abs_diff
    return {"passed": verdict.passed, "max_abs_err": float("inf") if err is None else err,
            "atol": verdict.tolerance, "images": int(ref.shape[0]), "reason": verdict.reason}
