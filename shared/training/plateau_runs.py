"""Runs of the quadrant plateau experiment: one worker process per framework, the shared loop.

A run is a JSON-able job: spec, recipe, data name (`quadrant[:noise=N,contrast=C]`), seed and
step budget; with "probe": true it is not trained and `probe_one` reports what the port starts
from. The worker (`python -m shared.training.plateau_runs FRAMEWORK FOLDER`) trains each job with
`shared.training.trainloop.train_seed` (record_steps on, no checkpoints), and after every epoch
records the test-set confusion matrix from the port's logits. Each framework runs in its own
process for the reason `shared.training.parity` gives (Keras' backend is fixed at import; torch's
optimizer and TensorFlow do not share a process). Data and initial weights are NumPy, keyed by
seed, so every framework trains on the same batches from the same weights.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from shared import REPO_ROOT
from shared.errors import PortbenchError


def job(spec: Any, recipe: Any, data: str, seed: int, budget: int, probe: bool = False) -> dict[str, Any]:
    """One run; the recipe's max_epochs becomes the fewest epochs that hold `budget` updates and
    early stopping is off (the budget is the stop; the recipe's lr schedule still applies)."""
    from shared.training.data import load_dataset, steps_per_epoch

    train = load_dataset(data, spec, recipe.validation_fraction, seed).train
    per_epoch = steps_per_epoch(len(train), recipe.batch_size, recipe.drop_last)
    recipe = recipe.replace(max_epochs=max(1, math.ceil(budget / per_epoch)), seed=seed,
                            early_stop_patience=None)
    return {"spec": spec.to_json(), "recipe": recipe.to_json(), "data": data, "seed": seed,
            "budget": budget, "probe": probe}


def probe_one(framework: str, item: dict[str, Any]) -> dict[str, Any]:
    """No training: a digest of every batch of the run's first epoch (images and labels as this
    process receives them) and of the initial weights after a round trip through the port."""
    import hashlib

    from ports import create_port
    from shared.core.spec import ModelSpec
    from shared.training.data import batches, load_dataset
    from shared.training.init_schemes import recipe_weights
    from shared.training.train_spec import TrainSpec

    spec, recipe = ModelSpec.from_json(item["spec"]), TrainSpec.from_json(item["recipe"])
    data = load_dataset(item["data"], spec, recipe.validation_fraction, item["seed"])
    digests = [hashlib.sha256(x.tobytes() + y.tobytes()).hexdigest()
               for x, y in batches(data.train, recipe.batch_size, 0, item["seed"], recipe.shuffle,
                                   recipe.drop_last)]
    port = create_port(framework, spec)
    port.load(recipe_weights(spec, recipe, item["seed"]))
    weights = hashlib.sha256(b"".join(t.tobytes() for _, t in sorted(port.export().items())))
    return {"batch_digests": digests, "weights_digest": weights.hexdigest()}


def run_one(framework: str, item: dict[str, Any]) -> dict[str, Any]:
    """In this process: train one job, return its curves, confusion matrices and times."""
    from shared.core.spec import ModelSpec
    from shared.training.data import load_dataset
    from shared.training.plateau import confusion
    from shared.training.train_spec import TrainSpec
    from shared.training.trainloop import STEP_CURVE, train_seed

    spec, recipe = ModelSpec.from_json(item["spec"]), TrainSpec.from_json(item["recipe"])
    data = load_dataset(item["data"], spec, recipe.validation_fraction, item["seed"])
    matrices: list[list[list[int]]] = []

    def record_confusion(epoch: int, trainer: Any) -> None:
        predicted = np.argmax(trainer.port.logits(data.test.images), axis=-1)
        matrices.append(confusion(data.test.labels, predicted, data.num_classes).tolist())

    started = time.perf_counter()
    result, _ = train_seed(framework, spec, recipe, data, item["seed"], log=lambda line: None,
                           record_steps=True, epoch_hook=record_confusion)
    curves = result.curves
    return {"step_loss": curves[STEP_CURVE][:item["budget"]], "test_loss": curves["test_loss"],
            "test_accuracy": curves["test_accuracy"], "val_loss": curves["val_loss"],
            "confusion": matrices, "steps": result.steps, "epochs": result.epochs,
            "wall_s": time.perf_counter() - started}


def start(framework: str, jobs: list[dict[str, Any]]) -> subprocess.Popen:
    """A worker for `framework` on `jobs`; `finish` waits for it and reads its results."""
    from ports import PORTS

    folder = Path(tempfile.mkdtemp(prefix=f"plateau-{framework}-"))
    (folder / "jobs.json").write_text(json.dumps(jobs))
    env = {**os.environ, **PORTS[framework].env, "TF_CPP_MIN_LOG_LEVEL": "3"}
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen([sys.executable, "-m", "shared.training.plateau_runs", framework, str(folder)],
                            cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    proc.folder = folder  # type: ignore[attr-defined]
    return proc


def finish(proc: subprocess.Popen, echo: bool = True) -> list[dict[str, Any]]:
    lines = []
    for line in proc.stdout:  # type: ignore[union-attr]
        lines.append(line.rstrip())
        if echo:
            print(line.rstrip(), flush=True)
    proc.wait()
    folder: Path = proc.folder  # type: ignore[attr-defined]
    if proc.returncode != 0:
        raise PortbenchError(f"plateau worker failed (exit {proc.returncode}): {lines[-1:] or 'no output'}; "
                             f"its jobs are in {str(folder)!r}")
    results = json.loads((folder / "results.json").read_text())
    shutil.rmtree(folder, ignore_errors=True)
    return results


def run_all(framework: str, jobs: list[dict[str, Any]], echo: bool = True) -> list[dict[str, Any]]:
    return finish(start(framework, jobs), echo)


def main(argv: list[str]) -> int:
    framework, folder = argv[0], Path(argv[1])
    from ports import load_port_module
    from shared.core.weights import atomic_write_bytes

    load_port_module(framework).set_threads(1)
    jobs = json.loads((folder / "jobs.json").read_text())
    results = []
    for k, item in enumerate(jobs, start=1):
        if item.get("probe"):
            results.append(probe_one(framework, item))
            continue
        results.append(run_one(framework, item))
        name = json.loads(item["spec"])["name"]
        print(f"[{framework}] run {k}/{len(jobs)} {name} seed {item['seed']}: "
              f"{results[-1]['steps']} steps, final test accuracy {results[-1]['test_accuracy'][-1]:.4f} "
              f"({results[-1]['wall_s']:.1f} s)", flush=True)
    atomic_write_bytes(folder / "results.json", json.dumps(results).encode())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
