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

from ports import installed
from shared.core import reference
from shared.core.equivalence import check_logits, check_pair
from shared.core.spec import ModelSpec
from shared.core.tolerance import logit_atol
from shared.core.weights import Tensors, save_weights
from shared.runtime.launch import run_worker


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
    passed: bool = False
    error: str | None = None
    unavailable: bool = False  # the framework or the requested device is not here: not a failure
    versions: dict[str, str] = field(default_factory=dict)
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


def run_logits(framework: str, cases: list[Case], workdir: Path, device: str,
               timeout: float) -> list[dict[str, Any]]:
    """One fresh worker for `framework` on every case; one report per case, with its logits or
    a one-line "error"."""
    jobs = {}
    for i, case in enumerate(cases):
        weights, inputs = workdir / f"w{i}.safetensors", workdir / f"x{i}.npy"
        if not weights.exists():
            save_weights(weights, case.spec, case.tensors)
            np.save(inputs, case.images)
        jobs[f"case{i}"] = {"kind": "logits", "spec": case.spec.to_json(), "weights": str(weights),
                            "input": str(inputs), "device": device}
    result = run_worker(framework, jobs, workdir, timeout)
    reports = []
    for name in jobs:
        error = result.error(name)
        if error:
            kind = (result.reports.get(name) or {}).get("error_kind")
            reports.append({"error": error, "unavailable": kind == "FrameworkUnavailable"})
        else:
            reports.append({**result.reports[name], "logits": result.arrays[name]["logits"]})
    return reports


def entry_for(case: Case, framework: str, report: dict[str, Any], ref: np.ndarray) -> Entry:
    entry = Entry(case.spec.name, case.spec.spec_hash, framework, tolerance=logit_atol(case.spec, ref),
                  expected_params=case.spec.derived.params)
    if report.get("error"):
        entry.error, entry.unavailable = report["error"], bool(report.get("unavailable"))
        return entry
    entry.device, entry.param_count = report["device"], report["param_count"]
    entry.versions, entry.logits = report["versions"], report["logits"]
    verdict = check_logits(case.spec, entry.logits, ref, entry.param_count)
    entry.passed, entry.error = verdict.passed, verdict.reason
    if report.get("first_nonfinite"):
        entry.error = f"{verdict.reason}; the first non-finite tensor is {report['first_nonfinite']!r}"
    entry.max_abs_diff, entry.max_rel_diff = verdict.max_abs_diff, verdict.max_rel_diff
    return entry


def pairwise_gaps(case: Case, entries: list[Entry], ref: np.ndarray) -> list[dict[str, Any]]:
    """Every pair of ports whose logits have the reference's shape, within twice the tolerance."""
    comparable = [e for e in entries if e.logits is not None and e.logits.shape == ref.shape]
    gaps = []
    for a, b in itertools.combinations(comparable, 2):
        verdict = check_pair(a.logits, b.logits, a.tolerance)
        gap = verdict.max_abs_diff if verdict.max_abs_diff is not None else float("nan")
        gaps.append({"spec": case.spec.name, "a": a.framework, "b": b.framework,
                     "max_abs_diff": gap, "passed": verdict.passed})
    return gaps


def verify(cases: list[Case], frameworks: list[str], device: str = "cpu",
           timeout: float = 900.0) -> tuple[list[Entry], list[dict[str, Any]]]:
    """Run every framework on every case; return per-framework entries and pairwise gaps."""
    references = [reference.forward(c.spec, c.tensors, c.images) for c in cases]
    by_framework: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="portbench-verify-") as tmp:
        for framework in frameworks:
            if framework == "reference":
                continue
            reason = installed().get(framework)
            if reason:
                by_framework[framework] = [{"error": reason, "unavailable": True} for _ in cases]
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
