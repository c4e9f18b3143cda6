"""First-divergence tracing: line up every port's named intermediates against the float64
reference and report the first tensor whose error exceeds its budget.

The budget of a tensor scales with its magnitude, because float32 rounding is relative:
``budget = base * max(1, max|reference tensor|)``, with `base` the project's logit tolerance
(shared/core/tolerance.py: 5e-6 small models, 1e-5 large); whether a tensor is within it is
decided by shared/core/equivalence.py (shape, finiteness, max abs error), as for logits. Below
float32 a tensor's budget is the rung's multiple of that tensor's own emulated rounding gap
(shared/core/rounding.py), as the logits' bound is.
Taps are visited in the order the forward pass computes them, so the first tensor over budget
is where the port stops computing the spec's function; everything after it inherits the error.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar

import numpy as np

from shared.core.data_record import Bound, DataRecord, derived, stored_as
from shared.core.equivalence import PortVerdict, check_logits, compare_tap, not_run, tap_budget
from shared.core.precision import FLOAT32, Precision
from shared.core.reference import forward
from shared.core.rounding import emulated_forward
from shared.core.spec import ModelSpec
from shared.core.taps import Taps
from shared.core.tolerance import max_abs_diff
from shared.core.weights import Tensors, save_weights
from shared.runtime.jobs import TAPS
from shared.runtime.launch import run_worker

# A tap's size and budget; its error is infinite when the port's tensor could not be compared with
# the reference's (another shape, non-finite values: the note says which).
Magnitude = Annotated[float, Bound(low=0)]
TapError = Annotated[float, Bound(low=0, infinite=True)]


def tap_order(spec: ModelSpec) -> list[str]:
    """Every tap the reference records for `spec`, in computation order."""
    names = ["patch_embed", "pos_embed", *(["norm_pre"] if spec.norm_before_blocks else [])]
    for i in range(spec.depth):
        b = f"block{i}."
        if spec.norm == "pre":
            names += [b + "norm1", b + "attn_probs", b + "attn", b + "norm2", b + "mlp", b + "out"]
        else:
            names += [b + "attn_probs", b + "attn", b + "norm1", b + "mlp", b + "norm2", b + "out"]
        if i in spec.deepstack_blocks:  # Qwen3-VL's extra outputs, from this block's tokens
            names.append(f"deepstack.{spec.deepstack_blocks.index(i)}")
    if spec.final_norm == "tokens":
        names.append("final_norm")
    if spec.merge_size > 1:
        names.append("merger")
    if spec.pooling == "map":
        names.append("pool.attn_probs")
    return [*names, "pooled", "logits"]


def reference_taps(spec: ModelSpec, weights: Tensors, images: np.ndarray) -> dict[str, np.ndarray]:
    taps = Taps()
    forward(spec, weights, images, taps)
    return dict(taps.tensors)


def emulated_taps(spec: ModelSpec, weights: Tensors, images: np.ndarray,
                  precision: Precision) -> dict[str, np.ndarray] | None:
    """The rung-emulating reference's taps (None at float32): each tap's rounding scale."""
    if precision.rung == "float32":
        return None
    taps = Taps()
    emulated_forward(spec, weights, images, precision, taps)
    return dict(taps.tensors)


@dataclass(frozen=True)
class TapRow(DataRecord):
    """One named intermediate of one port against the reference's."""

    KIND: ClassVar[str] = "tap"

    name: str
    magnitude: Magnitude  # max |reference|
    error: TapError | None  # max |port - reference|; None when the port lacks the tap
    budget: Magnitude
    over: bool = False  # the equivalence verdict failed (a missing tap is not over)
    note: str = ""


@dataclass(frozen=True)
class PortTrace(DataRecord):
    """One port's taps in computation order, and its verdict; `to_dict` is `trace --json`'s entry."""

    KIND: ClassVar[str] = "trace"

    framework: str
    error: str | None = None  # the port could not run
    # the first tap over its budget, by name (`first_divergence` answers with its row)
    divergent_tap: str | None = derived("first_divergence")
    verdict: PortVerdict | None = None  # as `verify` decides it; None when the port could not run
    rows: tuple[TapRow, ...] = stored_as("taps", default=())

    def derived_values(self) -> dict[str, Any]:
        first = self.first_divergence
        return {"divergent_tap": first.name if first else None}

    @property
    def first_divergence(self) -> TapRow | None:
        return next((r for r in self.rows if r.over), None)

    @property
    def passed(self) -> bool:
        """The port ran, no tap is over its budget, and its verdict passed."""
        return not self.error and self.first_divergence is None and bool(self.verdict and self.verdict.passed)


