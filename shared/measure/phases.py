"""One framework's timing run: the worker's `timing` job (jobs.py's `TIMING`), in its
own fresh process, started by `shared.measure.runner` through the one launcher.

Order matters and is the point of this module:
1. The launcher set the thread variables and pinned the process to N CPUs before it started
   (NumPy included: OpenBLAS reads its thread variable at load); both are read back here.
2. The framework is imported (timed: this is the import phase) with the registry's environment
   (e.g. KERAS_BACKEND), precision is pinned and threads are set and read back.
   Then the port's mode (shared/measure/modes.py): the only one, forced, cached or measured.
3. The equivalence gate: eager (and compiled) logits vs the float64 reference for the same
   canonical weights and, below float32, every named tensor's dtype vs the precision contract
   (shared/core/equivalence.check_logits, as `verify`). A failing port is INVALID and is not
   timed further.
4. The phases, each synchronised with the framework's own mechanism (`port.sync`, or reading the
   result back to NumPy).
The row is filled in place, so a failure part-way keeps the phases measured so far.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import numpy as np

import ports
from shared.core.batching import patch_counts
from shared.core.inputs import probe_batch
from shared.core.spec import ModelSpec
from shared.core.train_spec import get_recipe
from shared.core.weights import init_weights
from shared.errors import FrameworkUnavailable, PortbenchError, first_line
from shared.measure import backends, gate, modes, roofline
from shared.measure.contention import ForeignCpu
from shared.measure.environment import emulation_note, recorded_env
from shared.measure.phase_record import Phases
from shared.measure.stats import Budget, synced, time_once
from shared.runtime.contract import PortInterface, PortModule
from shared.runtime.devices import DEVICE_CLASSES, device_rows
from shared.runtime.job_kinds import Output
from shared.runtime.jobs import contract_dtypes
from shared.runtime.process_env import cpu_record


def start_row(framework: str, config: dict[str, Any], row: dict[str, Any]) -> ModelSpec:
    spec = ModelSpec.from_dict(config["spec"])
    batch, threads = int(config["batch"]), int(config["threads"])
    row.update({
        "framework": framework, "status": "ok", "reason": None,
        "conditions": {
            "spec_name": spec.name, "spec_hash": spec.spec_hash, "batch": batch,
            "dtype": gate.rung(config).dtype, "precision": gate.rung(config).rung,
            "threads": threads, "device_request": config["device"], "device_class": None,
            "device_name": None, "seed": config["seed"], "weights_seed": config["weights_seed"],
            "input_shape": [batch, spec.image_height, spec.image_width, spec.channels],
            "modes": list(config["modes"]),
        },
        "threads_applied": {"requested": threads, **cpu_record(threads)},
        "phases": {}, "equivalence": {}, "memory": {}, "versions": {}, "precision": {},
        "env": recorded_env(), "notes": [],
    })
    return spec


def import_port(framework: str, config: dict[str, Any], row: dict[str, Any], timer: Phases) -> Any:
    """The import phase, then precision, threads and versions read back from the framework."""
    timer.progress("importing")
    seconds, module = time_once(lambda: ports.load_port_module(framework))
    timer.single("import", seconds, "one cold import in a fresh process")
    row["precision"] = module.pin_precision(allow_tf32=gate.rung(config).tf32)
    row["threads_applied"]["framework"] = module.set_threads(int(config["threads"]))
    row["versions"] = backends.versions(module)
    row["backend"] = backends.backend_of(framework, ports.PORTS[framework].env)
    row["devices"] = device_rows(framework, module, row["backend"] or framework, tried=False)
    return module


def choose_device(framework: str, module: PortModule, config: dict[str, Any],
                  row: dict[str, Any]) -> str | None:
    """The device class to run on, or None (the row says why) when the request is not present."""
    available = list(module.available_devices())
    device = config["device"]
    if device == "auto":
        device = available[0]
    elif device not in available:
        row["status"] = "unavailable"
        row["user_error"] = (f"device {device!r} is not present for framework {framework!r} "
                             f"(available: {', '.join(available)})")
        why = next(r["reason"] for r in row["devices"] if r["device"] == device) if device in \
            DEVICE_CLASSES else None
        row["reason"] = f"{row['user_error']}: {framework}: {why}" if why else row["user_error"]
        return None
    row["conditions"]["device_class"] = device
    row["conditions"]["device_name"] = backends.device_name(module, device)
    note = emulation_note(gate.rung(config).dtype) if device == "cpu" else None
    if note:
        row["notes"].append(note)
    row["memory"]["rss_after_import_bytes"] = backends.current_rss()
    return device


def build_port(module: PortModule, spec: ModelSpec, device: str, config: dict[str, Any], row: dict[str, Any],
               timer: Phases) -> Any:
    tensors = init_weights(spec, seed=int(config["weights_seed"]))
    timer.progress("building and loading weights")

    def build() -> Any:
        if config.get("user"):  # `time --model`: the user's model where the port stands
            from shared.your_model.evaluate import UserPort

            try:
                return UserPort(config["user"], spec, tensors)
            except PortbenchError as exc:  # the user's file, factory or binding: their input
                row["user_error"] = str(exc)
                raise
        port = ports.create_port(config["framework"], spec, device=device, precision=gate.rung(config))
        port.load(tensors)
        port.sync()
        return port

    seconds, port = time_once(build)
    timer.single("build_load", seconds, "construct the model, then load canonical weights")
    row["param_count"] = int(port.param_count())
    row["param_count_spec"] = int(spec.derived.params)
    return port


def first_calls(port: PortInterface, images: np.ndarray, prepared: Any, config: dict[str, Any],
                row: dict[str, Any], timer: Phases, arrays: dict[str, Any]) -> Callable[[Any], Any] | None:
    """The first eager call and the compile, each doubling as a check of the equivalence gate:
    shared/core/equivalence.check_logits's verdict, below float32 with the precision contract on
    the dtypes the eager pass computed every named tensor in (the gated logits go to `arrays`:
    the main job compares the ports pairwise with them). Returns the compiled forward, or None
    when there is none."""
    timer.progress("first eager call")
    seconds, first_out = time_once(synced(port, lambda: port.forward(prepared, train=False)))
    timer.single("first_call_eager", seconds, "includes lazy initialisation of kernels")
    arrays["eager_logits"] = port.to_numpy(first_out)[:gate.gate_rows(port.spec)]
    # The user's model has no precision contract to read; a port's dtypes are read on the timed
    # batch (a new shape would make JAX compile every eager op again); they judge the eager mode.
    dtypes = {} if config.get("user") else contract_dtypes(port, images)
    row["equivalence"]["eager"] = gate.judge(row, port.spec, arrays["eager_logits"], config, dtypes).to_dict()
    if "compiled" not in config["modes"]:
        timer.unavailable("compile", "compiled mode not requested (--modes)")
        timer.unavailable("forward_compiled", "compiled mode not requested (--modes)")
        return None
    try:
        compiled = port.compiled_forward()
    except (NotImplementedError, PortbenchError) as exc:
        timer.unavailable("compile", f"no compiled mode: {exc}")
        timer.unavailable("forward_compiled", f"no compiled mode: {exc}")
        return None
    timer.progress("compiling")
    try:
        seconds, compiled_out = time_once(synced(port, lambda: compiled(prepared)))
    except Exception as exc:  # a compiler failure costs the compiled mode, not the row
        reason = f"compile failed: {first_line(exc, typed=True)[:200]}"
        timer.unavailable("compile", reason)
        timer.unavailable("forward_compiled", reason)
        row["notes"].append(reason)
        return None
    # After a measurement on the compiled forward the chosen mode was compiled there first: that
    # first call is the compile; this one found the framework's in-process cache warm
    seconds = modes.first_compile(row, seconds)
    timer.single("compile", seconds, backends.compile_note(row["backend"]))
    compiled_logits = port.to_numpy(compiled_out)[:gate.gate_rows(port.spec)]
    row["equivalence"]["compiled"] = gate.judge(row, port.spec, compiled_logits, config).to_dict()
    return compiled


def timed_phases(port: PortInterface, images: np.ndarray, prepared: Any,
                 compiled: Callable[[Any], Any] | None, config: dict[str, Any], timer: Phases) -> None:
    spec, batch = port.spec, int(config["batch"])
    timer.repeated("prepare", synced(port, lambda: port.prepare(images)))
    if "eager" in config["modes"]:
        timer.repeated("forward_eager", synced(port, lambda: port.forward(prepared, train=False)))
    else:
        timer.unavailable("forward_eager", "eager mode not requested (--modes)")
    if compiled is not None:
        timer.repeated("forward_compiled", synced(port, lambda: compiled(prepared)))
    eval_batches = [probe_batch(spec, batch=batch, seed=int(config["seed"]) + 1 + k)
                    for k in range(int(config["eval_batches"]))]
    forward = compiled if compiled is not None else (lambda p: port.forward(p, train=False))

    def eval_pass() -> int:
        correct = 0
        for b in eval_batches:  # prepare + forward + read back: what an evaluation loop does
            correct += int(port.to_numpy(forward(port.prepare(b))).argmax(-1).sum() >= 0)
        return correct

    budget = timer.budget
    pass_budget = Budget(warmup=1, min_repeats=3, max_repeats=budget.max_repeats, seconds=budget.seconds)
    mode = "compiled" if compiled is not None else "eager"
    timer.repeated("eval_pass", eval_pass, pass_budget,
                   note=f"{len(eval_batches)} batches of {batch}, {mode} forward, per pass")
    timer.phases["eval_pass"]["batches"] = len(eval_batches)  # held equal before eval_pass is ranked


def train_phase(framework: str, port: PortInterface, images: np.ndarray, config: dict[str, Any],
                timer: Phases) -> None:
    """The training update (last: it changes the weights)."""
    if not config.get("train", True):
        timer.unavailable("train_step", "training phase not requested (--modes)")
        return
    if config.get("user"):
        timer.unavailable("train_step", "your model: the pinned training step is the ports' own")
        return
    if not port.spec.num_classes:
        timer.unavailable("train_step", "no classifier (num_classes 0): no class labels to step on")
        return
    try:
        trainer_module = importlib.import_module(ports.PORTS[framework].module + ".train")
    except ImportError as exc:
        timer.unavailable("train_step", f"train step not available ({exc})")
        return
    recipe_name = config.get("train_recipe", "archive")
    try:
        trainer = trainer_module.Trainer(port, get_recipe(recipe_name))
    except FrameworkUnavailable as exc:  # e.g. the Keras trainer on a non-TensorFlow backend
        timer.unavailable("train_step", f"train step not available ({exc})")
        return
    # A label per output row: per image, and a packed sequence holds pack_images of them.
    rows = images.shape[0] * port.spec.pack_images
    labels = np.random.default_rng(int(config["seed"])).integers(0, port.spec.num_classes, size=rows)
    batch = trainer.prepare_batch(images, labels)
    timer.progress("first training update")
    first, _ = time_once(lambda: trainer.loss_value(trainer.step(batch)))
    compiled = bool(getattr(trainer, "compiled", False))
    timer.repeated("train_step", lambda: trainer.loss_value(trainer.step(batch)),
                   note=f"{'compiled' if compiled else 'eager'} step, recipe {recipe_name!r}; "
                        f"first step {first:.3f}s")
    timer.phases["train_step"]["first_step_seconds"] = first
    timer.phases["train_step"]["compiled"] = compiled


def measure_roofline(module: PortModule, spec: ModelSpec, device: str, config: dict[str, Any],
                     row: dict[str, Any], timer: Phases) -> None:
    """The framework's GEMM rate at this run's threads and device, its products run in the mode
    the run chose, and each forward mode's share of it (shared/measure/roofline.py)."""
    dtype = gate.rung(config).compute_dtype
    mode = (row.get("mode_choice") or {}).get("chosen")
    timer.progress(f"measuring the {dtype} GEMM rate" + (f" (mode {mode})" if mode else ""))
    row["roofline"] = roofline.measured(module, spec, int(config["batch"]), device, dtype, row["phases"],
                                        mode)


