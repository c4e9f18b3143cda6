"""The training loop, written once for every port: data, schedule, checkpoints, curves.

It drives a port's `Trainer` (ports/<fw>/train.py) only through its contract: `prepare_batch`,
`step`, `loss_value`, `set_learning_rate`, `evaluate`, `reseed`, `export_state`, `load_state`.
Framework modules are imported inside functions (shared/ never imports a framework at load).

Checkpoints (one folder per seed) are written at the end of every epoch as one unit, weights,
both Adam moments and `state.json` together (`shared.training.checkpoint`): an interrupt at any
moment leaves the last complete unit, and `resume` continues from it.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, get_args

import numpy as np

from shared.core.data_record import Bound, DataRecord, derived
from shared.core.precision import Precision
from shared.core.spec import ModelSpec
from shared.core.train_spec import TrainSpec, check_training_precision
from shared.errors import PortbenchError
from shared.training import checkpoint
from shared.training.data import Dataset, batches, check_batch_size, steps_per_epoch
from shared.training.init_schemes import recipe_weights
from shared.training.schedule import Controller

# One point per epoch of each of the first six; the last, "step_loss", one per update and only when
# asked for: a plateau is a dwell in steps.
Curve = Literal["lr", "train_loss", "val_loss", "val_accuracy", "test_loss", "test_accuracy", "step_loss"]
CURVES, STEP_CURVE = get_args(Curve)[:-1], get_args(Curve)[-1]
Phase = Literal["setup", "train", "evaluate", "checkpoint"]  # where a seed's wall time went
# A curve's point as it was measured: the loop stops on a non-finite training loss and the schedule
# (shared/training/schedule.py) on a non-finite training or validation metric, but nothing judges the
# test set's, so a test loss may be NaN or infinite and is kept as it came.
Point = Annotated[float, Bound(nan=True, infinite=True)]


class TrainingError(PortbenchError):
    """Training cannot go on (non-finite loss, unusable checkpoint); the message says what is kept."""


@dataclass(frozen=True)
class SeedResult(DataRecord):
    """One seed's run: its curves, how far it got and why it stopped, and where the time went; the
    `seeds` entries of `train --json` and the `result` a checkpoint keeps (read back on resume)."""

    KIND: ClassVar[str] = "seed result"

    seed: int
    curves: dict[Curve, list[Point]] = field(default_factory=lambda: {k: [] for k in CURVES})
    epochs: Annotated[int, Bound(low=0)] = 0
    steps: Annotated[int, Bound(low=0)] = 0
    # the last epoch's test and validation figures; None before the first epoch
    final_accuracy: Point | None = derived()
    final_loss: Point | None = derived()
    final_val_accuracy: Point | None = derived()
    stopped_because: str = ""
    wall_s: dict[Phase, Annotated[float, Bound(low=0)]] = field(
        default_factory=lambda: dict.fromkeys(get_args(Phase), 0.0))

    def derived_values(self) -> dict[str, Any]:
        def last(name: Curve) -> float | None:  # a curve that is missing is `validate`'s to name
            points = self.curves.get(name)
            return points[-1] if self.epochs and points else None

        return {"final_accuracy": last("test_accuracy"), "final_loss": last("test_loss"),
                "final_val_accuracy": last("val_accuracy")}

    def validate(self) -> None:
        for name in CURVES:
            points = len(self.curves.get(name, ()))
            if points != self.epochs:
                self.refuse(f".curves.{name} has {points} points, expected one per epoch ({self.epochs})")


def load_trainer_module(framework: str):
    from ports import load_port_part

    return load_port_part(framework, "train")  # one-line FrameworkUnavailable when it is missing


def epoch_seed(seed: int, epoch: int) -> int:
    """The dropout seed of one epoch: a function of (seed, epoch) only, so resuming matches."""
    return (seed * 100_003 + epoch * 7919 + 17) % 2**31


def train_seed(framework: str, spec: ModelSpec, recipe: TrainSpec, data: Dataset, seed: int, *,
               checkpoint_dir: Path | None = None, resume: bool = False, max_epochs: int | None = None,
               progress: Callable[[str], None] | None = None, log: Callable[[str], None] = print,
               trainer_hook: Callable[[Any], None] | None = None, record_steps: bool = False,
               epoch_hook: Callable[[int, Any], None] | None = None,
               precision: Precision | None = None) -> tuple[SeedResult, Any]:
    """Train one seed; returns the result and the trainer (whose port holds the last weights).
    `max_epochs` stops this call early (a checkpoint stays resumable); the recipe's own limit
    is what the schedule counts. `record_steps` adds curves[STEP_CURVE], the training loss of
    every update; `epoch_hook(epoch, trainer)` runs after each epoch's evaluation. `precision` is
    the rung the port computes at (float32 when None; a pure rung is refused, see
    `check_training_precision`)."""
    t0 = time.perf_counter()
    recipe = recipe.replace(seed=seed)
    check_batch_size(data.train, recipe.batch_size)
    check_training_precision(precision)
    module = load_trainer_module(framework)
    from ports import create_port

    port = create_port(framework, spec, precision=precision)
    port.load(recipe_weights(spec, recipe, seed))
    trainer = module.Trainer(port, recipe)
    if trainer_hook is not None:
        trainer_hook(trainer)
    controller, result = Controller(recipe), SeedResult(seed)
    if checkpoint_dir is not None and resume and checkpoint.resume_point(checkpoint_dir, log) is not None:
        controller, result = _restore(checkpoint_dir, spec, recipe, trainer, data.name, log)
        log(f"[{framework} seed {seed}] resumed at epoch {controller.epoch} (step {result.steps})")
    # The run's progress, grown as it goes; `recorded` states it as a SeedResult (each checkpoint's, the
    # one returned), whose epochs are the schedule's.
    curves = {name: list(points) for name, points in result.curves.items()}
    if record_steps:
        curves.setdefault(STEP_CURVE, [])
    steps, stopped_because, wall = result.steps, result.stopped_because, dict(result.wall_s)

    def recorded() -> SeedResult:
        return SeedResult(seed, {name: list(points) for name, points in curves.items()}, controller.epoch,
                          steps, stopped_because, dict(wall))

    wall["setup"] += time.perf_counter() - t0
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
                raise TrainingError(f"loss is {loss} at step {steps + 1} (epoch {epoch}, "
                                    f"batch {k + 1} of {per_epoch}, lr {lr:.3g}); stopped; {kept}")
            steps += 1
            losses.append(loss)
            if record_steps:
                curves[STEP_CURVE].append(loss)
            if progress is not None:
                progress(_bar(framework, seed, epoch, k + 1, per_epoch, loss))
        wall["train"] += time.perf_counter() - t1
        t2 = time.perf_counter()
        metrics = _evaluate(trainer, data, recipe, losses)
        if epoch_hook is not None:
            epoch_hook(epoch, trainer)
        wall["evaluate"] += time.perf_counter() - t2
        decision = controller.end_epoch({k: v for k, v in metrics.items() if not k.startswith("test_")})
        curves["lr"].append(lr)
        for name in CURVES[1:]:
            curves[name].append(float(metrics[name]))
        stopped_because = decision.reason if decision.stop else ""
        if progress is not None:
            progress("")
        log(f"[{framework} seed {seed}] epoch {epoch + 1}/{recipe.max_epochs} step {steps} "
            f"lr {lr:.3g} train_loss {metrics['train_loss']:.4f} val_loss {metrics['val_loss']:.4f} "
            f"val_acc {metrics['val_accuracy']:.4f} test_acc {metrics['test_accuracy']:.4f}"
            + (f"  ({decision.reason})" if decision.reason else ""))
        if checkpoint_dir is not None:
            t3 = time.perf_counter()
            checkpoint.save(checkpoint_dir, spec, recipe, trainer, controller, recorded().to_dict(),
                            data.name)
            wall["checkpoint"] += time.perf_counter() - t3
    return recorded(), trainer


def _evaluate(trainer: Any, data: Dataset, recipe: TrainSpec, losses: list[float]) -> dict[str, float]:
    """The epoch's metrics: mean training loss, validation and test loss and accuracy (and the
    training accuracy when the schedule watches it)."""
    metrics = {"train_loss": float(np.mean(losses))}
    metrics["val_loss"], metrics["val_accuracy"] = (
        trainer.evaluate(data.val.images, data.val.labels) if len(data.val) else (math.nan, math.nan))
    metrics["test_loss"], metrics["test_accuracy"] = trainer.evaluate(data.test.images, data.test.labels)
    if "train_accuracy" in (recipe.plateau_metric, recipe.early_stop_metric):
        _, metrics["train_accuracy"] = trainer.evaluate(data.train.images, data.train.labels)
    return metrics


def _bar(framework: str, seed: int, epoch: int, done: int, total: int, loss: float) -> str:
    width = 24
    filled = int(width * done / total)
    return (f"\r[{framework} seed {seed}] epoch {epoch + 1} [{'#' * filled}{'.' * (width - filled)}] "
            f"{done}/{total} loss {loss:.4f}")


def stderr_progress(line: str) -> None:
    sys.stderr.write(line if line else "\r" + " " * 78 + "\r")
    sys.stderr.flush()


# ---- checkpoints ------------------------------------------------------------------------------
def _restore(folder: Path, spec: ModelSpec, recipe: TrainSpec, trainer: Any, data: str,
             log: Callable[[str], None] | None = None) -> tuple[Controller, SeedResult]:
    controller, saved = checkpoint.restore(folder, spec, recipe, trainer, data, log)
    result = SeedResult.from_dict(saved, f"checkpoint {str(folder)!r}: result", checkpoint.CheckpointError)
    if controller.stopped and result.stopped_because.startswith("max_epochs"):
        controller.stopped = controller.epoch >= recipe.max_epochs
        result = result.replace(stopped_because="")
    return controller, result
