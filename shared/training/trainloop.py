"""The training loop, written once for every port: data, schedule, checkpoints, curves.

It drives a port's `Trainer` (ports/<fw>/train.py) only through its contract: `prepare_batch`,
`step`, `loss_value`, `set_learning_rate`, `evaluate`, `reseed`, `export_state`, `load_state`.
Framework modules are imported inside functions (shared/ never imports a framework at load).

Checkpoints (one folder per seed), written at the end of every epoch, each file atomically and
the small `state.json` last, so a crash leaves the previous complete checkpoint readable:
`weights.safetensors`, `adam_m.safetensors`, `adam_v.safetensors` (canonical layout, via
`shared.core.weights.save_weights`) and `state.json` (epoch, updates, controller state, curves).
"""

from __future__ import annotations

import importlib
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from shared.core.spec import ModelSpec
from shared.core.weights import atomic_write_bytes, load_weights, save_weights
from shared.errors import PortbenchError, WeightsError
from shared.training.data import Dataset, batches, check_batch_size, steps_per_epoch
from shared.training.init_schemes import recipe_weights
from shared.training.schedule import Controller
from shared.training.train_spec import TrainSpec

CURVES = ("lr", "train_loss", "val_loss", "val_accuracy", "test_loss", "test_accuracy")
STEP_CURVE = "step_loss"  # per update, only when asked for: a plateau is a dwell in steps


class TrainingError(PortbenchError):
    """Training cannot go on (non-finite loss, unusable checkpoint); the message says what is kept."""


@dataclass
class SeedResult:
    seed: int
    curves: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in CURVES})
    epochs: int = 0
    steps: int = 0
    stopped_because: str = ""
    wall_s: dict[str, float] = field(default_factory=lambda: {"setup": 0.0, "train": 0.0,
                                                                "evaluate": 0.0, "checkpoint": 0.0})

    def to_dict(self) -> dict[str, Any]:
        return {"seed": self.seed, "curves": self.curves, "epochs": self.epochs, "steps": self.steps,
                "final_accuracy": self.curves["test_accuracy"][-1] if self.epochs else None,
                "final_loss": self.curves["test_loss"][-1] if self.epochs else None,
                "final_val_accuracy": self.curves["val_accuracy"][-1] if self.epochs else None,
                "stopped_because": self.stopped_because, "wall_s": self.wall_s}


def load_trainer_module(framework: str):
    from ports import load_port_module

    load_port_module(framework)  # one-line FrameworkUnavailable when it is missing
    return importlib.import_module(f"ports.{framework}.train")


def epoch_seed(seed: int, epoch: int) -> int:
    """The dropout seed of one epoch: a function of (seed, epoch) only, so resuming matches."""
    return (seed * 100_003 + epoch * 7919 + 17) % 2**31


def train_seed(framework: str, spec: ModelSpec, recipe: TrainSpec, data: Dataset, seed: int, *,
               checkpoint_dir: Path | None = None, resume: bool = False, max_epochs: int | None = None,
               progress: Callable[[str], None] | None = None, log: Callable[[str], None] = print,
               trainer_hook: Callable[[Any], None] | None = None, record_steps: bool = False,
               epoch_hook: Callable[[int, Any], None] | None = None) -> tuple[SeedResult, Any]:
    """Train one seed; returns the result and the trainer (whose port holds the last weights).
    `max_epochs` stops this call early (a checkpoint stays resumable); the recipe's own limit
    is what the schedule counts. `record_steps` adds curves[STEP_CURVE], the training loss of
    every update; `epoch_hook(epoch, trainer)` runs after each epoch's evaluation."""
    t0 = time.perf_counter()
    recipe = recipe.replace(seed=seed)
    check_batch_size(data.train, recipe.batch_size)
    module = load_trainer_module(framework)
    from ports import create_port

    port = create_port(framework, spec)
    port.load(recipe_weights(spec, recipe, seed))
    trainer = module.Trainer(port, recipe)
    if trainer_hook is not None:
        trainer_hook(trainer)
    controller, result = Controller(recipe), SeedResult(seed)
    if record_steps:
        result.curves[STEP_CURVE] = []
    if checkpoint_dir is not None and resume and (checkpoint_dir / "state.json").is_file():
        controller, result = _restore(checkpoint_dir, spec, recipe, trainer)
        log(f"[{framework} seed {seed}] resumed at epoch {controller.epoch} (step {result.steps})")
        if record_steps:
            result.curves.setdefault(STEP_CURVE, [])
    result.wall_s["setup"] += time.perf_counter() - t0
    per_epoch = steps_per_epoch(len(data.train), recipe.batch_size, recipe.drop_last)
    stop_at = recipe.max_epochs if max_epochs is None else min(recipe.max_epochs, max_epochs)
    while not controller.stopped and controller.epoch < stop_at:
        epoch, lr = controller.epoch, controller.lr_for_epoch()
        trainer.set_learning_rate(lr)
        trainer.reseed(epoch_seed(seed, epoch))
        t1, losses = time.perf_counter(), []
        for k, (x, y) in enumerate(batches(data.train, recipe.batch_size, epoch, seed,
                                           recipe.shuffle, recipe.drop_last)):
            loss = trainer.loss_value(trainer.step(trainer.prepare_batch(x, y)))
            if not math.isfinite(loss):
                kept = (f"last good checkpoint {str(checkpoint_dir)!r} (epoch {epoch})"
                        if checkpoint_dir is not None and epoch > 0 else "nothing was saved")
                raise TrainingError(f"loss is {loss} at step {result.steps + 1} (epoch {epoch}, "
                                    f"batch {k + 1} of {per_epoch}, lr {lr:.3g}); stopped; {kept}")
            result.steps += 1
            losses.append(loss)
            if record_steps:
                result.curves[STEP_CURVE].append(loss)
            if progress is not None:
                progress(_bar(framework, seed, epoch, k + 1, per_epoch, loss))
        result.wall_s["train"] += time.perf_counter() - t1
        t2 = time.perf_counter()
        metrics = {"train_loss": float(np.mean(losses))}
        metrics["val_loss"], metrics["val_accuracy"] = (
            trainer.evaluate(data.val.images, data.val.labels) if len(data.val) else (math.nan, math.nan))
        metrics["test_loss"], metrics["test_accuracy"] = trainer.evaluate(data.test.images, data.test.labels)
        if "train_accuracy" in (recipe.plateau_metric, recipe.early_stop_metric):
            _, metrics["train_accuracy"] = trainer.evaluate(data.train.images, data.train.labels)
        if epoch_hook is not None:
            epoch_hook(epoch, trainer)
        result.wall_s["evaluate"] += time.perf_counter() - t2
        decision = controller.end_epoch({k: v for k, v in metrics.items() if not k.startswith("test_")})
        result.curves["lr"].append(lr)
        for name in CURVES[1:]:
            result.curves[name].append(float(metrics[name]))
        result.epochs = controller.epoch
        result.stopped_because = decision.reason if decision.stop else ""
        if progress is not None:
            progress("")
        log(f"[{framework} seed {seed}] epoch {epoch + 1}/{recipe.max_epochs} step {result.steps} "
            f"lr {lr:.3g} train_loss {metrics['train_loss']:.4f} val_loss {metrics['val_loss']:.4f} "
            f"val_acc {metrics['val_accuracy']:.4f} test_acc {metrics['test_accuracy']:.4f}"
            + (f"  ({decision.reason})" if decision.reason else ""))
        if checkpoint_dir is not None:
            t3 = time.perf_counter()
            _save(checkpoint_dir, spec, recipe, trainer, controller, result)
            result.wall_s["checkpoint"] += time.perf_counter() - t3
    return result, trainer


