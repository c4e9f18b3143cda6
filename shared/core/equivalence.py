"""The one equivalence verdict: is a port's output the spec's function?

`compare_tensor` compares any tensor with a reference within a tolerance: the shapes must be
equal, every value finite (a NaN or an infinity FAILS, never passes by comparing false), and the
largest absolute difference within the tolerance; of a naflex or packed batch's token tensors only
the valid tokens count (`valid`, shared/core/batching.py's `valid_rows`): what a port leaves in the
padding is no output of the model. `check_logits` is the one function that decides a port: its
logits against the float64 reference within the rung's bound and above its floor
(`shared/core/tolerance.py`), its own parameter count against `spec.derived.params`, and
the precision contract (`shared/core/precision.py`) on the dtype of every named tensor the
worker read from the framework. Its answer is one `PortVerdict`, the record that travels from
worker to table: `compare.py verify`, the timing gate (per mode, in the results file, through
`PortVerdict.to_dict` / `from_dict`) and `compare.py trace` all decide through it and print
it, so they cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Literal, Self

import numpy as np

from shared.core.batching import entry_images, valid_rows
from shared.core.data_record import Bound, DataRecord, derived, stored_as, transient
from shared.core.precision import FLOAT32, Precision, expected_tap_dtype
from shared.core.spec import ModelSpec
from shared.core.tolerance import derivation, logit_atol, max_abs_diff, max_rel_diff, rung_floor
from shared.errors import PortbenchError, SpecError

PAIRWISE_FACTOR = 2.0  # two ports, each within the tolerance of the reference, are within twice it
INFINITE = float("inf")


@dataclass(frozen=True)
class Comparison:
    """One tensor against its reference (`compare_tensor`)."""

    passed: bool
    tolerance: float
    max_abs_diff: float | None = None  # None when not comparable (shape, non-finite values)
    max_rel_diff: float | None = None
    reason: str | None = None  # why it failed, one line; None when it passed
    worst_image: int | None = None  # with `by_image`: the image (axis 0) of the largest gap


# The numbers a verdict states: non-negative and finite (a gap that could not be measured is None).
Gap = Annotated[float, Bound(low=0)]
Count = Annotated[int, Bound(low=0)]


@dataclass(frozen=True, kw_only=True)
class PortVerdict(DataRecord):
    """One port on one case: whether it computes the spec's function, the numbers that decided
    it, and why not, in one line. Made by `check_logits` (or `not_run`, for a port that gave no
    logits); `to_dict` / `from_dict` are its one JSON form (verify's --json entries and the
    results file's `equivalence` checks, docs/results-schema.md), and its annotations are that
    form's schema (shared/core/data_record.py)."""

    KIND: ClassVar[str] = "verdict"
    OPEN: ClassVar[bool] = True  # a results file a newer portbench wrote may hold more

    # A check written before this record states only passed, max_abs_err, max_rel_err, atol,
    # images and reason: the rest reads as these defaults.
    framework: str = ""
    spec: str = ""
    spec_hash: str = ""
    rung: str = "float32"
    status: Literal["PASS", "FAIL", "UNAVAILABLE"] = derived()
    passed: bool
    reason: str | None = None  # why it failed or could not run, one line; None when it passed
    unavailable: bool = False  # the framework, rung or device is not here: not a failure
    tolerance: Gap | None = stored_as("atol", default=None)  # max |logits - reference| must stay within it
    floor: Gap | None = None  # below this gap the port did not compute at the rung (0 at float32)
    bound: str | None = None  # below float32: how the tolerance and floor were derived
    emulated_gap: Gap | None = None  # below float32: |rung-emulating reference - float64|
    # None when not comparable (shape, non-finite) or not run; written infinite when checked (to_dict)
    max_abs_diff: Gap | None = stored_as("max_abs_err", default=None)
    max_rel_diff: Annotated[float, Bound(low=0, infinite=True)] | None = stored_as("max_rel_err",
                                                                                  default=None)
    images: Count | None = None  # how many images the logits were checked on
    param_count: Count | None = None  # the port's own count, when it reported one
    expected_params: Count | None = None  # spec.derived.params
    device: str | None = None
    versions: dict[str, str] = field(default_factory=dict)
    dtypes: dict[str, str] = field(default_factory=dict)  # named tensor -> dtype, as the framework ran it
    logits: np.ndarray | None = transient(default=None)  # for the pairwise gaps; never written

    def derived_values(self) -> dict[str, Any]:
        return {"status": "PASS" if self.passed else "UNAVAILABLE" if self.unavailable else "FAIL"}

    @property
    def checked(self) -> bool:
        """Whether logits were compared (False for a port that could not run)."""
        return self.tolerance is not None

    def to_dict(self) -> dict[str, Any]:
        """The one JSON form. `max_abs_err` is infinite when logits were checked but could not be
        compared (wrong shape, non-finite values) and null when none were checked: a reader of
        the file tells the two apart, where the attribute says None for both."""
        data = super().to_dict()
        if self.checked and self.max_abs_diff is None:
            data["max_abs_err"] = INFINITE
        return data

    @classmethod
    def from_dict(cls, data: Any, where: str | None = None,
                  error: type[PortbenchError] = SpecError) -> Self:
        """`to_dict`'s inverse: an infinite `max_abs_err` reads as None again."""
        if isinstance(data, dict) and data.get("max_abs_err") == INFINITE:
            data = {**data, "max_abs_err": None}
        return super().from_dict(data, where, error)


def compare_tensor(got: np.ndarray, reference: np.ndarray, tolerance: float, what: str = "logits",
                   valid: np.ndarray | None = None, by_image: bool = False,
                   image_of: np.ndarray | None = None) -> Comparison:
    """`got` against `reference`: same shape, all finite, max |got - reference| <= tolerance, over
    the entries `valid` (a bool array of their shape) marks, or every entry. `by_image` (a batch of
    images at their own grids): a failure names the image of the largest gap, its index along axis
    0, or `image_of` it (an int array of their shape: a packed batch's, batching.py's entry_images)."""
    got = np.asarray(got)
    reference = np.asarray(reference, dtype=np.float64)
    if got.shape != reference.shape:
        return Comparison(False, tolerance, reason=f"{what} shape {got.shape}, expected {reference.shape}")
    worst = worst_image(got, reference, valid, image_of) if by_image and got.ndim else None
    if valid is not None:  # the valid tokens' entries only, flattened
        got, reference = got[valid], reference[valid]
    finite = np.isfinite(got)
    if not finite.all():
        bad = int(got.size - np.count_nonzero(finite))
        return Comparison(False, tolerance, reason=f"{bad} of {got.size} values of the {what} are not "
                                                   "finite (NaN or infinity)")
    err, rel = max_abs_diff(got, reference), max_rel_diff(got, reference)
    if not err <= tolerance:
        at = "" if worst is None else f" (worst at image {worst})"
        return Comparison(False, tolerance, err, rel,
                          f"max |{what} - reference| {err:.3g} > tolerance {tolerance:.2g}{at}", worst)
    return Comparison(True, tolerance, err, rel)


def worst_image(got: np.ndarray, reference: np.ndarray, valid: np.ndarray | None,
                image_of: np.ndarray | None = None) -> int:
    """The image of the largest |got - reference| over the `valid` entries: its index along axis 0,
    or `image_of` it (whose padding entries, -1, are no image's)."""
    gap = np.abs(got.astype(np.float64) - reference)
    gap = np.where(np.isfinite(gap), gap, np.inf)
    if valid is not None:
        gap = np.where(valid, gap, 0.0)
    if image_of is not None:
        gap = np.where(image_of >= 0, gap, 0.0)
        return int(image_of.flat[int(np.argmax(gap))])
    return int(np.argmax(gap.reshape(len(gap), -1).max(axis=1)))


def check_logits(spec: ModelSpec, logits: np.ndarray, reference: np.ndarray,
                 param_count: int | None = None, precision: Precision = FLOAT32,
                 emulated_gap: float | None = None, *, tap_dtypes: dict[str, str] | None = None,
                 framework: str = "", device: str | None = None,
                 versions: dict[str, str] | None = None, first_nonfinite: str | None = None,
                 what: str = "logits", outputs: dict[str, np.ndarray] | None = None,
                 references: dict[str, np.ndarray] | None = None, images: np.ndarray | None = None,
                 emulated_outputs: dict[str, np.ndarray] | None = None) -> PortVerdict:
    """THE verdict on a port: its logits vs the float64 reference for the same weights and
    images at a precision rung, its own parameter count (when given) vs the spec's, and every
    named tensor's dtype (`tap_dtypes`, when the worker read them) vs the rung's contract. Below
    float32 the bound and the floor are multiples of `emulated_gap` (shared/core/rounding.py, on
    the same case), and the gap must reach the floor: a gap of float32's order means the rung did
    not run. `first_nonfinite` (the worker's `equivalence.first_nonfinite`) names where non-finite
    logits began. `what` names the output in the reason (a user's tower returns its "tokens").
    A spec's extra outputs (`derived.extra_outputs`: Qwen3-VL's deepstack mergers) are held too when
    `outputs` are given, the port's to the reference's `references` on the batch `images`
    (`check_outputs`; below float32 their budgets scale with the rung-emulating reference's
    `emulated_outputs`); the timing gate gives none, as the timed forward returns the logits alone.
    The first failure found is the reason."""
    tolerance = logit_atol(spec, reference, precision, emulated_gap)
    floor = rung_floor(spec, reference, precision, emulated_gap)
    # A tower's tokens on a patch batch: only the valid tokens count (padding rows are no image's)
    comparison = compare_tensor(logits, reference, tolerance, what, valid=valid_rows(spec, images, reference),
                                by_image=spec.batching != "fixed",
                                image_of=entry_images(spec, images, reference))
    err, expected = comparison.max_abs_diff, spec.derived.params
    reason = comparison.reason
    if reason and first_nonfinite:
        reason = f"{reason}; the first non-finite tensor is {first_nonfinite!r}"
    elif reason is None and outputs is not None:
        reason = check_outputs(spec, outputs, references or {}, images, precision, emulated_outputs)
    if reason is None and err is not None and err < floor:
        reason = (f"max |{what} - reference| {err:.3g} is below {precision.rung}'s floor {floor:.2g}: "
                  f"the port did not compute at {precision.rung}")
    if reason is None and param_count is not None and param_count != expected:
        reason = f"{param_count:,} parameters, spec says {expected:,}"
    if reason is None:
        reason = contract_breach(tap_dtypes or {}, precision, spec)
    return PortVerdict(
        framework=framework, spec=spec.name, spec_hash=spec.spec_hash, rung=precision.rung,
        passed=reason is None, reason=reason, tolerance=tolerance, floor=floor,
        bound=derivation(spec, reference, precision, emulated_gap) if precision.low else None,
        emulated_gap=emulated_gap, max_abs_diff=err, max_rel_diff=comparison.max_rel_diff,
        images=int(np.shape(reference)[0]) if np.ndim(reference) else None, param_count=param_count,
        expected_params=expected, device=device, versions=dict(versions or {}),
        dtypes=dict(tap_dtypes or {}), logits=np.asarray(logits))


def check_outputs(spec: ModelSpec, outputs: dict[str, np.ndarray], references: dict[str, np.ndarray],
                  images: np.ndarray | None, precision: Precision = FLOAT32,
                  emulated: dict[str, np.ndarray] | None = None) -> str | None:
    """Each of the spec's extra outputs against the reference's, within its own budget
    (`tap_budget`: its magnitude sets it, as for any tensor the port computes; below float32, the
    rung's multiple of its `emulated` output's gap), on the valid tokens of a patch batch; the
    first failure, naming the output (and its worst image), or None."""
    for name in spec.derived.extra_outputs:
        if name not in outputs:
            listed = ", ".join(spec.derived.extra_outputs)
            return f"the port gave no {name!r} output (the spec's extra outputs: {listed})"
        comparison = compare_tap(spec, name, outputs[name], references[name], images, precision,
                                 None if emulated is None else emulated[name])
        if comparison.reason:
            return comparison.reason
    return None


def compare_tap(spec: ModelSpec, name: str, got: np.ndarray, reference: np.ndarray, images: np.ndarray | None,
                precision: Precision = FLOAT32, emulated: np.ndarray | None = None) -> Comparison:
    """A named tensor of the forward (a tap, an extra output) against the reference's, within its
    budget (`tap_budget`), on the valid tokens of a patch batch `images` (batching.py's
    `valid_rows`), a failure naming the image of the largest gap (`entry_images` for a packed one)."""
    reference = np.asarray(reference, dtype=np.float64)
    return compare_tensor(got, reference, tap_budget(spec, reference, precision, emulated), name,
                          valid=valid_rows(spec, images, reference), by_image=spec.batching != "fixed",
                          image_of=entry_images(spec, images, reference))


def not_run(spec: ModelSpec, framework: str, precision: Precision, reason: str,
            unavailable: bool = False) -> PortVerdict:
    """The verdict on a port that gave no logits: a failure, or `unavailable` (the framework,
    the rung or the device is not here), with its one-line reason."""
    return PortVerdict(framework=framework, spec=spec.name, spec_hash=spec.spec_hash, rung=precision.rung,
                       passed=False, reason=reason, unavailable=unavailable,
                       expected_params=spec.derived.params)


def contract_breach(tap_dtypes: dict[str, str], precision: Precision, spec: ModelSpec) -> str | None:
    """The first named tensor the framework computed in another dtype than the precision
    contract holds it in (shared/core/precision.py), as one line; None when all agree."""
    for name, found in tap_dtypes.items():
        wanted = expected_tap_dtype(name, precision, spec)
        if found != wanted:
            return f"{name!r} was computed in {found}, the {precision.rung} contract holds it in {wanted}"
    return None


def check_pair(a: np.ndarray, b: np.ndarray, tolerance: float) -> Comparison:
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
