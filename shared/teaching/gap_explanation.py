"""`compare.py diagnose`: which catalogue setting explains the gap between a user's logits and
the reference.

The user ran their own port with the canonical weights on the probe batch (or their own images)
and saved the logits. The reference is re-run under each alternative in `shared.teaching.variants`, alone
and then in pairs; an alternative *explains* the gap when the reference under it reproduces the
user's logits within the equivalence tolerance. Nothing here imports a framework.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np

from shared.core.containers import read_npy
from shared.core.data_record import DataRecord, derived, stored_as
from shared.core.equivalence import Gap
from shared.core.forward_io import output_rows
from shared.core.reference import forward
from shared.core.spec import ModelSpec
from shared.core.tolerance import logit_atol, logit_scale, max_abs_diff
from shared.core.weights import Tensors
from shared.errors import InputError, SpecError
from shared.teaching.variants import Case, Variant, applicable, applicable_pairs

# Float64 reference runs that differ by less than this compute the same function (round-off).
NO_CHANGE = 1e-12


@dataclass(frozen=True)
class Candidate(DataRecord):
    """A catalogue setting, or a pair of them, and the gap the reference leaves under it."""

    KIND: ClassVar[str] = "candidate"

    settings: tuple[str, ...]  # each variant's key: "layer_norm_eps=0.001"
    entries: tuple[str, ...]  # the catalogue entry of each
    gap: Gap  # max |the reference under the settings - the user's logits|
    cause: str  # what each setting means for a port, "; " between them

    @classmethod
    def of(cls, variants: tuple[Variant, ...], gap: float) -> Candidate:
        return cls(tuple(v.key for v in variants), tuple(v.entry for v in variants), gap,
                   "; ".join(v.cause for v in variants))

    @property
    def label(self) -> str:
        return " + ".join(self.settings)


@dataclass(frozen=True)
class Diagnosis(DataRecord):
    """`diagnose`'s answer; `to_dict` is `diagnose --json` and verify's `diagnosis`."""

    KIND: ClassVar[str] = "diagnosis"

    spec_name: str = stored_as("spec")
    verdict: Literal["match", "explained", "unexplained"] = derived()
    baseline_gap: Gap
    tolerance: float
    explained: tuple[Candidate, ...] = ()
    closest: tuple[Candidate, ...] = ()  # best partial explanations
    tried_single: int = 0
    tried_pairs: int = 0

    def derived_values(self) -> dict[str, Any]:
        if self.baseline_gap <= self.tolerance:
            return {"verdict": "match"}
        return {"verdict": "explained" if self.explained else "unexplained"}

    def lines(self) -> list[str]:
        g, tol = self.baseline_gap, self.tolerance
        if self.verdict == "match":
            return [f"your logits match the reference (gap {g:.2g} <= tolerance {tol:.0e}); "
                    "nothing to explain"]
        tried = f"{self.tried_single} settings alone and {self.tried_pairs} pairs"
        if self.explained:
            out = [f"gap {g:.2g} falls to {c.gap:.2g} with {c.label}: {c.cause}"
                   for c in self.explained]
            return [*out, f"(tolerance {tol:.0e}; tried {tried})"]
        out = [f"unexplained: gap {g:.2g} is not reproduced by any catalogue setting "
               f"(tried {tried}; tolerance {tol:.0e})"]
        for c in self.closest:
            out.append(f"  closest: {c.label} leaves {c.gap:.2g} ({g / max(c.gap, 1e-300):.3g}x smaller)")
        return out


def check_user_logits(spec: ModelSpec, logits: np.ndarray, images: np.ndarray, source: str) -> np.ndarray:
    # num_classes, or the pooled width without a classifier; a row per image (output_rows: a packed
    # batch's sequences times the images each holds)
    batch, rows = len(images), output_rows(images)
    expected = (rows, spec.derived.outputs)
    if not isinstance(logits, np.ndarray) or logits.dtype.kind not in "fc":
        kind = getattr(logits, "dtype", type(logits).__name__)
        raise InputError(f"{source}: logits have dtype {kind}, expected a float array")
    if logits.dtype.kind == "c":
        raise InputError(f"{source}: logits are complex, expected real floats")
    if tuple(logits.shape) != expected:
        packed = f" x {rows // batch} packed images" if rows != batch else ""
        raise InputError(
            f"{source}: logits have shape {tuple(logits.shape)}, expected {expected} "
            f"(batch {batch}{packed} x {spec.derived.outputs} outputs of spec {spec.name!r})"
        )
    bad = int(logits.size - np.count_nonzero(np.isfinite(logits)))
    if bad:
        raise InputError(f"{source}: logits contain {bad} non-finite values (NaN or inf)")
    return logits.astype(np.float64)


def load_user_logits(path: str | Path) -> np.ndarray:
    """A user's `.npy` logits, read as every user array is (shared/core/containers.py): the
    header's dtype is checked before the data is read; the shape is checked against the batch
    by `check_user_logits`."""
    source = f"logits file {str(path)!r}"

    def expect(shape: tuple[int, ...], dtype: np.dtype) -> None:
        if dtype.kind not in "fc":
            raise InputError(f"{source}: logits have dtype {dtype}, expected a float array")

    return read_npy(path, source, InputError, expect)


def named_for(variant: Variant, model_from: str | None) -> Variant:
    """An epsilon found in a user's model, named by the library the model comes from: the
    catalogue's cause names the framework whose default the value is, which is a guess about a
    port's logits (a torch or timm model's 1e-6 is not "Flax's default"). None: keep the catalogue's."""
    if model_from is None or variant.entry != "layer_norm_eps":
        return variant
    who = f"your {model_from} model's" if model_from else "your model's"
    return replace(variant, cause=f"{who} LayerNorms use {variant.key}")


