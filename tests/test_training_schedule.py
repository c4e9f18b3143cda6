"""The one warm-up / plateau / early-stop controller (shared/training/schedule.py) on synthetic metric
sequences. Expected epochs are worked out by hand from the counting rules in its docstring, and
compared in comments with what torch, Keras and optax would do."""

from __future__ import annotations

import pytest

from shared.core.train_spec import TrainSpec
from shared.errors import InputError, SpecError
from shared.training.schedule import Controller

BASE = TrainSpec(learning_rate=1.0, warmup_epochs=0, plateau_metric="val_loss", plateau_factor=0.5,
                 plateau_patience=2, plateau_threshold=0.0, plateau_threshold_mode="abs",
                 plateau_cooldown=0, min_learning_rate=0.0, early_stop_metric="val_loss",
                 early_stop_patience=None, max_epochs=100)


def drive(recipe: TrainSpec, values: list[float]) -> tuple[list[float], Controller, list[bool]]:
    c, used, stops = Controller(recipe), [], []
    for v in values:
        used.append(c.lr_for_epoch())
        stops.append(c.end_epoch({"val_loss": v, "val_accuracy": 1 - v}).stop)
        if c.stopped:
            break
    return used, c, stops


def test_warmup_is_a_linear_ramp_that_starts_above_zero() -> None:
    used, _, _ = drive(BASE.replace(warmup_epochs=4), [1.0 - 0.1 * i for i in range(6)])
    assert used == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]  # Keras/optax would start at 0


def test_plateau_cuts_when_bad_epochs_reach_patience() -> None:
    used, c, _ = drive(BASE, [1.0] * 7)
    assert c.cuts == [2, 4, 6]  # as Keras and optax; torch would cut at 3, 6
    assert used == [1.0, 1.0, 1.0, 0.5, 0.5, 0.25, 0.25]  # a cut applies from the next epoch


def test_cooldown_skips_epochs_after_a_cut() -> None:
    _, c, _ = drive(BASE.replace(plateau_cooldown=1), [1.0] * 9)
    assert c.cuts == [2, 5, 8]  # Keras' cooldown=1 would change nothing


def test_warmup_epochs_are_never_bad() -> None:
    _, c, _ = drive(BASE.replace(warmup_epochs=2), [1.0] * 5)
    assert c.cuts == [4]  # epoch 2 sets the best, 3 and 4 are bad


def test_relative_and_absolute_thresholds_differ_as_documented() -> None:
    slow = [0.01 - 2e-5 * i for i in range(8)]  # loss 0.01 improving 2e-5 per epoch
    _, rel, _ = drive(BASE.replace(plateau_threshold=1e-4, plateau_threshold_mode="rel"), slow)
    _, ab, _ = drive(BASE.replace(plateau_threshold=1e-4, plateau_threshold_mode="abs"), slow)
    assert rel.cuts == []  # 2e-5 is 0.2% of 0.01 > 0.01%: an improvement, as torch and optax
    # 2e-5 < min_delta 1e-4: epochs are bad, as Keras; by epoch 6 the total gain since the best
    # (epoch 0) passes 1e-4, which counts as an improvement, so no third cut.
    assert ab.cuts == [2, 4]


def test_min_learning_rate_is_a_floor() -> None:
    used, _, _ = drive(BASE.replace(min_learning_rate=0.3), [1.0] * 9)
    assert min(used) == 0.3


def test_early_stop_after_patience_epochs_without_improvement() -> None:
    _, c, stops = drive(BASE.replace(early_stop_patience=3), [3.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    assert stops == [False, False, False, False, False, True] and c.epoch == 6


def test_early_stop_on_accuracy_maximises() -> None:
    recipe = BASE.replace(early_stop_metric="val_accuracy", early_stop_patience=2)
    _, _, stops = drive(recipe, [0.5, 0.4, 0.45, 0.45])  # accuracy 0.5, 0.6, 0.55, 0.55
    assert stops == [False, False, False, True]


def test_max_epochs_stops() -> None:
    _, _, stops = drive(BASE.replace(max_epochs=3), [1.0 - 0.1 * i for i in range(10)])
    assert stops == [False, False, True]


def test_state_round_trip_continues_identically() -> None:
    values = [1.0, 0.9, 0.9, 0.9, 0.9, 0.8, 0.8, 0.8, 0.8]
    full, _, _ = drive(BASE.replace(plateau_cooldown=1), values)
    c = Controller(BASE.replace(plateau_cooldown=1))
    used = []
    for v in values[:4]:
        used.append(c.lr_for_epoch())
        c.end_epoch({"val_loss": v, "val_accuracy": 0})
    c = Controller.from_state(c.recipe, c.state())
    for v in values[4:]:
        used.append(c.lr_for_epoch())
        c.end_epoch({"val_loss": v, "val_accuracy": 0})
    assert used == full


def test_missing_and_unknown_metrics_are_one_line_errors() -> None:
    with pytest.raises(InputError, match="metric 'val_loss' was not reported"):
        Controller(BASE).end_epoch({"train_loss": 1.0})
    with pytest.raises(SpecError, match="'plateau_metric' = 'val_los': expected one of"):
        BASE.replace(plateau_metric="val_los")
    with pytest.raises(InputError, match="is nan"):
        Controller(BASE).end_epoch({"val_loss": float("nan")})