def run(framework: str, config: dict[str, Any], out: Output) -> None:
    """The `timing` job: import, build, gate, then every phase, into the row `out.report`."""
    row = out.report
    spec = start_row(framework, config, row)
    timer = Phases(framework, row, Budget(**config["budget"]))
    module = import_port(framework, config, row, timer)
    device = choose_device(framework, module, config, row)
    if device is None:
        return
    port = build_port(module, spec, device, config, row, timer)
    if config.get("user"):
        row["framework"] = f"yours ({port.framework})"
    images = probe_batch(spec, batch=int(config["batch"]), seed=int(config["seed"]))
    row["conditions"]["patches_real"], row["conditions"]["patches_slots"] = patch_counts(spec, images)
    prepared = port.prepare(images)
    port.sync(prepared)
    modes.choose(framework, module, port, prepared, config, row)  # the mode every phase then runs
    compiled = first_calls(port, images, prepared, config, row, timer, out.arrays)
    failure = gate.gate_failure(row)
    if failure is None:
        # the worker's whole timed span: one number `rounds.py` judges the worker by
        with ForeignCpu(row["threads_applied"]["affinity"]) as span:
            timed_phases(port, images, prepared, compiled, config, timer)
            train_phase(framework, port, images, config, timer)
        row["foreign_cpu"] = span.value
        measure_roofline(module, spec, device, config, row, timer)
    else:
        row["status"], row["reason"] = "invalid", failure
    row["memory"].update(backends.memory(module, row["backend"], device))

