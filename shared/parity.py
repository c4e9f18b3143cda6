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

from shared.errors import PortbenchError
from shared.weights import Tensors


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
    from shared.spec import ModelSpec
    from shared.train_spec import TrainSpec
    from shared.weights import init_weights

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


def run_jobs(framework: str, jobs: dict[str, dict[str, Any]], timeout: float = 600) -> subprocess.Popen:
    """Start a worker for `framework` on `jobs` (name -> job); `collect` reads its results."""
    from ports import PORTS

    folder = Path(tempfile.mkdtemp(prefix=f"parity-{framework}-"))
    (folder / "jobs.json").write_text(json.dumps(jobs))
    env = {**os.environ, **PORTS[framework].env, "TF_CPP_MIN_LOG_LEVEL": "3"}
    root = Path(__file__).resolve().parents[1]
    env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen([sys.executable, "-m", "shared.parity", framework, str(folder)],
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
        for snap, tensors in run_job(framework, job).items():
            for tensor, value in tensors.items():
                flat[f"{name}/{snap}/{tensor}"] = value
    np.savez(folder / "results.npz", **flat)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
