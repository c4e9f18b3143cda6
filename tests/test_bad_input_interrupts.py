"""Class 6, interrupts leave a consistent checkpoint: the weights, both Adam moments and
state.json of an epoch appear as one unit. An interrupt at any moment of a save (simulated at
every file), and a real SIGTERM or SIGINT to `compare.py train` at several moments, leave the
last complete unit and no temporary files, and `--resume` continues from it to the same weights
as an uninterrupted run."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from shared.core.presets import get_preset
from shared.core.train_spec import get_recipe
from shared.core.weights import load_weights
from shared.training import checkpoint
from shared.training.data import load_dataset
from shared.training.trainloop import train_seed
from tests import background

ROOT = Path(__file__).resolve().parents[1]
SPEC = get_preset("quadrant")


def consistent(folder: Path) -> Path:
    """The folder holds the complete unit a resume continues from and nothing temporary: after a
    finished save that unit alone, named by LATEST; after an interrupt between placing a unit and
    naming it, also the unit before it, which LATEST still names (or no LATEST, on the first);
    after one between naming it and removing what it superseded, also that unit, whole."""
    unit = checkpoint.latest_unit(folder)
    assert unit is not None
    names = {p.name for p in folder.iterdir()}
    pointer = (folder / checkpoint.LATEST).read_text() if checkpoint.LATEST in names else None
    older = names - {checkpoint.LATEST, unit.name}
    assert pointer is not None or not older
    assert len(older) <= 1 and all(checkpoint.UNIT.match(name) for name in older), names
    for kept in [unit, *(folder / name for name in older)]:
        assert sorted(p.name for p in kept.iterdir()) == sorted([*checkpoint.MOMENTS, "state.json"])
    if older and pointer != unit.name:  # not yet named: LATEST still names the one before
        assert older == {pointer}, names
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
    # During a file of the unit: epoch 1 is still the unit, nothing half-written. During the
    # pointer: epoch 2 is complete and in place, so it is kept and a resume continues from it.
    assert consistent(folder) == (before if moment < 5 else folder / "epoch-000002")
    monkeypatch.undo()
    result, _ = train(folder, 2, resume=True)
    assert result.epochs == 2 and consistent(folder).name == "epoch-000002"


@pytest.mark.parametrize("during", ["mkdtemp", "discard"])
def test_an_interrupt_inside_a_staging_step_leaves_no_staging_folder(
        tmp_path: Path, during: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A signal can land inside the mkdtemp that makes the staging folder (before `save` holds its
    name) or inside the removal of a superseded unit: either leaves no temporary behind."""
    folder = tmp_path / "ck"
    train(folder, 1)
    real_mkdtemp, real_rmtree, landed = tempfile.mkdtemp, shutil.rmtree, []

    def mkdtemp(*args, **kwargs) -> str:  # the folder exists, its name not yet returned
        path = real_mkdtemp(*args, **kwargs)
        if during == "mkdtemp" and not landed:
            landed.append(path)
            raise KeyboardInterrupt
        return path

    def rmtree(path, ignore_errors: bool = False) -> None:  # the superseded unit moved, not removed
        if during == "discard" and not landed and "-old-" in Path(path).name:
            landed.append(path)
            raise KeyboardInterrupt
        real_rmtree(path, ignore_errors=ignore_errors)

    monkeypatch.setattr(checkpoint, "tempfile", SimpleNamespace(mkdtemp=mkdtemp))
    monkeypatch.setattr(checkpoint, "shutil", SimpleNamespace(rmtree=rmtree))
    with pytest.raises(KeyboardInterrupt):
        train(folder, 2, resume=True)
    assert landed
    assert consistent(folder).name == ("epoch-000001" if during == "mkdtemp" else "epoch-000002")


def run_train(folder: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(ROOT / "compare.py"), "train", "--spec", "quadrant",
                             "--framework", "torch", "--epochs", "10", "--quiet", "--checkpoints",
                             str(folder), *extra], env=background.ENVIRON, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@background.task("signals-then-resume", "test_bad_input_interrupts.py::test_signals_at_several")
