"""The equivalence gate run before any timing: a port's logits vs the float64 NumPy reference
for the same canonical weights and images. A port that fails is INVALID and is never ranked:
timing a different function would be a confound, not a result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from shared.core import reference
from shared.core.inputs import probe_batch
from shared.core.spec import ModelSpec
from shared.core.tolerance import logit_atol, max_abs_diff
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


def compare(port_logits: np.ndarray, ref: np.ndarray, spec: ModelSpec) -> dict[str, Any]:
    atol = tolerance(spec, ref)
    got = np.asarray(port_logits, dtype=np.float64)
    if got.shape != ref.shape:
        return {"passed": False, "max_abs_err": float("inf"), "atol": atol, "images": int(ref.shape[0]),
                "detail": f"shape {got.shape} vs reference {ref.shape}"}
    finite = bool(np.all(np.isfinite(got)))
    err = max_abs_diff(got, ref) if finite else float("inf")
    return {"passed": finite and err <= atol, "max_abs_err": err, "atol": atol, "images": int(ref.shape[0])}
