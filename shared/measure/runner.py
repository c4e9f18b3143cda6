"""Parent side of `compare.py time`: one fresh worker process per framework (the one launcher's,
running the `timing` job kind of shared/measure/phases.py), one after the other (never
concurrently: two timed processes on shared cores would slow each other), each with a timeout
that kills its whole process group. A crash, a hang or a bad device in one worker is recorded in
its row; the others run."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from shared.core.precision import FLOAT32, Precision
from shared.core.spec import ModelSpec
from shared.measure import backends, gate, roofline, rounds
from shared.measure.jobs import TIMING
from shared.measure.stats import Budget, summarise
from shared.measure.timing_row import Round
from shared.runtime.launch import run_worker

Progress = Callable[[str], None]


@dataclass
class RunConfig:
    """Everything that must be the same for every framework in one comparison."""

    spec: ModelSpec
    batch: int = 8
    threads: int = 1
    device: str = "auto"
    modes: tuple[str, ...] = ("eager", "compiled")
    train: bool = True
    budget: Budget = field(default_factory=Budget)
    eval_batches: int = 3
    seed: int = 1234
    weights_seed: int = 0
    timeout_s: float = 600.0
    train_recipe: str = "archive"
    processes: int = 1  # rounds: fresh-process replicates per framework, interleaved (a b c a b c)
    compile_cache: str = "cold"  # cold: fresh inductor cache per worker; warm: reuse one on disk
    precision: Precision = FLOAT32  # the rung every port computes at (TF32 only if asked, CUDA only)
    user: dict[str, Any] | None = None  # `time --model`: the user's model, one more row
    mode_options: dict[str, Any] | None = None  # `--mode`, `--remeasure-modes` (shared/measure/modes.py)

    def worker_config(self, framework: str, reference_npz: str) -> dict[str, Any]:
        return {
            "framework": framework, "spec": self.spec.to_dict(), "batch": self.batch,
            "threads": self.threads, "device": self.device, "modes": list(self.modes),
            "train": self.train, "budget": asdict(self.budget), "eval_batches": self.eval_batches,
            "seed": self.seed, "weights_seed": self.weights_seed, "reference_npz": reference_npz,
            "train_recipe": self.train_recipe, "precision": self.precision.to_dict(), "user": self.user,
            "mode_options": self.mode_options,
        }

    def conditions(self) -> dict[str, Any]:
        s = self.spec
        return {
            "spec_name": s.name, "spec_hash": s.spec_hash, "spec": s.to_dict(), "batch": self.batch,
            "dtype": self.precision.dtype, "precision": self.precision.rung, "threads": self.threads,
            "device_request": self.device,
            "modes": list(self.modes), "train": self.train, "budget": asdict(self.budget),
            "eval_batches": self.eval_batches, "seed": self.seed, "weights_seed": self.weights_seed,
            "input_shape": [self.batch, s.image_height, s.image_width, s.channels],
            "timeout_s": self.timeout_s, "compile_cache": self.compile_cache,
            "processes": self.processes, "allow_tf32": self.precision.tf32,
            "gate_tolerance": gate.tolerance_rule(s, self.precision),
        }


CACHE_ROOT = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "portbench"
WARM_CACHE_DIR = CACHE_ROOT / "inductor"
WARM_JAX_CACHE_DIR = CACHE_ROOT / "jax"
CACHED_BACKENDS = {"torch": WARM_CACHE_DIR, "jax": WARM_JAX_CACHE_DIR}  # compilers with a disk cache


def compile_cache_env(workdir: str, compile_cache: str = "cold") -> dict[str, str]:
    """cold: a private inductor cache and no JAX cache, so compile time is a real compilation,
    not a previous run's cache hit. warm: one inductor cache and one JAX persistent compilation
    cache (every compilation, however short) reused across runs (recorded in the results)."""
    if compile_cache == "cold":
        return {"TORCHINDUCTOR_CACHE_DIR": os.path.join(workdir, "inductor-cache")}
    return {"TORCHINDUCTOR_CACHE_DIR": str(WARM_CACHE_DIR),
            "JAX_COMPILATION_CACHE_DIR": str(WARM_JAX_CACHE_DIR),
            "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}


def cache_entries(compile_cache: str) -> dict[str, int]:
    """Files in each shared compile cache (none for a cold run, whose caches are private)."""
    if compile_cache != "warm":
        return {}
    return {backend: sum(len(files) for _, _, files in os.walk(folder)) if folder.is_dir() else 0
            for backend, folder in CACHED_BACKENDS.items()}


def compile_cache_state(row: dict[str, Any], compile_cache: str, before: dict[str, int],
                        after: dict[str, int]) -> None:
    """Mark the compile phase cold or warm. Inductor (torch.compile, also under Keras' torch
    backend) and JAX (jax.jit, also Keras on JAX) keep a cache across processes with
    `--compile-cache warm`; it was warm when the shared cache already had entries and this worker
    added none (a miss writes the compiled graph): the cache held everything the worker compiled.
    TensorFlow's graphs are always cold."""
    phase = row.get("phases", {}).get("compile")
    if not phase or phase.get("status") != "ok":
        return
    backend = row.get("backend") or ""
    warm = before.get(backend, 0) > 0 and after.get(backend) == before.get(backend)
    phase["cache"] = "warm" if warm else "cold"
    if backend in CACHED_BACKENDS:
        phase["note"] = backends.compile_note(backend, phase["cache"])


