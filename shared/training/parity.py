"""Run the same training steps in one framework, in its own process, and return the parameters.

Why a subprocess: each framework needs its own environment (Keras' backend is fixed at import),
and in one process torch's optimizer segfaults when TensorFlow was imported before triton
(torch.optim imports torch._dynamo, which loads triton's native library). The parity tests and
the experiments run every framework through `run_jobs`, which starts one worker per framework.

A job: spec and recipe (JSON), initial-weight seed, batch seed and size, the steps after which to
snapshot the parameters, and optional "pins" (module attributes of ports/<fw>/train.py to change,
to show that a pin matters). Batches are generated in the worker from the batch seed, so every
framework sees the same arrays.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from shared import REPO_ROOT
from shared.core.weights import Tensors
from shared.errors import PortbenchError


def job_batches(spec: Any, seed: int, batch: int, count: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """`count` batches of standard-normal images and uniform labels, keyed by `seed`."""
    rng = np.random.default_rng([seed, 0xBA7])
    shape = (batch, spec.image_height, spec.image_width, spec.channels)
    return [(rng.standard_normal(shape).astype(np.float32), rng.integers(0, spec.num_classes, batch))
            for _ in range(count)]


def run_job(framework: str, job: dict[str, Any]) -> dict[str, Tensors]:
    """In this process: returns {"grad": canonical gradients at the start, "<step>": parameters
    after that many updates, "loss<step>": loss as a 1-element tensor}."""
    import importlib

    from ports import create_port
    from shared.core.spec import ModelSpec
    from shared.core.weights import init_weights
    from shared.training.train_spec import TrainSpec

    spec = ModelSpec.from_json(job["spec"])
    recipe = TrainSpec.from_json(job["recipe"])
    module = importlib.import_module(f"ports.{framework}.train")
    saved = {name: getattr(module, name) for name in job.get("pins", {})}
    for name, value in job.get("pins", {}).items():
        if name not in saved:
            raise AttributeError(name)
        setattr(module, name, value)
    try:
        port = create_port(framework, spec)
        port.load(init_weights(spec, job["weights_seed"]))
        steps = max(job["snapshots"])
        data = job_batches(spec, job["batch_seed"], job["batch"], steps)
        out: dict[str, Tensors] = {}
        if job.get("gradients", True):  # eager gradients cost ~20 s in Flax on a busy CPU
            _, out["grad"] = port.loss_and_gradients(*data[0])
        trainer = module.Trainer(port, recipe)
        trainer.set_learning_rate(recipe.learning_rate)
        for k, (x, y) in enumerate(data, start=1):
            loss = trainer.loss_value(trainer.step(trainer.prepare_batch(x, y)))
            if k in job["snapshots"]:
                out[str(k)] = {n: np.array(t, copy=True) for n, t in port.export().items()}
                out[f"loss{k}"] = {"loss": np.array([loss])}
        return out
    finally:
        for name, value in saved.items():
            setattr(module, name, value)


def run_loop_job(framework: str, job: dict[str, Any]) -> dict[str, Tensors]:
    """The shared training loop on the quadrant task, three ways: `epochs` epochs uninterrupted;
    1 epoch, then resumed from its checkpoint to `epochs`. Returns both final weights and the
    uninterrupted run's test accuracy per epoch."""
    from shared.core.spec import ModelSpec
    from shared.training.data import load_dataset
    from shared.training.train_spec import TrainSpec
    from shared.training.trainloop import train_seed

    spec, recipe = ModelSpec.from_json(job["spec"]), TrainSpec.from_json(job["recipe"])
    data = load_dataset(job["data"], spec, recipe.validation_fraction, 0)
    folder = Path(tempfile.mkdtemp(prefix=f"loop-{framework}-"))
    quiet = lambda line: None  # noqa: E731
    full, trainer = train_seed(framework, spec, recipe, data, 0, checkpoint_dir=folder / "full", log=quiet)
    out = {"full": trainer.port.export(),
           "accuracy": {"test": np.array(full.curves["test_accuracy"])}}
    train_seed(framework, spec, recipe, data, 0, checkpoint_dir=folder / "cut", max_epochs=1, log=quiet)
    resumed, trainer = train_seed(framework, spec, recipe, data, 0, checkpoint_dir=folder / "cut",
                                  resume=True, log=quiet)
    out["resumed"] = trainer.port.export()
    out["steps"] = {"full": np.array([full.steps]), "resumed": np.array([resumed.steps])}
    return out