def compare_taps(spec: ModelSpec, reference: dict[str, np.ndarray], port_taps: dict[str, np.ndarray],
                 framework: str, precision: Precision = FLOAT32,
                 emulated: dict[str, np.ndarray] | None = None, param_count: int | None = None,
                 tap_dtypes: dict[str, str] | None = None, images: np.ndarray | None = None,
                 readout: str = "logits") -> PortTrace:
    """Every tap against the reference's within its budget (where the port leaves the spec's
    function; of a naflex or packed batch `images`, on its valid tokens only), and the port's
    verdict from its logits tap (or `readout`, the final-token tap a user's tower returns instead:
    shared/your_model/run.py), `param_count` and `tap_dtypes` (when the worker read them) by
    `check_logits`, the one function `verify` decides by."""
    gap = None if emulated is None else max_abs_diff(emulated[readout], reference[readout])
    what = "logits" if readout == "logits" else "tokens"
    verdict = check_logits(spec, port_taps[readout], reference[readout], param_count, precision, gap,
                           tap_dtypes=tap_dtypes, framework=framework, what=what, outputs=port_taps,
                           references=reference, images=images, emulated_outputs=emulated) \
        if readout in port_taps else not_run(spec, framework, precision, f"the port gave no {what} tap")
    rows: list[TapRow] = []
    for name in tap_order(spec):
        ref = reference[name]
        budget = tap_budget(spec, ref, precision, None if emulated is None else emulated[name])
        magnitude = float(np.max(np.abs(ref)))
        if name not in port_taps:
            rows.append(TapRow(name, magnitude, None, budget, note="missing in this port"))
            continue
        tap = compare_tap(spec, name, port_taps[name], ref, images, precision,
                          None if emulated is None else emulated[name])
        error = tap.max_abs_diff if tap.max_abs_diff is not None else float("inf")
        note = "" if tap.passed or tap.max_abs_diff is not None else str(tap.reason)
        if not tap.passed and tap.max_abs_diff is not None and tap.worst_image is not None:
            note = f"worst at image {tap.worst_image}"  # a batch of images at their own grids
        rows.append(TapRow(name, magnitude, error, budget, over=not tap.passed, note=note))
    return PortTrace(framework, verdict=verdict, rows=tuple(rows))


# ---- collecting taps from ports, each framework in its own process ----------------------
def collect_taps(framework: str, spec: ModelSpec, weights_file: Path, images_file: Path,
                 workdir: Path, timeout: float = 600.0,
                 precision: Precision = FLOAT32) -> tuple[dict[str, np.ndarray], dict[str, Any]] | str:
    """`port.intermediates` in a fresh worker process (the `taps` job kind); the taps and the
    worker's report (the port's parameter count and, below float32, every tap's dtype), or a
    one-line reason the port could not run."""
    job = TAPS.job(spec=spec.to_json(), weights=str(weights_file), input=str(images_file),
                   precision=precision.to_dict())
    result = run_worker(framework, {"taps": job}, workdir, timeout)
    error = result.error("taps")
    return error if error else (result.arrays.get("taps", {}), result.reports["taps"])


def trace(spec: ModelSpec, weights: Tensors, images: np.ndarray, frameworks: list[str],
          precision: Precision = FLOAT32) -> tuple[dict[str, np.ndarray], list[PortTrace]]:
    reference = reference_taps(spec, weights, images)
    emulated = emulated_taps(spec, weights, images, precision)
    traces = []
    with tempfile.TemporaryDirectory(prefix="portbench-trace-") as tmp:
        workdir = Path(tmp)
        weights_file, images_file = workdir / "weights.safetensors", workdir / "images.npy"
        save_weights(weights_file, spec, weights)
        np.save(images_file, images)
        for fw in frameworks:
            got = collect_taps(fw, spec, weights_file, images_file, workdir, precision=precision)
            if isinstance(got, str):
                traces.append(PortTrace(fw, error=got))
            else:
                taps, report = got
                traces.append(compare_taps(spec, reference, taps, fw, precision, emulated,
                                           report.get("param_count"), report.get("tap_dtypes"), images))
    return reference, traces


def _row(trace: PortTrace, name: str) -> TapRow | None:
    return next((r for r in trace.rows if r.name == name), None)


def report_lines(traces: list[PortTrace], verbose: bool = False) -> list[str]:
    lines = []
    for t in traces:
        if t.error:
            lines.append(f"{t.framework}: could not run ({t.error})")
            continue
        first = t.first_divergence
        if first is None and t.verdict is not None and not t.verdict.passed:  # e.g. the contract, the floor
            lines.append(f"{t.framework}: FAIL: {t.verdict.reason}")
        worst = max((r for r in t.rows if r.error is not None and np.isfinite(r.error)),
                    key=lambda r: r.error / r.budget, default=None)
        if first is None:
            margin = "" if worst is None else (f"; closest to budget: {worst.name} "
                                               f"{worst.error:.2g} of {worst.budget:.2g}")
            lines.append(f"{t.framework}: all {len(t.rows)} taps within budget{margin}")
        else:
            detail = (f"error {first.error:.3g} > budget {first.budget:.2g} "
                      f"(|ref| up to {first.magnitude:.3g})")
            if first.note:  # why it could not be compared, or the image of the largest gap
                detail = first.note if not np.isfinite(first.error) else f"{detail}, {first.note}"
            lines.append(f"{t.framework}: first divergence at {first.name}: {detail}")
            others = [(o.framework, _row(o, first.name)) for o in traces if o is not t and not o.error]
            seen = [f"{fw} {row.error:.2g}" for fw, row in others
                    if row is not None and row.error is not None]
            if seen:
                lines.append(f"    other ports at {first.name}: {', '.join(seen)}")
        if verbose or first is not None:
            shown = t.rows if verbose else t.rows[: t.rows.index(first) + 1]
            if not verbose:
                shown = shown[-4:]  # the tensors just before, then the first one over
            for r in shown:
                err = "missing" if r.error is None else f"{r.error:.3g}"
                flag = "  <-- over budget" if r.over else ""
                lines.append(f"    {r.name:18s} |ref| {r.magnitude:9.3g}  error {err:>9s}  "
                             f"budget {r.budget:.2g}{flag}")
    return lines
