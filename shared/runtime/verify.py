"""Verification: every port against the float64 reference and against each other, on the same
canonical weights and probe batch. Each framework runs every case in one fresh worker process
(`shared.runtime.launch`), so ports cannot disturb each other and one crash does not stop the
rest. The verdict is `shared.core.equivalence`'s."""

from __future__ import annotations

import itertools
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ports import installed, rung_refusal
from shared.core import reference
from shared.core.equivalence import check_logits, check_pair
from shared.core.precision import FLOAT32, Precision, expected_tap_dtype
from shared.core.rounding import emulated_gap
from shared.core.spec import ModelSpec
from shared.core.tolerance import derivation, logit_atol, rung_floor
from shared.core.weights import Tensors, save_weights
from shared.runtime.jobs import LOGITS
from shared.runtime.launch import Worker


@dataclass
class Entry:
    spec: str
    spec_hash: str
    framework: str
    device: str | None = None
    param_count: int | None = None
    expected_params: int = 0
    max_abs_diff: float | None = None
    max_rel_diff: float | None = None
    tolerance: float = 0.0
    rung: str = "float32"
    floor: float = 0.0  # below this gap the port did not compute at the rung
    emulated_gap: float | None = None  # below float32: |rung-emulating reference - float64|
    bound: str | None = None  # how the tolerance and floor were derived
    passed: bool = False
    error: str | None = None
    unavailable: bool = False  # the framework or the requested device is not here: not a failure
    versions: dict[str, str] = field(default_factory=dict)
    dtypes: dict[str, str] = field(default_factory=dict)  # named tensor -> dtype, as the framework ran it
    logits: np.ndarray | None = field(default=None, repr=False)

    @property
    def status(self) -> str:
        return "PASS" if self.passed else "UNAVAILABLE" if self.unavailable else "FAIL"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("logits")
        data["status"] = self.status
        return data


@dataclass
class Case:
    spec: ModelSpec
    tensors: Tensors
    images: np.ndarray
    note: str | None = None
    precision: Precision = FLOAT32
    reference: np.ndarray | None = field(default=None, repr=False)  # filled by verify()
    emulated_gap: float | None = None  # below float32: filled by verify() (fill_reference)
    read_dtypes: bool = True  # below float32: read every tensor's dtype (one more forward, with taps)


def start_logits(framework: str, cases: list[Case], workdir: Path, device: str, **options: Any) -> Worker:
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
    """One report per case, with its logits or a one-line "error" (and whether the framework or
    the rung is merely unavailable here)."""
    result = worker.result(timeout)
    reports = []
    for name in worker.jobs:
        error = result.error(name)
        if error:
            kind = (result.reports.get(name) or {}).get("error_kind")
            reports.append({"error": error, "unavailable": kind == "FrameworkUnavailable"})
        else:
            reports.append({**result.reports[name], "logits": result.arrays[name]["logits"]})
    return reports


def run_logits(framework: str, cases: list[Case], workdir: Path, device: str,
               timeout: float) -> list[dict[str, Any]]:
    """One fresh worker for `framework` on every case; one report per case."""
    return collect_logits(start_logits(framework, cases, workdir, device), timeout)


def fill_reference(cases: list[Case]) -> None:
    """Each case's float64 reference logits (one pass per weights and batch) and, below float32,
    its emulated rounding gap (one rung-emulating pass per case), unless already filled."""
    known: dict[tuple[int, int], np.ndarray] = {}
    for c in cases:
        key = (id(c.tensors), id(c.images))
        if c.reference is None:
            if key not in known:
                known[key] = reference.forward(c.spec, c.tensors, c.images)
            c.reference = known[key]
        if c.emulated_gap is None:
            c.emulated_gap = emulated_gap(c.spec, c.tensors, c.images, c.precision, c.reference)


def entry_for(case: Case, framework: str, report: dict[str, Any], ref: np.ndarray) -> Entry:
    spec, precision, emulated = case.spec, case.precision, case.emulated_gap
    entry = Entry(spec.name, spec.spec_hash, framework,
                  tolerance=logit_atol(spec, ref, precision, emulated), rung=precision.rung,
                  floor=rung_floor(spec, ref, precision, emulated), emulated_gap=emulated,
                  bound=derivation(spec, ref, precision, emulated), expected_params=spec.derived.params)
    if report.get("error"):
        entry.error, entry.unavailable = report["error"], bool(report.get("unavailable"))
        return entry
    entry.device, entry.param_count = report["device"], report["param_count"]
    entry.versions, entry.logits = report["versions"], report["logits"]
    verdict = check_logits(case.spec, entry.logits, ref, entry.param_count, case.precision, emulated)
    entry.passed, entry.error = verdict.passed, verdict.reason
    entry.dtypes = dict(report.get("tap_dtypes") or {})
    broken = contract_breach(entry.dtypes, case.precision)
    if entry.passed and broken:
        entry.passed, entry.error = False, broken
    if report.get("first_nonfinite"):
        entry.error = f"{verdict.reason}; the first non-finite tensor is {report['first_nonfinite']!r}"
    entry.max_abs_diff, entry.max_rel_diff = verdict.max_abs_diff, verdict.max_rel_diff
    return entry


def contract_breach(tap_dtypes: dict[str, str], precision: Precision) -> str | None:
    """The first named tensor the framework computed in another dtype than the precision
    contract holds it in (shared/core/precision.py), as one line; None when all agree."""
    for name, found in tap_dtypes.items():
        wanted = expected_tap_dtype(name, precision)
        if found != wanted:
            return f"{name!r} was computed in {found}, the {precision.rung} contract holds it in {wanted}"
    return None


def pairwise_gaps(case: Case, entries: list[Entry], ref: np.ndarray) -> list[dict[str, Any]]:
    """Every pair of ports whose logits have the reference's shape, within twice the tolerance."""
    comparable = [e for e in entries if e.logits is not None and e.logits.shape == ref.shape]
    gaps = []
    for a, b in itertools.combinations(comparable, 2):
        verdict = check_pair(a.logits, b.logits, a.tolerance)
        gap = verdict.max_abs_diff if verdict.max_abs_diff is not None else float("nan")
        gaps.append({"spec": case.spec.name, "rung": case.precision.rung, "a": a.framework,
                     "b": b.framework, "max_abs_diff": gap, "passed": verdict.passed})
    return gaps


def verify(cases: list[Case], frameworks: list[str], device: str = "cpu",
           timeout: float = 900.0) -> tuple[list[Entry], list[dict[str, Any]]]:
    """Run every framework on every case; return per-framework entries and pairwise gaps."""
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
            by_framework[framework] = run_logits(framework, cases, Path(tmp), device, timeout)
    entries: list[Entry] = []
    pairwise: list[dict[str, Any]] = []
    for i, (case, ref) in enumerate(zip(cases, references, strict=True)):
        case_entries = [entry_for(case, fw, reports[i], ref) for fw, reports in by_framework.items()]
        pairwise.extend(pairwise_gaps(case, case_entries, ref))
        entries.extend(case_entries)
    return entries, pairwise
