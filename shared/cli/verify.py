"""`compare.py verify`: every installed port against the float64 reference and against each
other, on the same canonical weights and probe batch. Each framework runs in its own fresh
subprocess (with its registry environment, e.g. KERAS_BACKEND), so ports cannot disturb each
other and one crash does not stop the rest. Exit status 1 when any port fails."""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ports import PORTS, installed, parse_frameworks
from shared import REPO_ROOT
from shared.cli._common import add_spec_args, print_note, resolve_model
from shared.core import reference
from shared.core.inputs import probe_batch
from shared.core.presets import DEFAULT_PRESET, PRESETS, get_preset
from shared.core.spec import ModelSpec
from shared.core.summary import format_table
from shared.core.tolerance import logit_atol, max_abs_diff, max_rel_diff
from shared.core.weights import Tensors, atomic_write_bytes, init_weights, save_weights
from shared.errors import FrameworkUnavailable

ORDER = 40
SCHEMA = "portbench.verify/1"
ROOT = REPO_ROOT


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
    versions: dict[str, str] = field(default_factory=dict)
    logits: np.ndarray | None = field(default=None, repr=False)


@dataclass
class Case:
    spec: ModelSpec
    tensors: Tensors
    images: np.ndarray
    note: str | None = None


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("verify", help="check every port's logits against the float64 reference")
    add_spec_args(parser)
    parser.add_argument("--frameworks", help="comma-separated (default: every installed port)")
    parser.add_argument("--all-presets", action="store_true", help="verify every preset")
    parser.add_argument("--batch", type=int, default=4, help="probe batch size (default 4)")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda", "metal"])
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per framework")
    parser.add_argument("--json", help="write the results here (one entry per spec and framework)")
    parser.set_defaults(run=run)


def default_frameworks() -> list[str]:
    return [name for name, reason in installed().items() if reason is None]


def run_worker(framework: str, cases: list[Case], workdir: Path, device: str,
               timeout: float) -> list[dict]:
    """One fresh process for `framework`, running every case; returns one report per case."""
    jobs = []
    for i, case in enumerate(cases):
        weights, inputs = workdir / f"w{i}.safetensors", workdir / f"x{i}.npy"
        if not weights.exists():
            save_weights(weights, case.spec, case.tensors)
            np.save(inputs, case.images)
        jobs.append({"spec": case.spec.to_json(), "weights": str(weights), "input": str(inputs),
                     "output": str(workdir / f"{framework}-{i}.npy")})
    job_file = workdir / f"{framework}.json"
    job_file.write_text(json.dumps({"framework": framework, "jobs": jobs, "device": device}))
    env = {**os.environ, **PORTS[framework].env, "TF_CPP_MIN_LOG_LEVEL": "3"}
    try:
        proc = subprocess.run([sys.executable, "-m", "shared.runtime.worker", str(job_file)],
                              cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return [{"error": f"timed out after {timeout:.0f} s"} for _ in cases]
    report_file = job_file.with_suffix(".report.json")
    if proc.returncode != 0 or not report_file.exists():
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return [{"error": f"worker exited with status {proc.returncode}: {tail}"} for _ in cases]
    reports = json.loads(report_file.read_text())
    for report, job in zip(reports, jobs, strict=True):
        if "error" not in report:
            report["logits"] = np.load(job["output"], allow_pickle=False)
    return reports


def verify(cases: list[Case], frameworks: list[str], device: str = "cpu",
           timeout: float = 900.0) -> tuple[list[Entry], list[dict]]:
    """Run every framework on every case; return per-framework entries and pairwise gaps."""
    references = [reference.forward(c.spec, c.tensors, c.images) for c in cases]
    by_framework: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="portbench-verify-") as tmp:
        for framework in frameworks:
            if framework == "reference":
                continue
            reason = installed().get(framework)
            if reason:
                by_framework[framework] = [{"error": reason} for _ in cases]
                continue
            print(f"  running {framework} ...", file=sys.stderr, flush=True)
            by_framework[framework] = run_worker(framework, cases, Path(tmp), device, timeout)
    entries: list[Entry] = []
    pairwise: list[dict] = []
    for i, (case, ref) in enumerate(zip(cases, references, strict=True)):
        tol = logit_atol(case.spec, ref)
        case_entries = []
        for framework, reports in by_framework.items():
            report = reports[i]
            entry = Entry(case.spec.name, case.spec.spec_hash, framework, tolerance=tol,
                          expected_params=case.spec.derived.params)
            if "error" in report:
                entry.error = report["error"]
            else:
                entry.device, entry.param_count = report["device"], report["param_count"]
                entry.versions, entry.logits = report["versions"], report["logits"]
                if entry.logits.shape != ref.shape:
                    entry.error = f"logits shape {entry.logits.shape}, expected {ref.shape}"
                else:
                    entry.max_abs_diff = max_abs_diff(entry.logits, ref)
                    entry.max_rel_diff = max_rel_diff(entry.logits, ref)
                    params_ok = entry.param_count == entry.expected_params
                    entry.passed = entry.max_abs_diff <= tol and params_ok
                    if not params_ok:
                        entry.error = f"{entry.param_count:,} parameters, spec says {entry.expected_params:,}"
            case_entries.append(entry)
        ok = [e for e in case_entries if e.logits is not None and e.logits.shape == ref.shape]
        for a, b in itertools.combinations(ok, 2):
            gap = max_abs_diff(a.logits, b.logits)
            pairwise.append({"spec": case.spec.name, "a": a.framework, "b": b.framework,
                             "max_abs_diff": gap, "passed": gap <= 2 * tol})
        entries.extend(case_entries)
    return entries, pairwise


