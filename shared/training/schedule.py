"""One learning-rate and stopping controller for every port: warm-up, reduce-on-plateau, early stop.

The ports never use a framework scheduler. Each epoch the training loop asks `lr_for_epoch()`,
sets that float into its optimizer (`Trainer.set_learning_rate`), trains, and reports the epoch's
metrics to `end_epoch()`, which decides about cuts and stopping. So the schedule exists once and
the frameworks cannot count differently (torch's, Keras' and optax's own schedulers count
warm-up, plateaus and cooldowns three different ways, below).

Counting, stated exactly (and how it differs from the libraries):
- **Warm-up**: epoch e (0-based) with e < warmup_epochs trains at lr * (e + 1) / warmup_epochs,
  so the first epoch already moves (Keras' and optax's linear schedules start at 0, where the
  first update does nothing, weight decay included; torch's LinearLR cannot start at 0).
  Plateau and early-stop counting start after warm-up: a warm-up epoch is never "bad".
- **Improvement**: `rel` mode: better than best * (1 - threshold) for a metric to minimise (best *
  (1 + threshold) to maximise), as torch's default and optax's rtol; `abs` mode: better by more
  than threshold, as Keras' min_delta (a loss of 0.01 improving 2e-5 per epoch: Keras cuts at
  epochs 3, 9, 15, torch and optax never). The best value is updated only on improvement.
- **Plateau**: `bad` counts epochs in a row without improvement; the cut happens at the end of
  the epoch where bad == patience, as Keras and optax (torch cuts one epoch later, at
  bad > patience: epochs 3, 6, 9 instead of 2, 4, 6 on a flat metric with patience 2). After a
  cut, bad is reset and the next
  `cooldown` epochs are not counted (torch's meaning; Keras' cooldown=1 changes nothing and optax
  skips one more epoch). The new lr applies from the next epoch, never to the epoch that caused it.
- **Early stop**: its own counter on its own metric, with the same improvement test (threshold 0:
  any strict improvement); stop at the end of the epoch where it reaches `early_stop_patience`
  (Keras' EarlyStopping with patience=P stops after P epochs without improvement). The last
  epoch is what is reported, never a restored best.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from shared.core.train_spec import METRICS, TrainSpec
from shared.errors import InputError

MAXIMISE = ("val_accuracy", "train_accuracy")


def improved(metric: str, value: float, best: float | None, threshold: float, mode: str) -> bool:
    """Whether `value` improves on `best` (None: nothing yet, so yes)."""
    if best is None:
        return True
    sign = -1.0 if metric in MAXIMISE else 1.0  # compare as a quantity to minimise
    v, b = sign * value, sign * best
    if mode == "rel":
        return v < b - abs(b) * threshold
    return v < b - threshold


@dataclass
class Decision:
    """What the controller decided at the end of an epoch."""

    stop: bool
    reason: str = ""


@dataclass
class Controller:
    recipe: TrainSpec
    epoch: int = 0  # the epoch about to be trained (0-based)
    lr: float = field(init=False)  # the post-warm-up lr, lowered by plateau cuts
    plateau_best: float | None = None
    plateau_bad: int = 0
    cooldown_left: int = 0
    stop_best: float | None = None
    stop_bad: int = 0
    stopped: bool = False
    cuts: list[int] = field(default_factory=list)  # epochs at whose end the lr was cut

    def __post_init__(self) -> None:
        self.lr = self.recipe.learning_rate

    def lr_for_epoch(self) -> float:
        """The float learning rate for the epoch about to be trained."""
        w = self.recipe.warmup_epochs
        if self.epoch < w:
            return self.lr * (self.epoch + 1) / w
        return self.lr

    def end_epoch(self, metrics: dict[str, float]) -> Decision:
        """Report the finished epoch's metrics; returns the decision (and advances the epoch)."""
        r = self.recipe
        for name in {r.plateau_metric, r.early_stop_metric}:
            if name not in metrics:
                raise InputError(
                    f"schedule: metric {name!r} was not reported (got {', '.join(sorted(metrics))}); "
                    f"expected one of {', '.join(METRICS)}"
                )
        bad = next((k for k, v in metrics.items() if not math.isfinite(float(v))), None)
        if bad is not None:
            raise InputError(f"schedule: metric {bad!r} is {metrics[bad]} at epoch {self.epoch}")
        stop = False
        reason = ""
        if self.epoch >= r.warmup_epochs:
            if self._plateau(float(metrics[r.plateau_metric])):
                reason = f"{r.plateau_metric} flat for {r.plateau_patience} epochs: lr -> {self.lr:.3g}"
            stop = self._early_stop(float(metrics[r.early_stop_metric]))
            if stop:
                reason = f"{r.early_stop_metric} flat for {r.early_stop_patience} epochs: early stop"
        self.epoch += 1
        if self.epoch >= r.max_epochs and not stop:
            stop, reason = True, f"max_epochs = {r.max_epochs} reached"
        self.stopped = stop
        return Decision(stop, reason)

    def _plateau(self, value: float) -> bool:
        r = self.recipe
        if improved(r.plateau_metric, value, self.plateau_best, r.plateau_threshold,
                    r.plateau_threshold_mode):
            self.plateau_best, self.plateau_bad = value, 0
            return False
        if self.cooldown_left > 0:
            self.cooldown_left -= 1
            return False
        self.plateau_bad += 1
        if self.plateau_bad < r.plateau_patience or r.plateau_factor >= 1.0:
            return False
        new_lr = max(self.lr * r.plateau_factor, r.min_learning_rate)
        self.plateau_bad, self.cooldown_left = 0, r.plateau_cooldown
        if new_lr >= self.lr:
            return False  # already at min_learning_rate
        self.lr = new_lr
        self.cuts.append(self.epoch)
        return True

    def _early_stop(self, value: float) -> bool:
        r = self.recipe
        if r.early_stop_patience is None:
            return False
        if improved(r.early_stop_metric, value, self.stop_best, 0.0, "abs"):
            self.stop_best, self.stop_bad = value, 0
            return False
        self.stop_bad += 1
        return self.stop_bad >= r.early_stop_patience

    # ---- checkpointing ----------------------------------------------------------------------
    def state(self) -> dict[str, object]:
        return {"epoch": self.epoch, "lr": self.lr, "plateau_best": self.plateau_best,
                "plateau_bad": self.plateau_bad, "cooldown_left": self.cooldown_left,
                "stop_best": self.stop_best, "stop_bad": self.stop_bad, "stopped": self.stopped,
                "cuts": list(self.cuts)}

    @classmethod
    def from_state(cls, recipe: TrainSpec, state: dict[str, object]) -> Controller:
        c = cls(recipe)
        for key, value in state.items():
            setattr(c, key, list(value) if key == "cuts" else value)  # type: ignore[arg-type]
        return c
