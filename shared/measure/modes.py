"""Each machine chooses each port's fastest legitimate mode by measurement, in the timing worker.

A port offers named ways of running the same function (`run_modes` in ports/<fw>/port.py: the
attention path in torch, Flax and MLX, XLA or not for Keras on TensorFlow; its default first).
Before the gate and the timed phases (shared/measure/phases.py), `choose`:
1. keeps the only mode of a port that has one (ONNX, a user's model and Keras on JAX or torch
   offer no choice);
2. else uses the mode `--mode` forced;
3. else reuses the choice cached for this machine, these library versions and this spec shape
   (`cache_key`), unless `--remeasure-modes`;
4. else measures every candidate briefly (MEASURE_BUDGET) on the forward the run times (the
   compiled one when it is timed, else eager): its first call (compiling it), the equivalence
   gate on that call's logits (`gate.judge`, the one verdict; a candidate that fails is recorded
   as failed and never chosen) and then repeats; the fastest median that passed is chosen and
   cached.
Every candidate's time and verdict and the choice go to the row's `mode_choice`
(docs/results-schema.md); the port then runs the chosen mode for every phase.

The cache, `$XDG_CACHE_HOME/portbench/modes.json` (as the compile caches: ~/.cache/portbench),
is written atomically through shared/core/files.py and read defensively: a file that is not the
expected JSON is ignored with a note on the row, never a traceback.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from shared.core.documents import decode_json
from shared.core.files import read_text, write_output
from shared.errors import PortbenchError, first_line
from shared.measure import backends, gate
from shared.measure.environment import utc_now
from shared.measure.stats import Budget, repeat, summarise, synced, time_once
from shared.runtime.contract import PortInterface, PortModule
from shared.runtime.launch import print_progress

# A short budget per candidate: about 0.3 s of repeats after one warm-up call, beside its first
# call (a compile when the compiled forward is measured): on the first run only, then cached.
MEASURE_BUDGET = Budget(warmup=1, min_repeats=3, max_repeats=30, seconds=0.3)
CACHE_FORMAT = 1


def cache_path() -> Path:
    """Where the choices are kept: beside the compile caches (shared/measure/runner.py)."""
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "portbench" / "modes.json"


def cache_key(framework: str, row: dict[str, Any], forward: str) -> str:
    """One choice per framework, machine (CPU model or accelerator name), library versions and
    spec shape (spec hash, batch, threads, precision rung, device class) and timed forward."""
    cond = row["conditions"]
    key = {"framework": framework, "machine": cond.get("device_name"), "versions": row.get("versions"),
           "spec_hash": cond.get("spec_hash"), "batch": cond.get("batch"), "threads": cond.get("threads"),
           "precision": cond.get("precision"), "device": cond.get("device_class"), "forward": forward}
    return json.dumps(key, sort_keys=True)


def read_cache(path: Path, notes: list[str]) -> dict[str, Any]:
    """The cached entries by key; {} when there is no file, and {} with a note when it is not a
    cache this version wrote (corrupt, truncated, another format)."""
    if not path.exists():
        return {}
    try:
        doc = decode_json(read_text(path, where := f"mode cache {str(path)!r}"), where, PortbenchError)
        if doc.get("format") != CACHE_FORMAT or not isinstance(doc.get("entries"), dict):
            raise ValueError(f"not a format-{CACHE_FORMAT} mode cache")
        return doc["entries"]
    except (PortbenchError, OSError, ValueError) as exc:
        notes.append(f"mode cache {path} ignored ({' '.join(str(exc).split())[:120]}): modes measured again")
        return {}


def write_cache(path: Path, key: str, entry: dict[str, Any], notes: list[str]) -> None:
    """Add one entry (read again first: another worker may have added its own); a cache that
    cannot be written costs a note, not the run."""
    entries = read_cache(path, [])
    entries[key] = entry
    data = json.dumps({"format": CACHE_FORMAT, "entries": entries}, indent=1, sort_keys=True).encode()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_output(path, data, force=True)
    except (PortbenchError, OSError) as exc:
        notes.append(f"mode cache {path} not written ({' '.join(str(exc).split())[:120]})")


def cached_choice(entry: Any, offered: tuple[str, ...]) -> dict[str, Any] | None:
    """The record's fields from a cache entry (the mode, the candidates as they were measured and
    when), or None when it is unusable or names a mode the port no longer offers."""
    if not isinstance(entry, dict) or entry.get("mode") not in offered:
        return None
    candidates = entry.get("candidates")
    return {"chosen": entry["mode"], "candidates": candidates if isinstance(candidates, list) else [],
            "measured": str(entry.get("measured") or "")}


def fastest(candidates: list[dict[str, Any]]) -> str | None:
    """The candidate with the lowest median among those that passed the gate; None if none did."""
    passed = [c for c in candidates if c.get("status") == "ok" and c.get("median") is not None]
    return min(passed, key=lambda c: c["median"])["mode"] if passed else None


def forced_mode(framework: str, offered: tuple[str, ...], forced: list[str], notes: list[str]) -> str | None:
    """`--mode`'s choice for this port: FRAMEWORK=NAME (a name it does not offer is the user's
    mistake) or a bare NAME, for every port that offers it (a note where one does not)."""
    for item in forced:
        name, _, mode = item.rpartition("=")
        if name == framework:
            if mode not in offered:
                raise PortbenchError(f"--mode {item}: {framework} has no mode {mode!r}; expected one of: "
                                     f"{', '.join(offered)}")
            return mode
    for item in forced:
        if "=" not in item:
            if item in offered:
                return item
            notes.append(f"--mode {item}: not one of {framework}'s modes ({', '.join(offered)}); measured")
    return None


def measure(port: PortInterface, prepared: Any, mode: str, forward: str, config: dict[str, Any],
            row: dict[str, Any]) -> dict[str, Any]:
    """One candidate: its first call, the gate on that call's logits, then MEASURE_BUDGET."""
    record: dict[str, Any] = {"mode": mode}
    try:
        port.set_mode(mode)
        call = port.compiled_forward() if forward == "compiled" else \
            (lambda p: port.forward(p, train=False))
        timed = synced(port, lambda: call(prepared))
        record["first_call_s"], out = time_once(timed)
        gated = np.asarray(port.to_numpy(out))[:gate.gate_rows(port.spec)]
        verdict = gate.judge(row, port.spec, gated, config)
        record["gate"] = verdict.to_dict()
        if not verdict.passed:
            return {**record, "status": "failed", "reason": f"equivalence gate: {verdict.reason}"}
        samples = repeat(timed, MEASURE_BUDGET)
    except Exception as exc:  # a mode that cannot run here is a failed candidate, not a failed row
        return {**record, "status": "failed",
                "reason": first_line(exc, typed=True)[:200]}
    stats = summarise(samples)
    return {**record, "status": "ok", "median": stats["median"], "iqr": stats["iqr"], "n": stats["n"]}


