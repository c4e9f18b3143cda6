"""Class 11, a full disk leaves nothing partial under a user's name: every output is staged and
fsynced before anything is published (shared/core/files.py `Outputs`), so `time`, `init`,
`train` (its checkpoints and its --json/--png) and `convert --to hf` on a full filesystem end in
one line, exit 2, with the folder exactly as it was. The line names the output the user asked for
(a checkpoint's or a converted folder's file as it would be published), never the temporary or
the staging folder it was being written in. The disk is a real 1 MiB tmpfs, nearly
filled, where this process may mount one (root, as CI runs); elsewhere the same ENOSPC is raised
by fsync for files in that folder. `test_the_disk_is_real_where_it_can_be` says which ran."""

from __future__ import annotations

import errno
import os
import subprocess
import threading
from pathlib import Path

import pytest

from tests.adversarial import run_cli, snapshot

Q = ["--spec", "quadrant"]
FAST = [*Q, "--modes", "eager", "--budget", "0.02", "--min-repeats", "3", "--max-repeats", "5",
        "--warmup", "1", "--eval-batches", "1", "--batch", "4", "--frameworks", "torch"]
LEFT = 12 * 1024  # bytes left free: less than any output below


def _mount(folder: Path) -> bool:
    if os.geteuid() != 0:
        return False
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)],
                          capture_output=True)
    return done.returncode == 0


@pytest.fixture
def disk(tmp_path: Path, monkeypatch) -> Path:
    folder = tmp_path / "disk"
    folder.mkdir()
    if _mount(folder):
        free = os.statvfs(folder).f_bavail * os.statvfs(folder).f_frsize
        (folder / "filler").write_bytes(b"\0" * (free - LEFT))
        yield folder
        subprocess.run(["umount", "-l", str(folder)], check=True)
        return
    real_fsync, root = os.fsync, os.path.realpath(folder)

    def full(fd: int) -> None:  # the error a full disk gives at the latest here
        if os.path.realpath(os.readlink(f"/proc/self/fd/{fd}")).startswith(root + os.sep):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", full)
    (folder / "filler").write_bytes(b"\0" * 1000)
    yield folder


def _entries(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def full_disk_refused(folder: Path, *argv: str, cwd: Path, names: str) -> str:
    """The refusal, which must say that `names` (a path under `folder`) cannot be written."""
    before, entries = snapshot(folder), _entries(folder)
    outcome = run_cli(*argv, cwd=cwd)
    assert outcome.code == 2, (outcome.code, outcome.stderr)
    line = outcome.error
    assert f"{str(folder / names)!r} cannot be written: No space left on device" in line, line
    assert ".tmp" not in line and ".staging" not in line, line  # the output, not where it was staged
    assert snapshot(folder) == before and _entries(folder) == entries  # nothing partial, no temporary
    return line


def test_the_disk_is_real_where_it_can_be(disk: Path) -> None:
    """Either a real full tmpfs (root) or the simulated ENOSPC is in force, never neither."""
    mounted = any(line.split()[1] == str(disk) for line in Path("/proc/mounts").read_text().splitlines())
    assert mounted or os.fsync.__name__ == "full"
    if mounted:
        assert os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize <= LEFT


def test_init_on_a_full_disk(disk: Path, tmp_path: Path) -> None:
    full_disk_refused(disk, "init", *Q, "--out", str(disk / "w.safetensors"), cwd=tmp_path,
                      names="w.safetensors")


def test_time_on_a_full_disk_writes_none_of_its_outputs(disk: Path, tmp_path: Path) -> None:
    full_disk_refused(disk, "time", *FAST, "--frameworks", "torch", "--json", str(disk / "r.json"), "--html",
                      str(disk / "r.html"), cwd=tmp_path, names="r.json")


def test_the_main_job_on_a_full_disk(disk: Path, tmp_path: Path) -> None:
    full_disk_refused(disk, "main", *FAST, "--frameworks", "torch", "--json", str(disk / "sub" / "r.json"),
                      cwd=tmp_path, names="sub/r.json")


def test_train_checkpoints_on_a_full_disk(disk: Path, tmp_path: Path) -> None:
    full_disk_refused(disk, "train", *Q, "--framework", "torch", "--epochs", "1", "--quiet",
                      "--checkpoints", str(disk / "ck"), cwd=tmp_path,
                      names="ck/seed0/epoch-000001/weights.safetensors")


def test_train_json_on_a_full_disk(disk: Path, tmp_path: Path) -> None:
    full_disk_refused(disk, "train", *Q, "--framework", "torch", "--epochs", "1", "--quiet",
                      "--checkpoints", str(tmp_path / "ck"), "--json", str(disk / "t.json"), cwd=tmp_path,
                      names="t.png")  # the JSON fits in what is left; the curves beside it do not


def test_convert_to_hf_on_a_full_disk(disk: Path, tmp_path: Path) -> None:
    assert run_cli("init", *Q, "--out", "w.safetensors", cwd=tmp_path).code == 0
    full_disk_refused(disk, "convert", "--to", "hf", "--in", str(tmp_path / "w.safetensors"), "--out",
                      str(disk / "hf"), cwd=tmp_path, names="hf/model.safetensors")


def test_when_the_second_output_fails_the_first_is_not_published(tmp_path: Path, monkeypatch) -> None:
    """The transaction itself: the JSON's temporary fits, the CSV's does not."""
    from shared.core import files

    real_stage, calls = files._stage, []

    def second_fails(path: Path, data: bytes) -> Path:
        if threading.current_thread() is not threading.main_thread():  # a background task writing its
            return real_stage(path, data)  # own file meanwhile (tests/background.py): not this command's
        calls.append(path.name)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_stage(path, data)

    monkeypatch.setattr(files, "_stage", second_fails)
    (tmp_path / "keep.txt").write_text("kept")
    before = snapshot(tmp_path)
    outcome = run_cli("time", *FAST, "--frameworks", "torch", "--json", "r.json", cwd=tmp_path)
    assert outcome.code == 2 and "No space left on device" in outcome.error
    assert calls == ["r.json", "r.csv"] and snapshot(tmp_path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]
