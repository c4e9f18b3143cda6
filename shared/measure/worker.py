"""One framework's timing run, in its own fresh process:

    python -m shared.measure.worker --config CONFIG.json --out ROW.json

Order matters and is the point of this module:
1. Before anything heavy is imported (NumPy included: OpenBLAS reads its thread variable at load),
   the thread environment variables are set and the process is pinned to N CPUs. Affinity is the
   only cap JAX's CPU runtime obeys (performance.md: XLA_FLAGS left jaxlib 0.10.2 on both cores).
2. The port's registry `env` (e.g. KERAS_BACKEND) is applied, then the framework is imported
   (timed: this is the import phase), precision is pinned and threads are set and read back.
3. The equivalence gate: eager (and compiled) logits vs the float64 reference for the same
   canonical weights. A failing port is INVALID and is not timed further.
4. The phases, each synchronised with the framework's own mechanism (`port.sync`, or reading the
   result back to NumPy).

Test hook (only for tests/test_timing_*.py): PORTBENCH_TEST_FAULT="<framework>:<kind>" with kind
`crash` (SIGSEGV before the framework import), `hang` (sleep forever), `tamper` (load a
head bias that differs from the reference's by 1e-3) or `error` (raise inside a phase).
"""

from __future__ import annotations

# Only the standard library above the thread setup: see point 1.
import argparse
import json
import os
import sys
import time
import traceback
from typing import Any

FAULT_ENV = "PORTBENCH_TEST_FAULT"
PROGRESS_PREFIX = "portbench-progress:"


# ---- 1. threads, before any numerical library is loaded ------------------------------------
def thread_env(threads: int) -> dict[str, str]:
    """Every library's own thread variable, set to N. XLA's flags only mean something for one
    thread (there is no 'N threads' flag); they are set for completeness and recorded."""
    env = {
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
        "OPENBLAS_NUM_THREADS": str(threads),
        "TF_NUM_INTRAOP_THREADS": str(threads),
        "TF_NUM_INTEROP_THREADS": str(threads),
    }
    if threads == 1:
        existing = os.environ.get("XLA_FLAGS", "")
        single = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
        env["XLA_FLAGS"] = f"{existing} {single}".strip() if single not in existing else existing
    return env


def pin_cpus(threads: int) -> dict[str, Any]:
    """Restrict this process to the first N usable CPUs (the cap JAX honours); record the mask."""
    if not hasattr(os, "sched_setaffinity"):
        return {"affinity": None, "affinity_note": "no CPU affinity API on this OS; not pinned"}
    usable = sorted(os.sched_getaffinity(0))
    chosen = usable[: max(1, threads)]
    os.sched_setaffinity(0, chosen)
    note = None
    if threads > len(usable):
        note = f"{threads} threads requested but only {len(usable)} CPUs usable: oversubscribed"
    return {"affinity": sorted(os.sched_getaffinity(0)), "affinity_note": note}


def progress(framework: str, message: str) -> None:
    print(f"{PROGRESS_PREFIX} {framework}: {message}", file=sys.stderr, flush=True)


def fault_for(framework: str) -> str | None:
    value = os.environ.get(FAULT_ENV, "")
    for item in value.split(","):
        name, _, kind = item.partition(":")
        if name.strip() == framework and kind:
            return kind.strip()
    return None