def _bar(framework: str, seed: int, epoch: int, done: int, total: int, loss: float) -> str:
    width = 24
    filled = int(width * done / total)
    return (f"\r[{framework} seed {seed}] epoch {epoch + 1} [{'#' * filled}{'.' * (width - filled)}] "
            f"{done}/{total} loss {loss:.4f}")


def stderr_progress(line: str) -> None:
    sys.stderr.write(line if line else "\r" + " " * 78 + "\r")
    sys.stderr.flush()


# ---- checkpoints ------------------------------------------------------------------------------
def _save(folder: Path, spec: ModelSpec, recipe: TrainSpec, trainer: Any, controller: Controller,
          result: SeedResult) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    first, second, updates = trainer.export_state()
    meta = {"epoch": str(controller.epoch), "updates": str(updates)}
    save_weights(folder / "weights.safetensors", spec, trainer.port.export(), extra_metadata=meta)
    save_weights(folder / "adam_m.safetensors", spec, first, extra_metadata=meta)
    save_weights(folder / "adam_v.safetensors", spec, second, extra_metadata=meta)
    state = {"recipe": recipe.to_dict(), "spec_hash": spec.spec_hash, "updates": updates,
             "controller": controller.state(), "result": result.to_dict()}
    atomic_write_bytes(folder / "state.json", json.dumps(state, indent=1).encode())


def _restore(folder: Path, spec: ModelSpec, recipe: TrainSpec, trainer: Any) -> tuple[Controller, SeedResult]:
    try:
        state = json.loads((folder / "state.json").read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise TrainingError(f"checkpoint {str(folder / 'state.json')!r} is unreadable ({exc})") from None
    if state.get("spec_hash") != spec.spec_hash:
        raise TrainingError(f"checkpoint {str(folder)!r} is for another spec "
                            f"(hash {state.get('spec_hash')!r}, "
                            f"expected {spec.spec_hash!r}); use another --checkpoints folder")
    saved_recipe = TrainSpec.from_dict(state["recipe"])
    if saved_recipe.replace(max_epochs=recipe.max_epochs) != recipe:  # extending a run is fine
        saved_fields = saved_recipe.to_dict()
        changed = [k for k, v in recipe.to_dict().items() if saved_fields[k] != v and k != "max_epochs"]
        raise TrainingError(f"checkpoint {str(folder)!r} was written with another recipe (field "
                            f"{changed[0]!r} differs); resume needs the same recipe (max_epochs may grow)")
    files = [load_weights(folder / name, spec) for name in
             ("weights.safetensors", "adam_m.safetensors", "adam_v.safetensors")]
    epochs = {f.metadata.get("epoch") for f in files}
    if len(epochs) != 1 or str(state["controller"]["epoch"]) not in epochs:
        raise WeightsError(f"checkpoint {str(folder)!r}: files from different epochs {sorted(epochs)}")
    trainer.port.load(files[0].tensors)
    trainer.load_state(files[1].tensors, files[2].tensors, int(state["updates"]))
    saved = state["result"]
    result = SeedResult(int(saved["seed"]), saved["curves"], int(saved["epochs"]), int(saved["steps"]),
                        saved["stopped_because"], saved["wall_s"])
    controller = Controller.from_state(recipe, state["controller"])
    if controller.stopped and result.stopped_because.startswith("max_epochs"):
        controller.stopped, result.stopped_because = controller.epoch >= recipe.max_epochs, ""
    return controller, result
