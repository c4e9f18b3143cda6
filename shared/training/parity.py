"""Run the same training steps in one framework, in its own process, and return the parameters.

Why a subprocess: each framework needs its own environment (Keras' backend is fixed at import),
and in one process torch's optimizer segfaults when TensorFlow was imported before triton
(torch.optim imports torch._dynamo, which loads triton's native library). The parity tests and
the experiments start one worker per framework with `start_training_jobs` (the one launcher's
worker) and read its results with `collect`. The job kinds here (`STEPS`, `GRAD`, `LOOP`,
`DIVERGE`) are declared below their functions (shared/runtime/job_kinds.py); each runs
single-threaded.

A job: spec and recipe (JSON), initial-weight seed, batch seed and size, the steps after which to
snapshot the parameters, and optional "pins" (module attributes of ports/<fw>/train.py to change,
to show that a pin matters), and an optional "precision" (`Precision.to_dict()`: the rung the port
computes at). Batches are generated in the worker from the batch seed, so every framework sees
the same arrays. A rung a port does not train at fails its job with FrameworkUnavailable;
`collect` tells such a refusal from a failure.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from shared.core.weights import Tensors
from shared.errors import FrameworkUnavailable, PortbenchError, SpecError
from shared.runtime.job_kinds import Job, JobKind, Output
from shared.runtime.launch import Worker


def job_batches(spec: Any, seed: int, batch: int, count: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """`count` batches of standard-normal images and uniform labels, keyed by `seed`."""
    rng = np.random.default_rng([seed, 0xBA7])
    shape = (batch, spec.image_height, spec.image_width, spec.channels)
    return [(rng.standard_normal(shape).astype(np.float32), rng.integers(0, spec.num_classes, batch))
            for _ in range(count)]


def _store(out: Output, results: dict[str, Tensors]) -> None:
    """Results as the worker's arrays, "<snapshot>/<tensor>"."""
    for snap, tensors in results.items():
        for tensor, value in tensors.items():
            out.arrays[f"{snap}/{tensor}"] = value


def steps(framework: str, job: dict[str, Any], out: Output) -> None:
    """Stores {"grad": canonical gradients at the start, "grad_loss": {"loss": their loss},
    "<step>": parameters after that many updates, "loss<step>": {"loss": that step's loss, "scale":
    the loss scale after it, "updates": the optimizer updates taken (fewer where float16 loss
    scaling skipped a step)}}, at the job's precision rung."""
    import importlib

    from ports import create_port, load_port_module
    from shared.core.precision import Precision
    from shared.core.spec import ModelSpec
    from shared.core.train_spec import TrainSpec
    from shared.core.weights import init_weights

    load_port_module(framework).set_threads(1)
    spec = ModelSpec.from_json(job["spec"])
    recipe = TrainSpec.from_json(job["recipe"])
    precision = Precision.from_dict(job.get("precision") or {})  # none named: float32
    module = importlib.import_module(f"ports.{framework}.train")
    saved = {name: getattr(module, name) for name in job.get("pins", {})}  # an unknown pin: AttributeError
    for name, value in job.get("pins", {}).items():
        setattr(module, name, value)
    try:
        port = create_port(framework, spec, precision=precision)
        port.load(init_weights(spec, job["weights_seed"]))
        steps = max(job["snapshots"])
        data = job_batches(spec, job["batch_seed"], job["batch"], steps)
        results: dict[str, Tensors] = {}
        if job.get("gradients", True):  # eager gradients cost ~20 s in Flax on a busy CPU
            loss, results["grad"] = port.loss_and_gradients(*data[0])
            results["grad_loss"] = {"loss": np.array([loss])}
        trainer = module.Trainer(port, recipe)
        trainer.set_learning_rate(recipe.learning_rate)
        for k, (x, y) in enumerate(data, start=1):
            loss = trainer.loss_value(trainer.step(trainer.prepare_batch(x, y)))
            if k in job["snapshots"]:
                results[str(k)] = {n: np.array(t, copy=True) for n, t in port.export().items()}
                results[f"loss{k}"] = {"loss": np.array([loss]), "scale": np.array([trainer.loss_scale()]),
                                       "updates": np.array([trainer.updates])}
        _store(out, results)
    finally:
        for name, value in saved.items():
            setattr(module, name, value)


def loop(framework: str, job: dict[str, Any], out: Output) -> None:
    """The shared training loop on the quadrant task, three ways: `epochs` epochs uninterrupted;
    1 epoch, then resumed from its checkpoint to `epochs`. Stores both final weights and the
    uninterrupted run's test accuracy per epoch."""
    from ports import load_port_module
    from shared.core.spec import ModelSpec
    from shared.core.train_spec import TrainSpec
    from shared.training.data import load_dataset
    from shared.training.trainloop import train_seed

    load_port_module(framework).set_threads(1)
    spec, recipe = ModelSpec.from_json(job["spec"]), TrainSpec.from_json(job["recipe"])
    data = load_dataset(job["data"], spec, recipe.validation_fraction, 0)
    folder = Path(tempfile.mkdtemp(prefix=f"loop-{framework}-"))
    quiet = lambda line: None  # noqa: E731
    full, trainer = train_seed(framework, spec, recipe, data, 0, checkpoint_dir=folder / "full", log=quiet)
    results = {"full": trainer.port.export(),
               "accuracy": {"test": np.array(full.curves["test_accuracy"])}}
    train_seed(framework, spec, recipe, data, 0, checkpoint_dir=folder / "cut", max_epochs=1, log=quiet)
    resumed, trainer = train_seed(framework, spec, recipe, data, 0, checkpoint_dir=folder / "cut",
                                  resume=True, log=quiet)
    results["resumed"] = trainer.port.export()
    results["steps"] = {"full": np.array([full.steps]), "resumed": np.array([resumed.steps])}
    _store(out, results)