# ---- the run --------------------------------------------------------------------------------
def run(config: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    """Fill `row` in place, so a failure part-way keeps the phases measured so far."""
    framework = config["framework"]
    threads = int(config["threads"])
    os.environ.update(thread_env(threads))
    pinning = pin_cpus(threads)
    fault = fault_for(framework)

    import numpy as np

    from ports import PORTS, load_port_module
    from shared.core.inputs import probe_batch
    from shared.core.spec import ModelSpec
    from shared.core.weights import init_weights
    from shared.errors import PortbenchError
    from shared.measure import backends, gate
    from shared.measure.contention import CONTENDED, ForeignCpu
    from shared.measure.environment import recorded_env
    from shared.measure.stats import Budget, repeat, summarise, time_once

    spec = ModelSpec.from_dict(config["spec"])
    batch = int(config["batch"])
    budget = Budget(**config["budget"])
    modes = list(config["modes"])
    row.update({
        "framework": framework,
        "status": "ok",
        "reason": None,
        "conditions": {
            "spec_name": spec.name, "spec_hash": spec.spec_hash, "batch": batch, "dtype": "float32",
            "threads": threads, "device_request": config["device"], "device_class": None,
            "device_name": None, "seed": config["seed"], "weights_seed": config["weights_seed"],
            "input_shape": [batch, spec.image_height, spec.image_width, spec.channels],
            "modes": modes,
        },
        "threads_applied": {"requested": threads, **pinning},
        "phases": {},
        "equivalence": {},
        "memory": {},
        "versions": {},
        "precision": {},
        "env": {},
        "notes": [],
    })
    phases = row["phases"]

    def single(name: str, seconds: float, note: str | None = None) -> None:
        phases[name] = {"status": "ok", "samples": [seconds], **summarise([seconds]), "note": note}

    def repeated(name: str, call: Any, phase_budget: Budget = budget, note: str | None = None) -> None:
        progress(framework, f"timing {name}")
        cpu0, wall0 = time.process_time(), time.perf_counter()
        with ForeignCpu(pinning["affinity"]) as foreign:
            samples = repeat(call, phase_budget)
        wall = time.perf_counter() - wall0
        util = (time.process_time() - cpu0) / wall if wall > 0 else None
        phases[name] = {"status": "ok", "samples": samples, **summarise(samples),
                        "cpu_util": util, "foreign_cpu": foreign.value, "note": note}
        if foreign.value is not None and foreign.value > CONTENDED:
            row["notes"].append(f"{name}: other processes used {foreign.value:.2f} CPUs on this "
                                "worker's CPUs while it was timed (contended)")

    def unavailable(name: str, reason: str) -> None:
        phases[name] = {"status": "n/a", "reason": reason}

    # ---- 2. import, precision, threads, device -------------------------------------------------
    entry = PORTS[framework]
    os.environ.update(entry.env)  # e.g. KERAS_BACKEND: must hold before the framework is imported
    row["env"] = recorded_env()
    if fault == "crash":  # before the framework import, so the tests stay fast
        import signal

        os.kill(os.getpid(), signal.SIGSEGV)
    if fault == "hang":
        time.sleep(10**6)
    progress(framework, "importing")
    import_seconds, module = time_once(lambda: load_port_module(framework))
    single("import", import_seconds, "one cold import in a fresh process")
    row["precision"] = module.pin_precision(allow_tf32=bool(config.get("allow_tf32", False)))
    row["threads_applied"]["framework"] = module.set_threads(threads)
    row["versions"] = {"numpy": np.__version__, **module.version_info()}
    backend = backends.backend_of(framework, entry.env)
    row["backend"] = backend
    available = list(module.available_devices())
    device = config["device"]
    if device == "auto":
        device = available[0]
    elif device not in available:
        row["status"] = "unavailable"
        row["user_error"] = (f"device {device!r} is not present for framework {framework!r} "
                             f"(available: {', '.join(available)})")
        row["reason"] = row["user_error"]
        return row
    row["conditions"]["device_class"] = device
    row["conditions"]["device_name"] = backends.device_name(backend, device)
    row["memory"]["rss_after_import_bytes"] = backends.current_rss()

    # ---- build + weight load -------------------------------------------------------------------
    tensors = init_weights(spec, seed=int(config["weights_seed"]))
    loaded = tensors
    if fault == "tamper":  # a port whose weights silently differ from the reference's
        name = "head.out.bias"  # shifts every logit by exactly 1e-3 (a key bias would cancel)
        loaded = dict(tensors)
        loaded[name] = (tensors[name] + np.float32(1e-3)).astype(np.float32)
    progress(framework, "building and loading weights")

    def build() -> Any:
        port = module.Port(spec, device=device)
        port.load(loaded)
        port.sync()
        return port

    build_seconds, port = time_once(build)
    single("build_load", build_seconds, "construct the model, then load canonical weights")
    row["param_count"] = int(port.param_count())
    row["param_count_spec"] = int(spec.derived.params)

    images = probe_batch(spec, batch=batch, seed=int(config["seed"]))
    prepared = port.prepare(images)
    port.sync(prepared)

    # ---- 3. first eager call, which doubles as the gate's eager check -------------------------
    progress(framework, "first eager call")
    first_seconds, first_out = time_once(lambda: _synced(port, port.forward(prepared, train=False)))
    single("first_call_eager", first_seconds, "includes lazy initialisation of kernels")
    reference = gate.reference_logits(config["reference_npz"])
    gate_rows = reference.shape[0]
    eager_check = gate.compare(port.to_numpy(first_out)[:gate_rows], reference, spec)
    row["equivalence"]["eager"] = eager_check

    compiled = None
    if "compiled" in modes:
        try:
            compiled = port.compiled_forward()
        except (NotImplementedError, PortbenchError) as exc:
            unavailable("compile", f"no compiled mode: {exc}")
            unavailable("forward_compiled", f"no compiled mode: {exc}")
        if compiled is not None:
            progress(framework, "compiling")
            try:
                compile_seconds, compiled_out = time_once(lambda: _synced(port, compiled(prepared)))
            except Exception as exc:  # a compiler failure costs the compiled mode, not the row
                reason = f"compile failed: {type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"
                unavailable("compile", reason)
                unavailable("forward_compiled", reason)
                row["notes"].append(reason)
                compiled = None
            else:
                single("compile", compile_seconds, backends.compile_note(backend))
                row["equivalence"]["compiled"] = gate.compare(
                    port.to_numpy(compiled_out)[:gate_rows], reference, spec)
    else:
        unavailable("compile", "compiled mode not requested (--modes)")
        unavailable("forward_compiled", "compiled mode not requested (--modes)")

    failed = [mode for mode, check in row["equivalence"].items() if not check["passed"]]
    if failed:
        worst = max(row["equivalence"][m]["max_abs_err"] for m in failed)
        row["status"] = "invalid"
        row["reason"] = (f"equivalence gate failed in {', '.join(failed)} mode: max |logit - reference| "
                         f"{worst:.3g} > tolerance {eager_check['atol']:.1g}")
        row["memory"].update(backends.memory(backend, device))
        return row

    if fault == "error":
        raise RuntimeError("injected failure inside a phase (PORTBENCH_TEST_FAULT)")

    # ---- 4. repeated phases ----------------------------------------------------------------------
    repeated("prepare", lambda: _synced(port, port.prepare(images)))
    if "eager" in modes:
        repeated("forward_eager", lambda: _synced(port, port.forward(prepared, train=False)))
    else:
        unavailable("forward_eager", "eager mode not requested (--modes)")
    if compiled is not None:
        repeated("forward_compiled", lambda: _synced(port, compiled(prepared)))

    eval_batches = [probe_batch(spec, batch=batch, seed=int(config["seed"]) + 1 + k)
                    for k in range(int(config["eval_batches"]))]
    eval_forward = compiled if compiled is not None else (lambda p: port.forward(p, train=False))
    eval_mode = "compiled" if compiled is not None else "eager"

    def eval_pass() -> int:
        correct = 0
        for b in eval_batches:  # prepare + forward + read back: what an evaluation loop does
            correct += int(port.to_numpy(eval_forward(port.prepare(b))).argmax(-1).sum() >= 0)
        return correct

    pass_budget = Budget(warmup=1, min_repeats=3, max_repeats=budget.max_repeats,
                         seconds=budget.seconds)
    repeated("eval_pass", eval_pass, pass_budget,
             note=f"{len(eval_batches)} batches of {batch}, {eval_mode} forward, per pass")

    # ---- training update (last: it changes the weights) -----------------------------------------
    _train_phase(row, port, entry, images, config, budget, repeated, unavailable, framework)
    row["memory"].update(backends.memory(backend, device))
    return row


def _synced(port: Any, result: Any) -> Any:
    port.sync(result)
    return result


def _train_phase(row: dict[str, Any], port: Any, entry: Any, images: Any, config: dict[str, Any],
                 budget: Any, repeated: Any, unavailable: Any, framework: str) -> None:
    import importlib

    import numpy as np

    from shared.measure.stats import time_once

    if not config.get("train", True):
        unavailable("train_step", "training phase not requested (--modes)")
        return
    try:
        trainer_module = importlib.import_module(entry.module + ".train")
        train_spec = importlib.import_module("shared.training.train_spec")
    except ImportError as exc:
        unavailable("train_step", f"train step not available ({exc})")
        return
    from shared.errors import FrameworkUnavailable

    recipe = train_spec.get_recipe(config.get("train_recipe", "archive"))
    try:
        trainer = trainer_module.Trainer(port, recipe)
    except FrameworkUnavailable as exc:  # e.g. the Keras trainer on a non-TensorFlow backend
        unavailable("train_step", f"train step not available ({exc})")
        return
    labels = np.random.default_rng(int(config["seed"])).integers(
        0, port.spec.num_classes, size=images.shape[0])
    batch = trainer.prepare_batch(images, labels)
    progress(framework, "first training update")
    first, _ = time_once(lambda: trainer.loss_value(trainer.step(batch)))
    mode = "compiled" if getattr(trainer, "compiled", False) else "eager"
    repeated("train_step", lambda: trainer.loss_value(trainer.step(batch)),
             note=f"{mode} step, recipe {config.get('train_recipe', 'archive')!r}; "
                  f"first step {first:.3f}s")
    row["phases"]["train_step"]["first_step_seconds"] = first
    row["phases"]["train_step"]["compiled"] = bool(getattr(trainer, "compiled", False))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shared.measure.worker")
    parser.add_argument("--config", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    with open(args.config) as handle:
        config = json.load(handle)
    row: dict[str, Any] = {"framework": config.get("framework"), "status": "ok"}
    try:
        run(config, row)
    except Exception as exc:  # one framework's failure is reported, never fatal to the others
        first_line = str(exc).splitlines()[0] if str(exc) else ""
        row.update({"status": "crashed", "reason": f"{type(exc).__name__}: {first_line}",
                    "traceback": traceback.format_exc(limit=8)})
    with open(args.out + ".tmp", "w") as handle:
        json.dump(row, handle, default=_jsonable)
    os.replace(args.out + ".tmp", args.out)
    return 0


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, (set, tuple)):
        return list(value)
    return str(value)


if __name__ == "__main__":
    sys.exit(main())