def print_report(cases: list[Case], entries: list[Entry], pairwise: list[dict]) -> None:
    for case in cases:
        rows = []
        mine = [e for e in entries if e.spec == case.spec.name]
        tol = mine[0].tolerance if mine else logit_atol(case.spec)
        print(f"\nspec {case.spec.name!r} ({case.spec.spec_hash}): {case.spec.derived.params:,} parameters, "
              f"probe batch {case.images.shape[0]}, tolerance {tol:.1e} (max abs vs float64 reference)")
        print_note(case.note)
        for e in mine:
            status = "PASS" if e.passed else "FAIL"
            rows.append([e.framework, e.device or "-", f"{e.param_count:,}" if e.param_count else "-",
                         f"{e.max_abs_diff:.2e}" if e.max_abs_diff is not None else "-",
                         f"{e.max_rel_diff:.2e}" if e.max_rel_diff is not None else "-",
                         status + (f": {e.error}" if e.error else "")])
        print(format_table(["framework", "device", "params", "max abs", "max rel", "status"], rows))
        pairs = [p for p in pairwise if p["spec"] == case.spec.name]
        if pairs:
            gaps = ", ".join(f"{p['a']}~{p['b']} {p['max_abs_diff']:.1e}" for p in pairs)
            print(f"pairwise max abs: {gaps}")


def write_json(path: str, entries: list[Entry], pairwise: list[dict]) -> None:
    def clean(e: Entry) -> dict:
        data = asdict(e)
        data.pop("logits")
        return data

    document = {"schema": SCHEMA, "entries": [clean(e) for e in entries], "pairwise": pairwise}
    atomic_write_bytes(path, (json.dumps(document, indent=2) + "\n").encode())


def run_cases(cases: list[Case], frameworks: list[str], device: str, timeout: float,
              json_path: str | None) -> int:
    entries, pairwise = verify(cases, frameworks, device, timeout)
    print_report(cases, entries, pairwise)
    if json_path:
        write_json(json_path, entries, pairwise)
    failed = [e for e in entries if not e.passed] + [p for p in pairwise if not p["passed"]]
    total = len(entries) + len(pairwise)
    print(f"\n{total - len(failed)} passed, {len(failed)} failed")
    return 1 if failed or not entries else 0


def run(args: argparse.Namespace) -> int:
    frameworks = parse_frameworks(args.frameworks, tuple(default_frameworks()))
    if args.frameworks:
        for name in frameworks:
            reason = installed().get(name) if name != "reference" else None
            if reason:
                raise FrameworkUnavailable(reason)
    if args.all_presets:
        specs = [get_preset(name) for name in PRESETS]
        cases = [Case(s, init_weights(s, args.seed), probe_batch(s, args.batch)) for s in specs]
    else:
        model = resolve_model(args)
        cases = [Case(model.spec, model.tensors, probe_batch(model.spec, args.batch), model.note)]
    return run_cases(cases, frameworks, args.device, args.timeout, args.json)


def main_verify() -> int:
    """The default job's verification: the default spec, seeded weights, every installed port."""
    spec = get_preset(DEFAULT_PRESET)
    case = Case(spec, init_weights(spec, 0), probe_batch(spec))
    return run_cases([case], default_frameworks(), "cpu", 900.0, None)