def run_diverge_job(framework: str, job: dict[str, Any]) -> dict[str, Tensors]:
    """Train with the learning rate forced to 1e30 from epoch 1 on; report the error message, the
    checkpoint's state.json and whether its weights still load."""
    from shared.core.spec import ModelSpec
    from shared.core.weights import load_weights
    from shared.training.data import load_dataset
    from shared.training.train_spec import TrainSpec
    from shared.training.trainloop import TrainingError, train_seed

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
    try:
        load_weights(folder / "weights.safetensors", spec)
        loads = True
    except Exception:  # the point is whether it loads
        loads = False
    state = (folder / "state.json").read_bytes()
    return {"error": {"message": np.frombuffer(message.encode(), dtype=np.uint8),
                      "state": np.frombuffer(state, dtype=np.uint8), "checkpoint_loads": np.array([loads])}}


def run_taps_job(framework: str, job: dict[str, Any]) -> dict[str, Tensors]:
    """Load a canonical weight file into this framework's port and return its named taps."""
    from ports import create_port
    from shared.core.weights import load_weights

    loaded = load_weights(job["weights"])
    port = create_port(framework, loaded.spec)
    port.load(loaded.tensors)
    images = np.asarray(job["images"], dtype=np.float32)
    return {"taps": {name: np.asarray(t, dtype=np.float32) for name, t in port.intermediates(images).items()}}


def run_grad_job(framework: str, job: dict[str, Any]) -> dict[str, Tensors]:
    """Canonical gradients of the mean CE at seed-0 weights on a seeded batch of 16."""
    from ports import create_port
    from shared.core.spec import ModelSpec
    from shared.core.weights import init_weights

    spec = ModelSpec.from_json(job["spec"])
    port = create_port(framework, spec)
    port.load(init_weights(spec, 0))
    _, grads = port.loss_and_gradients(*job_batches(spec, 1, 16, 1)[0])
    return {"grad": grads}


def run_jobs(framework: str, jobs: dict[str, dict[str, Any]], timeout: float = 600) -> subprocess.Popen:
    """Start a worker for `framework` on `jobs` (name -> job); `collect` reads its results."""
    from ports import PORTS

    folder = Path(tempfile.mkdtemp(prefix=f"parity-{framework}-"))
    (folder / "jobs.json").write_text(json.dumps(jobs))
    env = {**os.environ, **PORTS[framework].env, "TF_CPP_MIN_LOG_LEVEL": "3"}
    root = REPO_ROOT
    env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen([sys.executable, "-m", "shared.training.parity", framework, str(folder)],
                            cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    proc.folder = folder  # type: ignore[attr-defined]
    return proc


def collect(proc: subprocess.Popen, timeout: float = 600) -> dict[str, dict[str, Tensors]]:
    output, _ = proc.communicate(timeout=timeout)
    folder: Path = proc.folder  # type: ignore[attr-defined]
    if proc.returncode != 0:
        raise PortbenchError(f"parity worker failed ({proc.returncode}): {output.strip().splitlines()[-1:]}")
    results: dict[str, dict[str, Tensors]] = {}
    with np.load(folder / "results.npz", allow_pickle=False) as npz:
        for key in npz.files:
            job, snap, tensor = key.split("/", 2)
            results.setdefault(job, {}).setdefault(snap, {})[tensor] = npz[key]
    return results


def main(argv: list[str]) -> int:
    framework, folder = argv[0], Path(argv[1])
    from ports import load_port_module

    load_port_module(framework).set_threads(1)
    jobs = json.loads((folder / "jobs.json").read_text())
    flat: dict[str, np.ndarray] = {}
    for name, job in jobs.items():
        runner = {"loop": run_loop_job, "diverge": run_diverge_job, "taps": run_taps_job,
                  "grad": run_grad_job}.get(job.get("kind", ""), run_job)
        for snap, tensors in runner(framework, job).items():
            for tensor, value in tensors.items():
                flat[f"{name}/{snap}/{tensor}"] = value
    np.savez(folder / "results.npz", **flat)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
