"""Runs of the quadrant plateau experiment: one worker process per framework, the shared loop.

A run is a JSON-able job: spec, recipe, data name (`quadrant[:noise=N,contrast=C]`), seed and
step budget; with "probe": true it is not trained and `probe_one` reports what the port starts
from. The worker (the `plateau` job kind, `PLATEAU`, started by the one launcher)
trains each job with
`shared.training.trainloop.train_seed` (record_steps on, no checkpoints), and after every epoch
records the test-set confusion matrix from the port's logits. Each framework runs in its own
process for the reason `shared.training.parity` gives (Keras' backend is fixed at import; torch's
optimizer and TensorFlow do not share a process). Data and initial weights are NumPy, keyed by
seed, so every framework trains on the same batches from the same weights.
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from typing import Any

import numpy as np

from shared.errors import PortbenchError
from shared.runtime.job_kinds import JobKind
from shared.runtime.launch import Worker


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
    from shared.core.train_spec import TrainSpec
    from shared.training.data import batches, load_dataset
    from shared.training.init_schemes import recipe_weights

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
    from experiments.plateau.bookkeeping import confusion
    from shared.core.spec import ModelSpec
    from shared.core.train_spec import TrainSpec
    from shared.training.data import load_dataset
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


def plateau(framework: str, job: dict[str, Any], out: Any) -> None:
    """The worker's `plateau` job kind (`PLATEAU`): train one run, or probe it."""
    from ports import load_port_module

    load_port_module(framework).set_threads(1)
    item = job["item"]
    out.report["result"] = probe_one(framework, item) if item.get("probe") else run_one(framework, item)


PLATEAU = JobKind("plateau", plateau)


def run_all(framework: str, jobs: list[dict[str, Any]], echo: bool = True) -> list[dict[str, Any]]:
    """Every run in one fresh worker of `framework` (the one launcher), results in job order."""
    with tempfile.TemporaryDirectory(prefix=f"plateau-{framework}-") as folder:
        return collect(framework, start(framework, jobs, folder, echo), jobs, echo)


def start(framework: str, jobs: list[dict[str, Any]], folder: str, echo: bool = True) -> Worker:
    """The worker for `jobs`, started (`collect` waits for it)."""
    named = {f"run{k:04d}": PLATEAU.job(item=item) for k, item in enumerate(jobs)}
    return Worker(framework, named, folder, echo=print if echo else None)


def collect(framework: str, worker: Worker, jobs: list[dict[str, Any]],
            echo: bool = True) -> list[dict[str, Any]]:
    """The results of `start`'s worker, in job order; a failed run is one line."""
    result = worker.result(None)
    results = []
    for name, item in zip(worker.jobs, jobs, strict=True):
        error = result.error(name)
        if error:
            raise PortbenchError(f"plateau run {name} ({framework}) failed: {error}")
        results.append(result.reports[name]["result"])
        if echo and not item.get("probe"):
            done = results[-1]
            print(f"[{framework}] {json.loads(item['spec'])['name']} seed {item['seed']}: "
                  f"{done['steps']} steps, final test accuracy {done['test_accuracy'][-1]:.4f} "
                  f"({done['wall_s']:.1f} s)", flush=True)
    return results
