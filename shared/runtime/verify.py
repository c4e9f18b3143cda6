"""Verification: every port against the float64 reference and against each other, on the same
canonical weights and probe batch. Each framework runs every case in one fresh worker process
(`shared.runtime.launch`), so ports cannot disturb each other and one crash does not stop the
rest. The verdict is `shared.core.equivalence.check_logits`'s, one `PortVerdict` per port and
case."""

from __future__ import annotations

import itertools
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ports import installed, rung_refusal
from shared.core import reference
from shared.core.equivalence import PortVerdict, check_logits, check_pair, not_run
from shared.core.precision import FLOAT32, Precision
from shared.core.rounding import emulated_gap
from shared.core.spec import ModelSpec
from shared.core.taps import NamedTaps
from shared.core.weights import Tensors, save_weights
from shared.runtime.jobs import LOGITS
from shared.runtime.launch import Worker


@dataclass
class VerifyCase:
    """One spec, its weights and probe batch at one rung: what `verify` runs every port on."""

    spec: ModelSpec
    tensors: Tensors
    images: np.ndarray
    note: str | None = None
    precision: Precision = FLOAT32
    reference: np.ndarray | None = field(default=None, repr=False)  # filled by verify()
    reference_outputs: dict[str, np.ndarray] = field(default_factory=dict, repr=False)  # its extra outputs
    emulated_gap: float | None = None  # below float32: filled by verify() (fill_reference)
    emulated_outputs: dict[str, np.ndarray] | None = field(default=None, repr=False)  # and its extra outputs'
    read_dtypes: bool = True  # below float32: read every tensor's dtype (one more forward, with taps)


def start_logits(framework: str, cases: list[VerifyCase], workdir: Path, device: str,
                 **options: Any) -> Worker:
    """Start one fresh worker for `framework` on every case (weights and images written to
    `workdir` once, for every framework); `collect_logits` waits for it. `options` go to the
    launcher (threads, pinning)."""
    jobs = {}
    for i, case in enumerate(cases):
        weights, inputs = workdir / f"w{i}.safetensors", workdir / f"x{i}.npy"
        if not weights.exists():
            save_weights(weights, case.spec, case.tensors)
            np.save(inputs, case.images)
        jobs[f"case{i}"] = LOGITS.job(spec=case.spec.to_json(), weights=str(weights), input=str(inputs),
                                      device=device, precision=case.precision.to_dict(),
                                      dtypes=case.read_dtypes)
    return Worker(framework, jobs, workdir, **options)


def collect_logits(worker: Worker, timeout: float) -> list[dict[str, Any]]:
    """One report per case, with its logits and extra outputs or a one-line "error" (and whether the
    framework or the rung is merely unavailable here)."""
    result = worker.result(timeout)
    reports = []
    for name in worker.jobs:
        error = result.error(name)
        if error:
            kind = (result.reports.get(name) or {}).get("error_kind")
            reports.append({"error": error, "unavailable": kind == "FrameworkUnavailable"})
        else:
            arrays = result.arrays[name]
            reports.append({**result.reports[name], "logits": arrays["logits"],
                            "outputs": {k: v for k, v in arrays.items() if k != "logits"}})
    return reports


def fill_reference(cases: list[VerifyCase]) -> None:
    """Each case's float64 reference logits and extra outputs (one pass per weights and batch) and,
    below float32, its emulated rounding gap (one rung-emulating pass per case), unless already
    filled."""
    known: dict[tuple[int, int], tuple[np.ndarray, dict[str, np.ndarray]]] = {}
    for c in cases:
        key = (id(c.tensors), id(c.images))
        if c.reference is None or len(c.reference_outputs) < len(c.spec.derived.extra_outputs):
            if key not in known:
                taps = NamedTaps(c.spec.derived.extra_outputs)
                logits = reference.forward(c.spec, c.tensors, c.images, taps)
                known[key] = logits, {name: taps[name] for name in c.spec.derived.extra_outputs}
            c.reference = known[key][0] if c.reference is None else c.reference
            c.reference_outputs = known[key][1]
        if c.emulated_gap is None:  # the rung-emulating pass gives the extra outputs' rounding scale too
            emulated: dict[str, np.ndarray] = {}
            c.emulated_gap = emulated_gap(c.spec, c.tensors, c.images, c.precision, c.reference, emulated)
            c.emulated_outputs = {name: emulated[name] for name in c.spec.derived.extra_outputs} \
                if emulated else None


def verdict_for(case: VerifyCase, framework: str, report: dict[str, Any], ref: np.ndarray) -> PortVerdict:
    """The one verdict on a worker's report for `case` (shared/core/equivalence.check_logits)."""
    if report.get("error"):
        return not_run(case.spec, framework, case.precision, report["error"], bool(report.get("unavailable")))
    return check_logits(case.spec, report["logits"], ref, report["param_count"], case.precision,
                        case.emulated_gap, tap_dtypes=report.get("tap_dtypes"), framework=framework,
                        device=report["device"], versions=report["versions"],
                        first_nonfinite=report.get("first_nonfinite"), outputs=report.get("outputs"),
                        references=case.reference_outputs, images=case.images,
                        emulated_outputs=case.emulated_outputs)


def pairwise_gaps(case: VerifyCase, verdicts: list[PortVerdict], ref: np.ndarray) -> list[dict[str, Any]]:
    """Every pair of ports whose logits have the reference's shape, within twice the tolerance."""
    comparable = [v for v in verdicts if v.logits is not None and v.logits.shape == ref.shape]
    gaps = []
    for a, b in itertools.combinations(comparable, 2):
        comparison = check_pair(a.logits, b.logits, a.tolerance)
        gap = comparison.max_abs_diff if comparison.max_abs_diff is not None else float("nan")
        gaps.append({"spec": case.spec.name, "rung": case.precision.rung, "a": a.framework,
                     "b": b.framework, "max_abs_diff": gap, "passed": comparison.passed})
    return gaps


def verify(cases: list[VerifyCase], frameworks: list[str], device: str = "cpu",
           timeout: float = 900.0) -> tuple[list[PortVerdict], list[dict[str, Any]]]:
    """Run every framework on every case; return one verdict per framework and case, and the
    pairwise gaps."""
    fill_reference(cases)
    references = [c.reference for c in cases]
    by_framework: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="portbench-verify-") as tmp:
        for framework in frameworks:
            if framework == "reference":
                continue
            reasons = [installed().get(framework) or rung_refusal(framework, c.precision, device)
                       for c in cases]
            if all(reasons):  # not installed, or no case's rung offered: no worker to start
                by_framework[framework] = [{"error": reason, "unavailable": True} for reason in reasons]
                continue
            print(f"  running {framework} ...", file=sys.stderr, flush=True)
            worker = start_logits(framework, cases, Path(tmp), device)  # one fresh worker, every case
            by_framework[framework] = collect_logits(worker, timeout)
    verdicts: list[PortVerdict] = []
    pairwise: list[dict[str, Any]] = []
    for i, (case, ref) in enumerate(zip(cases, references, strict=True)):
        case_verdicts = [verdict_for(case, fw, reports[i], ref) for fw, reports in by_framework.items()]
        pairwise.extend(pairwise_gaps(case, case_verdicts, ref))
        verdicts.extend(case_verdicts)
    return verdicts, pairwise