def run_framework(framework: str, config: RunConfig, reference_npz: str,
                  progress: Progress = print, arrays: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run one timing worker and return its row; never raises for the worker's own failures.
    `arrays` receives the worker's arrays (the gated logits)."""
    before = cache_entries(config.compile_cache)
    with tempfile.TemporaryDirectory(prefix=f"portbench-{framework}-") as workdir:
        job = TIMING.job(**config.worker_config(framework, reference_npz))
        result = run_worker(framework, {"timing": job}, workdir, config.timeout_s,
                            threads=config.threads, pin=True, progress=progress,
                            env=compile_cache_env(workdir, config.compile_cache))
    finished, tail = result.process, result.process.tail
    row = result.reports.get("timing")
    if arrays is not None:
        arrays.update(result.arrays.get("timing", {}))
    if row is not None:
        compile_cache_state(row, config.compile_cache, before, cache_entries(config.compile_cache))
    if finished.timed_out:  # a phase with its own limit (a user model's import or build) says so
        reason = finished.error if finished.phase else \
            f"no result within --timeout {config.timeout_s:g}s; worker killed"
        return _failed_row(framework, config, "timeout", reason, tail)
    if row is None:
        return _failed_row(framework, config, "crashed", f"worker {finished.exit} before reporting", tail)
    row["worker_wall_seconds"] = finished.wall_s
    error = row.pop("error", None)
    if error:  # a rung or backend this framework does not offer is unavailable, as `verify` says
        status = "unavailable" if row.pop("error_kind", None) == "FrameworkUnavailable" else "crashed"
        row = _failed_row(framework, config, status, error, tail, row)
    return row


def _failed_row(framework: str, config: RunConfig, status: str, reason: str, tail: list[str],
                partial: dict[str, Any] | None = None) -> dict[str, Any]:
    """A row for a worker that did not finish: keeps whatever it measured, states why."""
    row = dict(partial or {})
    conditions = dict(row.get("conditions") or {})
    stated = config.conditions()
    for key in ("spec_name", "spec_hash", "batch", "dtype", "precision", "threads", "device_request"):
        conditions.setdefault(key, stated[key])
    conditions.setdefault("device_class", None)
    conditions.setdefault("device_name", None)
    row.update({"framework": framework, "status": status, "reason": reason,
                "conditions": conditions, "stderr_tail": tail[-8:]})
    row.setdefault("phases", {})
    row.setdefault("memory", {})
    return row


SETTLED = ("unavailable", "invalid")  # a worker's verdict that the same process would repeat


def run_all(frameworks: list[str], config: RunConfig, progress: Progress = print,
            on_row: Callable[[dict[str, Any]], None] | None = None,
            logits: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every framework in turn, with the same spec, weights, batch, threads and budget. With
    `config.processes` > 1 the frameworks are interleaved (a b c a b c ...), so slow drift in the
    machine's load hits each of them alike, and each framework's replicates become one row.
    `logits` receives framework -> the eager logits its equivalence gate checked, and
    "reference" -> the float64 reference's. The user's model (`time --model`) is one more row,
    "yours", in a worker of its framework's entry."""
    entries = {f: f for f in frameworks} | ({"yours": config.user["entry"]} if config.user else {})
    replicates: dict[str, list[dict[str, Any]]] = {f: [] for f in entries}
    with tempfile.TemporaryDirectory(prefix="portbench-ref-") as refdir:
        reference_npz = os.path.join(refdir, "reference.npz")
        progress(f"reference logits (float64 NumPy) for {config.spec.name}")
        ref = gate.write_reference(reference_npz, config.spec, config.batch, config.seed,
                                   config.weights_seed, config.precision)
        if logits is not None:
            logits["reference"] = ref
        for rep in range(config.processes):
            for i, (name, framework) in enumerate(entries.items(), 1):
                if replicates[name] and replicates[name][-1].get("status") in SETTLED:
                    continue  # another round cannot change a refusal or a failed gate
                suffix = f" (round {rep + 1}/{config.processes})" if config.processes > 1 else ""
                progress(f"[{i}/{len(entries)}] {name}: fresh worker process{suffix}")
                arrays: dict[str, Any] = {}
                row = run_framework(framework, config if name == "yours" else replace(config, user=None),
                                    reference_npz, progress, arrays)
                if logits is not None and "eager_logits" in arrays:
                    logits.setdefault(name, arrays["eager_logits"])
                replicates[name].append(row)
                if on_row:
                    on_row(row)
    return [combine(replicates[f]) for f in entries]


def round_record(number: int, row: dict[str, Any]) -> dict[str, Any]:
    """What one round's worker says about the machine: its status, the foreign CPU over its
    whole timed span and over its GEMM measurement, and the GEMM rate."""
    gemm = (row.get("roofline") or {}).get("gemm") or {}
    return Round(round=number, status=row.get("status"), foreign_cpu=row.get("foreign_cpu"),
                 gemm_gflops=gemm.get("gflops"), gemm_foreign_cpu=gemm.get("foreign_cpu"),
                 worker_wall_seconds=row.get("worker_wall_seconds")).to_dict()


def combine(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One row from a framework's rounds (process replicates): each phase pools every process's
    samples (single-shot phases then have n = processes) and keeps the per-process medians; the
    row is only `ok` when every replicate is. `rounds` records each round's worker, `foreign_cpu`
    the most any round's timed span saw, and the roofline divides by `rounds.ceiling`."""
    spans = [r.get("foreign_cpu") for r in rows if r.get("foreign_cpu") is not None]
    if len(rows) == 1:
        return {**rows[0], "rounds": [round_record(1, rows[0])]}
    bad = [r for r in rows if r.get("status") != "ok"]
    out = dict(bad[0] if bad else rows[0])
    out["replicates"] = len(rows)
    out["rounds"] = [round_record(k, r) for k, r in enumerate(rows, 1)]
    out["foreign_cpu"] = max(spans) if spans else None
    if bad:
        out["reason"] = f"{len(bad)} of {len(rows)} processes: {bad[0].get('reason')}"
        return out
    phases: dict[str, Any] = {}
    for name, first in rows[0]["phases"].items():
        parts = [r["phases"].get(name, {}) for r in rows]
        if first.get("status") != "ok" or any(p.get("status") != "ok" for p in parts):
            phases[name] = first
            continue
        samples = [x for p in parts for x in p["samples"]]
        foreign = [p["foreign_cpu"] for p in parts if p.get("foreign_cpu") is not None]
        phases[name] = {**first, "samples": samples, **summarise(samples),
                        "process_medians": [p["median"] for p in parts],
                        "cpu_util": _median([p.get("cpu_util") for p in parts]),
                        "foreign_cpu": max(foreign) if foreign else None}  # null: no round measured it
        caches = [p.get("cache") for p in parts]
        if len(set(caches)) > 1:  # a first round that filled the warm cache: the pool is neither
            phases[name] |= {"cache": "mixed", "note": f"rounds compiled with a {' then a '.join(caches)} "
                             "cache: their times are pooled, so the median is neither a cold nor a warm one"}
    out["phases"] = phases
    if out.get("roofline"):  # the pooled medians, against the fastest uncontended round's GEMM rate
        record = out["roofline"]
        gemm = rounds.ceiling([(r.get("roofline") or {}).get("gemm") or {} for r in rows])
        out["roofline"] = {**record, "gemm": gemm,
                           "phases": roofline.achieved(record["forward_flops"], phases, gemm)}
    out["memory"] = {k: (max(vals) if (vals := [r["memory"].get(k) for r in rows
                                                 if isinstance(r["memory"].get(k), int)]) else
                         rows[0]["memory"].get(k))
                     for k in rows[0].get("memory", {})}
    # Per mode the worst replicate's verdict: a failing one before any passing one, then the largest error.
    out["equivalence"] = {m: max((r["equivalence"][m] for r in rows if m in r.get("equivalence", {})),
                                 key=lambda c: (not c["passed"], c["max_abs_err"]))
                          for m in rows[0].get("equivalence", {})}
    return out


def _median(values: list[Any]) -> float | None:
    present = sorted(v for v in values if v is not None)
    return present[len(present) // 2] if present else None