def signals_then_resume(start: background.Start) -> None:
    """Three `train` runs interrupted at different moments after a save, then a resume: the end
    is bit-identical to an uninterrupted run. In the background (tests/background.py): it is a
    minute of training processes the test itself only waits for."""
    tmp_path = Path(tempfile.mkdtemp(prefix="portbench-signals-"))
    whole = tmp_path / "whole"
    assert start(run_train(whole)).wait(timeout=300) == 0
    expected = load_weights(consistent(whole / "seed0") / "weights.safetensors", SPEC).tensors
    folder = tmp_path / "interrupted"

    def newest() -> Path | None:  # a listing, not a proof: polled, it must not compete for the CPU
        found = checkpoint.units(folder / "seed0")
        return found[-1] if found else None

    for signum, delay in ((signal.SIGTERM, 0.0), (signal.SIGINT, 0.15), (signal.SIGTERM, 0.4)):
        started_at = newest()
        proc = start(run_train(folder, "--resume"))
        deadline = time.monotonic() + 240
        while newest() in (None, started_at):  # until it saved anew (a unit appears whole, by a rename)
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
    assert start(run_train(folder, "--resume")).wait(timeout=300) == 0
    got = load_weights(consistent(folder / "seed0") / "weights.safetensors", SPEC).tensors
    assert all(np.array_equal(got[name], expected[name]) for name in expected)  # bit-identical


def test_signals_at_several_moments_then_resume_equals_uninterrupted() -> None:
    background.result("signals-then-resume")  # its assertions, raised here if one failed


# ---- workers die with portbench; a signal removes temporaries; a SIGKILL's are cleaned later ----
def workers_of(parent: int) -> list[int]:
    """Live processes started by the launcher of process `parent` (their PORTBENCH_PARENT_PID)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if f"PORTBENCH_PARENT_PID={parent}".encode() in environ and state != "Z":
            found.append(int(entry.name))
    return found


def wait_for(condition, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


BIG_INIT = ["init", "--spec", "vit-b16", "--out", "w.safetensors"]  # ~350 MB: seconds of writing
FAST = ["--spec", "quadrant", "--modes", "eager", "--budget", "0.02", "--min-repeats", "3", "--max-repeats",
        "5", "--warmup", "1", "--eval-batches", "1", "--batch", "4"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_a_signal_to_time_leaves_no_worker_running(tmp_path: Path, signum: int) -> None:
    import os

    command = [sys.executable, str(ROOT / "compare.py"), "time", *FAST, "--frameworks", "torch", "--json",
               "r.json"]
    proc = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PORTBENCH_TEST_FAULT": "torch:hang"})
    wait_for(lambda: workers_of(proc.pid))
    workers = workers_of(proc.pid)
    proc.send_signal(signum)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == (-signal.SIGKILL if signum == signal.SIGKILL else 130), stderr
    if signum != signal.SIGKILL:
        assert stderr.strip().splitlines()[-1] == "error: interrupted" and "Traceback" not in stderr
    wait_for(lambda: not any(Path(f"/proc/{w}").exists() and w in workers_of(proc.pid) for w in workers), 10)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no output, no temporary


def _stale(folder: Path, target: str) -> tuple[Path, Path, Path]:
    """A temporary of `target` whose writer is dead, one whose writer lives, one of another file."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    import os

    return (folder / f".{target}.{dead.pid}.k1ll3d_.tmp", folder / f".{target}.{os.getppid()}.alive1.tmp",
            folder / f".other.{dead.pid}.k1ll3d_.tmp")


def test_a_killed_writers_temporary_is_removed_when_the_same_output_is_written(tmp_path: Path) -> None:
    from tests.adversarial import run_cli

    dead, alive, other = _stale(tmp_path, "w.safetensors")
    for path in (dead, alive, other):
        path.write_bytes(b"partial")
    assert run_cli("init", "--spec", "quadrant", "--out", "w.safetensors", cwd=tmp_path).code == 0
    assert not dead.exists() and alive.exists() and other.exists()  # only that target's, writer dead


def test_sigterm_during_init_removes_its_temporary(tmp_path: Path) -> None:
    command = [sys.executable, str(ROOT / "compare.py"), *BIG_INIT]
    proc = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: any(p.name.endswith(".tmp") for p in tmp_path.iterdir()) or proc.poll() is not None)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    if proc.returncode == 0:
        pytest.fail("init finished before the signal: make the spec bigger")
    assert proc.returncode == 130 and stderr.strip().splitlines()[-1] == "error: interrupted", stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_sigkill_during_init_leaves_a_temporary_the_next_init_removes(tmp_path: Path) -> None:
    command = [sys.executable, str(ROOT / "compare.py"), *BIG_INIT]
    proc = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for(lambda: any(p.name.endswith(".tmp") for p in tmp_path.iterdir()) or proc.poll() is not None)
    proc.kill()
    proc.wait(timeout=60)
    left = [p.name for p in tmp_path.iterdir()]
    assert len(left) == 1 and left[0].startswith(f".w.safetensors.{proc.pid}."), left
    from tests.adversarial import run_cli

    assert run_cli("init", "--spec", "quadrant", "--out", "w.safetensors", cwd=tmp_path).code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.safetensors"]