def diverge(framework: str, job: dict[str, Any], out: Output) -> None:
    """Train with the learning rate forced to 1e30 from epoch 1 on; report the error message, the
    checkpoint's state.json and whether its weights still load."""
    from ports import load_port_module
    from shared.core.spec import ModelSpec
    from shared.core.train_spec import TrainSpec
    from shared.core.weights import load_weights
    from shared.training.checkpoint import latest_unit
    from shared.training.data import load_dataset
    from shared.training.trainloop import TrainingError, train_seed

    load_port_module(framework).set_threads(1)
    spec, recipe = ModelSpec.from_json(job["spec"]), TrainSpec.from_json(job["recipe"])
    data = load_dataset(job["data"], spec, recipe.validation_fraction, 0)
    folder = Path(tempfile.mkdtemp(prefix=f"diverge-{framework}-")) / "ck"

    def explode_after_first_epoch(trainer: Any) -> None:
        original, calls = trainer.set_learning_rate, []

        def set_learning_rate(lr: float) -> None:
            calls.append(lr)
            original(lr if len(calls) == 1 else 1e30)

        trainer.set_learning_rate = set_learning_rate

    try:
        train_seed(framework, spec, recipe, data, 0, checkpoint_dir=folder, log=lambda line: None,
                   trainer_hook=explode_after_first_epoch)
        message = "no error"
    except TrainingError as exc:
        message = str(exc)
    unit = latest_unit(folder)
    try:
        load_weights(unit / "weights.safetensors", spec)  # type: ignore[operator]
        loads = True
    except Exception:  # the point is whether it loads
        loads = False
    state = (unit / "state.json").read_bytes() if unit else b"{}"
    _store(out, {"error": {"message": np.frombuffer(message.encode(), dtype=np.uint8),
                           "state": np.frombuffer(state, dtype=np.uint8),
                           "checkpoint_loads": np.array([loads])}})


def gradients(framework: str, job: dict[str, Any], out: Output) -> None:
    """Canonical gradients of the mean CE at seed-0 weights on a seeded batch of 16."""
    from ports import create_port, load_port_module
    from shared.core.spec import ModelSpec
    from shared.core.weights import init_weights

    load_port_module(framework).set_threads(1)
    spec = ModelSpec.from_json(job["spec"])
    port = create_port(framework, spec)
    port.load(init_weights(spec, 0))
    _, grads = port.loss_and_gradients(*job_batches(spec, 1, 16, 1)[0])
    _store(out, {"grad": grads})


STEPS, LOOP, DIVERGE = JobKind("steps", steps), JobKind("loop", loop), JobKind("diverge", diverge)
GRAD = JobKind("grad", gradients)


def start_training_jobs(framework: str, jobs: dict[str, dict[str, Any] | Job],
                        folder: Path | None = None) -> Worker:
    """Start one worker for `framework` on `jobs` (name -> a Job, or a `steps` job's fields), its
    job files in `folder` (by default a new temporary one, the caller's to remove); `collect`
    waits for it and reads its results."""
    folder = folder or Path(tempfile.mkdtemp(prefix=f"parity-{framework}-"))
    typed = {name: job if isinstance(job, Job) else STEPS.job(**job) for name, job in jobs.items()}
    return Worker(framework, typed, folder)


REFUSALS = {"FrameworkUnavailable": FrameworkUnavailable, "SpecError": SpecError}  # not offered


def collect(worker: Worker, timeout: float = 600,
            refused: dict[str, str] | None = None) -> dict[str, dict[str, Tensors]]:
    """{job: {snapshot: {tensor: array}}}; a failed job raises its one-line reason. A job refused
    as not offered (FrameworkUnavailable: e.g. a rung the port does not train at; SpecError: a job
    asking for what cannot exist) raises that class, or, when `refused` is given, is recorded
    there as "Kind: reason"."""
    result = worker.result(timeout)
    results: dict[str, dict[str, Tensors]] = {}
    for job in worker.jobs:
        error = result.error(job)
        kind = (result.reports.get(job) or {}).get("error_kind")
        if error and kind in REFUSALS:
            if refused is None:
                raise REFUSALS[kind](f"parity job {job!r} not offered: {error}")
            refused[job] = f"{kind}: {error}"
            continue
        if error:
            raise PortbenchError(f"parity job {job!r} failed: {error}")
        for key, value in result.arrays.get(job, {}).items():
            snap, tensor = key.split("/", 1)
            results.setdefault(job, {}).setdefault(snap, {})[tensor] = value
    return results
