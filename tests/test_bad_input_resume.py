"""Class 9, a saved training run is never lost: `train --resume` continues from the last unit it
can prove complete (shared/training/checkpoint_proof.py), whatever `LATEST` says, or refuses in
one line; it never deletes a unit, and a fresh run without --force never replaces one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from shared.training import checkpoint
from tests.adversarial import refused, run_cli, snapshot

TRAIN = ["train", "--spec", "quadrant", "--framework", "torch", "--quiet", "--checkpoints", "ck"]


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    """A folder holding one complete unit (epoch 1 of quadrant/quick/torch) named in LATEST."""
    root = tmp_path_factory.mktemp("saved")
    outcome = run_cli(*TRAIN, "--epochs", "1", cwd=root)
    assert outcome.code == 0, outcome.stderr
    assert (root / "ck" / "seed0" / "LATEST").read_text() == "epoch-000001"
    return root / "ck"


@pytest.fixture
def folder(tmp_path: Path, saved: Path) -> Path:
    shutil.copytree(saved, tmp_path / "ck")
    return tmp_path


LATEST_DAMAGE = {
    "missing": None,
    "truncated": b"epoch-00",
    "garbage": b"\xff\xfe\x00../../etc/passwd",
    "empty": b"",
    "outside": b"../../victim",  # names a folder outside: never followed
}


@pytest.mark.parametrize("case", list(LATEST_DAMAGE))
def test_a_damaged_latest_resumes_from_the_last_complete_unit(folder: Path, case: str) -> None:
    pointer = folder / "ck" / "seed0" / "LATEST"
    if LATEST_DAMAGE[case] is None:
        pointer.unlink()
    else:
        pointer.write_bytes(LATEST_DAMAGE[case])
    before = snapshot(folder)
    outcome = run_cli(*TRAIN, "--epochs", "1", "--resume", cwd=folder)
    assert outcome.code == 0, outcome.stderr
    assert "resumed at epoch 1" in outcome.stdout  # not a restart from epoch 0
    assert "after 1 epochs" in outcome.stdout
    assert snapshot(folder) == before  # nothing to train: every file, the unit included, kept


def test_a_resume_that_trains_on_continues_the_unit(folder: Path) -> None:
    (folder / "ck" / "seed0" / "LATEST").unlink()
    outcome = run_cli(*TRAIN, "--epochs", "2", "--resume", cwd=folder)
    assert outcome.code == 0, outcome.stderr
    assert "resumed at epoch 1" in outcome.stdout and "after 2 epochs" in outcome.stdout
    assert checkpoint.latest_unit(folder / "ck" / "seed0").name == "epoch-000002"


@pytest.mark.parametrize("damage", ["none", "missing", "garbage"])
def test_a_fresh_run_never_replaces_a_unit_without_force(folder: Path, damage: str) -> None:
    pointer = folder / "ck" / "seed0" / "LATEST"
    if damage == "missing":
        pointer.unlink()
    elif damage == "garbage":
        pointer.write_bytes(b"\x00\x01")
    refused(folder, *TRAIN, "--epochs", "1", expect="already holds a checkpoint for seed 0")


def _state(folder: Path) -> Path:
    return folder / "ck" / "seed0" / "epoch-000001" / "state.json"


def _edit_state(folder: Path, change) -> None:
    state = json.loads(_state(folder).read_text())
    change(state)
    _state(folder).write_text(json.dumps(state))


UNIT_DAMAGE = {
    "state missing key": (lambda f: _edit_state(f, lambda s: s.pop("updates")), "lacks the field 'updates'"),
    "count as a string": (lambda f: _edit_state(f, lambda s: s.update(updates="7")),
                          "field 'updates' is a string, expected a whole number"),
    "epoch as a string": (lambda f: _edit_state(f, lambda s: s["controller"].update(epoch="1")),
                          "field 'controller.epoch' is a string"),
    "negative count": (lambda f: _edit_state(f, lambda s: s["result"].update(steps=-3)),
                       "field 'result.steps' is -3, expected >= 0"),
    "negative learning rate": (lambda f: _edit_state(f, lambda s: s["controller"].update(lr=-1.0)),
                               "field 'controller.lr' is -1.0, expected a finite number > 0"),  # trained on
    "rate above the recipe's": (lambda f: _edit_state(f, lambda s: s["controller"].update(lr=1e3)),
                                "field 'controller.lr' is 1000.0, expected at most the recipe's"),
    "unknown controller field": (lambda f: _edit_state(f, lambda s: s["controller"].update(port=1)),
                                 "unknown field 'controller.port'"),
    "deep nesting": (lambda f: _state(f).write_text("[" * 100_000 + "]" * 100_000), "nested too deeply"),
    "state not json": (lambda f: _state(f).write_bytes(b"\x00garbage"), "state.json"),
    "state removed": (lambda f: _state(f).unlink(), "has no state.json"),
    "weights truncated": (lambda f: _truncate(_moment(f)), "truncated or damaged"),
    "weights from another epoch": (lambda f: _edit_state(f, lambda s: s["controller"].update(epoch=7)),
                                   "is from epoch '1', state.json from epoch '7'"),
    # The first was an internal error (IndexError); the second read as complete.
    "weights with empty offsets": (lambda f: _edit_header(f, lambda h: next(iter(h.values())).update(
        data_offsets=[])), "expected lists of non-negative integers"),
    "weights with bytes no tensor owns": (lambda f: _append(f, b"\0" * 8), "but its tensors end at byte"),
}


def _moment(folder: Path) -> Path:
    return folder / "ck" / "seed0" / "epoch-000001" / "adam_v.safetensors"


def _edit_header(folder: Path, change) -> None:
    blob = _moment(folder).read_bytes()
    length = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8:8 + length])
    change({k: v for k, v in header.items() if k != "__metadata__"})
    text = json.dumps(header).encode()
    _moment(folder).write_bytes(len(text).to_bytes(8, "little") + text + blob[8 + length:])


def _append(folder: Path, extra: bytes) -> None:
    _moment(folder).write_bytes(_moment(folder).read_bytes() + extra)


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-10])


@pytest.mark.parametrize("case", list(UNIT_DAMAGE))
def test_a_unit_that_cannot_be_proven_complete_is_refused_and_kept(folder: Path, case: str) -> None:
    damage, expect = UNIT_DAMAGE[case]
    damage(folder)
    line = refused(folder, *TRAIN, "--epochs", "2", "--resume", expect=expect)
    assert "holds no unit that can be proven complete" in line and "nothing was changed" in line


def test_a_recipe_rate_past_float_range_is_refused_in_one_line(folder: Path) -> None:
    """The proof compared the resumed rate with the recipe's times (1 + 1e-9): an OverflowError,
    reported as a portbench bug, for a rate no float holds."""
    _edit_state(folder, lambda s: s["recipe"].update(learning_rate=10**400))
    refused(folder, *TRAIN, "--epochs", "2", "--resume", expect="expected a number within float range")


def test_a_resume_in_another_framework_or_on_other_data_is_refused(folder: Path) -> None:
    """A unit records the framework and the dataset it was trained in: a run continued in another
    was reported as one run of the new framework (its curves half torch's)."""
    unit = str(Path("ck") / "seed0" / "epoch-000001")
    assert json.loads(_state(folder).read_text())["framework"] == "torch"
    resumed = [*TRAIN[:4], "mlx", *TRAIN[5:], "--epochs", "2", "--resume"]
    refused(folder, *resumed, expect=f"checkpoint {unit!r} was trained with framework 'torch', not 'mlx'; "
            "resume with the same --framework or use another --checkpoints folder")
    _edit_state(folder, lambda s: s.update(data="digits"))
    refused(folder, *TRAIN, "--epochs", "2", "--resume",
            expect="was trained with data 'digits', not 'quadrant'; resume with the same --data")
    _edit_state(folder, lambda s: s.update(data=3))
    refused(folder, *TRAIN, "--epochs", "2", "--resume",
            expect="field 'data' is the number 3, expected a string")


@pytest.mark.parametrize(("change", "expect"), [
    (lambda r: r["curves"].update(lr=[]), "result.curves.lr has 0 points, expected one per epoch (1)"),
    (lambda r: r["curves"].update(grad_norm=[1.0]), "result.curves has unknown key(s) ['grad_norm']"),
    (lambda r: r["wall_s"].update(train=-1.0), "result.wall_s.train is -1.0, expected a non-negative number"),
])
def test_a_proven_unit_whose_result_is_not_a_seed_result_is_refused(folder: Path, change, expect) -> None:
    """The unit is complete, but its `result` is read back as the SeedResult it was written from
    (shared/training/trainloop.py), which names the path of what is wrong in one line."""
    _edit_state(folder, lambda s: change(s["result"]))
    line = refused(folder, *TRAIN, "--epochs", "2", "--resume", expect=expect)
    assert line.startswith(f"error: checkpoint {str(Path('ck') / 'seed0')!r}: result"), line


def test_a_later_incomplete_unit_is_not_written_over(folder: Path) -> None:
    later = folder / "ck" / "seed0" / "epoch-000002"
    later.mkdir()
    shutil.copy(folder / "ck" / "seed0" / "epoch-000001" / "weights.safetensors", later)
    refused(folder, *TRAIN, "--epochs", "3", "--resume", expect="epoch-000002' has no adam_m.safetensors")


def test_latest_without_any_unit_is_refused(tmp_path: Path) -> None:
    (tmp_path / "ck" / "seed0").mkdir(parents=True)
    (tmp_path / "ck" / "seed0" / "LATEST").write_text("epoch-000004")
    refused(tmp_path, *TRAIN, "--epochs", "1", "--resume", expect="has a LATEST but no epoch-NNNNNN unit")
    refused(tmp_path, *TRAIN, "--epochs", "1", expect="already holds a checkpoint")


def test_force_starts_over_and_leaves_only_the_new_run(folder: Path) -> None:
    outcome = run_cli(*TRAIN, "--epochs", "1", "--force", "--seeds", "0", cwd=folder)
    assert outcome.code == 0, outcome.stderr
    assert "resumed" not in outcome.stdout
    assert sorted(p.name for p in (folder / "ck" / "seed0").iterdir()) == ["LATEST", "epoch-000001"]


def test_a_staging_folder_of_a_dead_writer_is_removed_and_a_live_ones_kept(folder: Path) -> None:
    import os
    import subprocess
    import sys

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    seed = folder / "ck" / "seed0"
    (seed / f".staging-{dead.pid}-abc").mkdir()
    (seed / f".staging-{os.getpid()}-abc").mkdir()  # a writer still running (this process)
    checkpoint.tidy(seed)
    assert not (seed / f".staging-{dead.pid}-abc").exists()
    assert (seed / f".staging-{os.getpid()}-abc").exists() and (seed / "epoch-000001").is_dir()


def test_a_resume_to_fewer_epochs_than_the_unit_has_is_refused(tmp_path: Path) -> None:
    """It resumed and wrote a result of 2 epochs under a recipe of max_epochs 1, exit 0."""
    assert run_cli(*TRAIN, "--epochs", "2", cwd=tmp_path).code == 0
    refused(tmp_path, *TRAIN, "--epochs", "1", "--resume",
            expect="has trained 2 epochs, more than max_epochs 1: resume with --epochs 2 or more")
