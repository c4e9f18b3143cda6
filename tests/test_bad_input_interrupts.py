"""Class 6, interrupts leave a consistent checkpoint: the weights, both Adam moments and
state.json of an epoch appear as one unit. An interrupt at any moment of a save (simulated at
every file), and a real SIGTERM or SIGINT to `compare.py train` at several moments, leave the
last complete unit and no temporary files, and `--resume` continues from it to the same weights
as an uninterrupted run."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from shared.core.presets import get_preset
from shared.core.weights import load_weights
from shared.training import checkpoint
from shared.training.data import load_dataset
from shared.training.train_spec import get_recipe
from shared.training.trainloop import train_seed

ROOT = Path(__file__).resolve().parents[1]
SPEC = get_preset("quadrant")


def consistent(folder: Path) -> Path:
    """The folder holds exactly one complete unit, named by LATEST, and nothing temporary."""
    unit = checkpoint.latest_unit(folder)
    assert unit is not None
    assert sorted(p.name for p in folder.iterdir()) == sorted([checkpoint.LATEST, unit.name])
    assert sorted(p.name for p in unit.iterdir()) == sorted([*checkpoint.MOMENTS, "state.json"])
    return unit


def train(folder: Path, epochs: int, resume: bool = False):
    recipe = get_recipe("quick").replace(max_epochs=epochs)
    data = load_dataset("quadrant", SPEC, recipe.validation_fraction, 0)
    return train_seed("torch", SPEC, recipe, data, 0, checkpoint_dir=folder, resume=resume,
                      log=lambda line: None)


@pytest.mark.parametrize("moment", [1, 2, 3, 4, 5])  # during each file of the unit, or the pointer
def test_an_interrupt_during_a_save_keeps_the_previous_unit(tmp_path: Path, moment: int,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "ck"
    train(folder, 1)
    before = consistent(folder)
    writes = {"n": 0}
    real_save, real_write = checkpoint.save_weights, checkpoint.write_output

    def counted(real):
        def call(*args, **kwargs):
            writes["n"] += 1
            if writes["n"] == moment:
                raise KeyboardInterrupt
            return real(*args, **kwargs)
        return call

    monkeypatch.setattr(checkpoint, "save_weights", counted(real_save))
    monkeypatch.setattr(checkpoint, "write_output", counted(real_write))
    with pytest.raises(KeyboardInterrupt):
        train(folder, 2, resume=True)
    assert consistent(folder) == before  # epoch 1 is still the unit, nothing half-written
    monkeypatch.undo()
    result, _ = train(folder, 2, resume=True)
    assert result.epochs == 2 and consistent(folder).name == "epoch-000002"


def run_train(folder: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(ROOT / "compare.py"), "train", "--spec", "quadrant",
                             "--framework", "torch", "--epochs", "10", "--quiet", "--checkpoints",
                             str(folder), *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_signals_at_several_moments_then_resume_equals_uninterrupted(tmp_path: Path) -> None:
    whole = tmp_path / "whole"
    assert run_train(whole).wait(timeout=300) == 0
    expected = load_weights(consistent(whole / "seed0") / "weights.safetensors", SPEC).tensors
    folder = tmp_path / "interrupted"
    for signum, delay in ((signal.SIGTERM, 0.0), (signal.SIGINT, 0.15), (signal.SIGTERM, 0.4)):
        started_at = checkpoint.latest_unit(folder / "seed0")
        proc = run_train(folder, "--resume")
        deadline = time.monotonic() + 240
        while checkpoint.latest_unit(folder / "seed0") in (None, started_at):  # until it saved anew
            if proc.poll() is not None:
                break
            assert time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(delay)
        proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=120)
        if proc.returncode == 0:
            break  # it finished before the signal landed: nothing left to interrupt
        assert proc.returncode == 130 and "Traceback" not in stderr, stderr
        assert stderr.strip().splitlines()[-1] == "error: interrupted"
        consistent(folder / "seed0")
    assert run_train(folder, "--resume").wait(timeout=300) == 0
    got = load_weights(consistent(folder / "seed0") / "weights.safetensors", SPEC).tensors
    assert all(np.array_equal(got[name], expected[name]) for name in expected)  # bit-identical