def diagnose(spec: ModelSpec, weights: Tensors, images: np.ndarray, user_logits: np.ndarray,
             tolerance: float | None = None, pairs: bool = True, closest: int = 3,
             source: str = "logits", model_from: str | None = None) -> Diagnosis:
    """Re-run the reference under every alternative (then pairs) against `user_logits`.
    `model_from`: for a user's model run here, the library it comes from ("" when unknown)."""
    user = check_user_logits(spec, user_logits, images, source)
    base = Case(spec, weights, images)
    reference = forward(spec, weights, images)
    # the project's equivalence tolerance (shared/core/tolerance.py), scaled by the logit magnitude
    tol = logit_atol(spec, reference) if tolerance is None else tolerance
    if tol >= logit_scale(reference):  # every logit of the right size would "match"
        raise SpecError(f"--tolerance {tol:g}: expected below {logit_scale(reference):.3g}, the reference "
                        "logits' scale max(1, max |logit|); a gap that large is no match")
    baseline = max_abs_diff(reference, user)
    if baseline <= tol:
        return Diagnosis(spec.name, baseline, tol)
    tried: list[Candidate] = []
    effective: list[Variant] = []  # alternatives that change this model's function at all
    singles = [(named_for(v, model_from), case) for v, case in applicable(base)]
    for v, case in singles:
        logits = forward(case.spec, case.weights, case.images)
        if max_abs_diff(logits, reference) <= NO_CHANGE:
            continue  # e.g. pad on a divisible image, or a final norm on the class token
        effective.append(v)
        tried.append(Candidate.of((v,), max_abs_diff(logits, user)))
    explained = sorted((c for c in tried if c.gap <= tol), key=lambda c: c.gap)
    combos = applicable_pairs(base, effective) if pairs and not explained else []
    for (a, b), case in combos:
        gap = max_abs_diff(forward(case.spec, case.weights, case.images), user)
        tried.append(Candidate.of((a, b), gap))
    if combos:
        explained = sorted((c for c in tried if c.gap <= tol), key=lambda c: c.gap)
    # only those that remove 90% of the gap are worth naming
    helpful = [] if explained else sorted((c for c in tried if c.gap < 0.1 * baseline), key=lambda c: c.gap)
    return Diagnosis(spec.name, baseline, tol, tuple(explained), tuple(helpful[:closest]), len(effective),
                     len(combos))