def choose(framework: str, module: PortModule, port: PortInterface, prepared: Any, config: dict[str, Any],
           row: dict[str, Any]) -> None:
    """Choose the port's mode (see the module's docstring), set it, and record `row["mode_choice"]`."""
    run_modes = getattr(module, "run_modes", None)
    offered = tuple(run_modes(port.spec, row["conditions"]["device_class"])) \
        if run_modes and not config.get("user") else ()
    forward = "compiled" if "compiled" in config["modes"] else "eager"
    options = config.get("mode_options") or {}
    record: dict[str, Any] = {"forward": forward, "offered": list(offered), "candidates": [], "notes": []}
    row["mode_choice"] = record
    notes = record["notes"]
    if len(offered) <= 1:
        record.update(chosen=offered[0] if offered else None, source="only")
        return
    try:
        chosen = forced_mode(framework, offered, list(options.get("force") or []), notes)
    except PortbenchError as exc:  # the user's mistake: the parent says it in one line
        row["user_error"] = str(exc)
        raise
    if chosen is not None:
        record.update(chosen=chosen, source="forced")
    else:
        path, key = cache_path(), cache_key(framework, row, forward)
        hit = None if options.get("remeasure") else cached_choice(read_cache(path, notes).get(key), offered)
        if hit is not None:
            record.update(hit, source="cached")
        else:
            record.update(source="measured", budget=asdict(MEASURE_BUDGET))
            for mode in offered:
                print_progress(framework, f"measuring mode {mode} ({forward} forward)")
                record["candidates"].append(measure(port, prepared, mode, forward, config, row))
            best = fastest(record["candidates"])
            record["chosen"] = best if best is not None else offered[0]
            # the chosen mode was compiled once already in this worker: its compile phase may be
            # a warm in-process cache, not a cold compile
            record["compile_after_measurement"] = forward == "compiled"
            if best is None:
                notes.append(f"no mode passed the equivalence gate; the default {offered[0]} runs (and is "
                             "gated again)")
            else:
                write_cache(path, key, {"mode": best, "candidates": record["candidates"],
                                        "measured": utc_now()}, notes)
    port.set_mode(record["chosen"])
    print_progress(framework, f"mode: {record['chosen']} ({record['source']})")


def choose_for(framework: str, module: PortModule, port: PortInterface, prepared: Any, forward: str,
               batch: int, threads: int, reference_npz: str) -> tuple[dict[str, Any], Callable[[Any], Any]]:
    """`choose` for a port that another command times (`peers`): the same row fields the timing
    worker keys its cache by, so both commands share one choice per machine and spec shape, and
    the same gate on each candidate (the parent's reference for the same weights and images).
    Returns the record `choose` made and the forward to time, gated here whatever chose its mode
    (a cached or forced choice, or the default after every candidate failed, was not): a port that
    computes another function is never timed against a peer."""
    device = port.device_class
    row: dict[str, Any] = {
        "framework": framework, "param_count": port.param_count(), "notes": [],
        "versions": backends.versions(module),
        "conditions": {"device_class": device, "device_name": backends.device_name(module, device),
                       "spec_hash": port.spec.spec_hash, "batch": batch, "threads": threads,
                       "precision": port.precision.rung}}
    config = {"modes": [forward], "mode_options": {}, "reference_npz": reference_npz,
              "precision": port.precision.to_dict()}
    choose(framework, module, port, prepared, config, row)
    call = port.compiled_forward() if forward == "compiled" else (lambda p: port.forward(p, train=False))
    logits = np.asarray(port.to_numpy(call(prepared)))[:gate.gate_rows(port.spec)]
    verdict = gate.judge(row, port.spec, logits, config)
    if not verdict.passed:
        raise PortbenchError(f"the {framework} port's {row['mode_choice'].get('chosen') or forward} forward "
                             f"failed the equivalence gate ({verdict.reason}): not timed against its peers")
    return row["mode_choice"], call


def first_compile(row: dict[str, Any], seconds: float) -> float:
    """The compile time to report: after a measurement on the compiled forward, the chosen
    candidate's first call (its compile, made before the compile phase, which then finds the
    framework's in-process cache warm); otherwise the compile phase's own `seconds`."""
    record = row.get("mode_choice") or {}
    if record.get("source") != "measured" or record.get("forward") != "compiled":
        return seconds
    chosen = next((c for c in record.get("candidates", []) if c.get("mode") == record.get("chosen")
                   and c.get("status") == "ok"), None)
    return float(chosen["first_call_s"]) if chosen else seconds
