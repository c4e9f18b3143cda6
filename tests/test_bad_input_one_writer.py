"""Two runs at once, each keeping what it made: one `train` folder has one writer (a second run
into it is refused in one line naming the owner, a lock left by a run that is gone is taken over
with a note), and two `time` runs with default outputs started in the same second each write
their own results. The second run starts while the first is inside its work (a step the first
calls runs it, in-process), so the interleaving is the one that lost results, every time."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from shared.training.writer_lock import LOCK, hold, owner_record
from tests.adversarial import refused, run_cli, snapshot

Q = ["--spec", "quadrant"]
TRAIN = ["train", *Q, "--framework", "torch", "--epochs", "1", "--quiet", "--checkpoints", "ck"]


def saved_recipe(folder: Path) -> str:
    """The recipe name in the one complete unit of `folder` (a seed's checkpoints)."""
    (unit,) = [p for p in folder.iterdir() if p.name.startswith("epoch-")]
    return json.loads((unit / "state.json").read_text())["recipe"]["name"]


def test_a_second_train_run_into_the_same_folder_is_refused(tmp_path: Path, monkeypatch) -> None:
    """Run B (recipe archive) starts while run A (recipe quick) trains into `ck`: B is refused,
    naming A; A finishes and its checkpoint is whole (before, each deleted the other's unit)."""
    from shared.cli import train as train_cli

    real, started, second = train_cli.train_seeds, [], []

    def second_run_meanwhile(*args, **kwargs):
        if not started:  # the first run's training, not the second's, starts the second
            started.append(True)
            second.append(run_cli(*TRAIN, "--recipe", "archive", "--seeds", "0,1", cwd=tmp_path))
        return real(*args, **kwargs)

    monkeypatch.setattr(train_cli, "train_seeds", second_run_meanwhile)
    first = run_cli(*TRAIN, cwd=tmp_path)
    assert first.code == 0, first.stderr
    (refused,) = second
    assert refused.code == 2
    line = refused.error
    assert line.startswith("error: --checkpoints 'ck' is in use by another train run (pid "), line
    for part in (f"on host {socket.gethostname()!r}", "started 20", "recipe 'quick'", "spec 'quadrant'",
                 "framework 'torch'", "seeds '0'", "one train folder has one writer"):
        assert part in line, (part, line)
    assert saved_recipe(tmp_path / "ck" / "seed0") == "quick"
    assert not (tmp_path / "ck" / "seed1").exists() and not (tmp_path / "ck" / LOCK).exists()


def dead_pid() -> int:
    """The pid of a process of this host that has ended (waited for: not a zombie)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_lock_left_by_a_run_that_is_gone_is_taken_over_with_a_note(tmp_path: Path) -> None:
    (tmp_path / "ck").mkdir()
    record = {"pid": dead_pid(), "host": socket.gethostname(), "started": "2026-01-02T03:04:05Z",
              "recipe": "archive"}
    (tmp_path / "ck" / LOCK).write_text(json.dumps(record))  # as a SIGKILLed run leaves it
    outcome = run_cli(*TRAIN, cwd=tmp_path)
    assert outcome.code == 0, outcome.stderr
    note = " ".join(outcome.stderr.split())  # the note is wrapped to the terminal's width
    assert (f"note: --checkpoints 'ck': took over the lock of a train run that is gone (pid {record['pid']} "
            f"on host {socket.gethostname()!r}, started 2026-01-02T03:04:05Z, recipe 'archive')") in note
    assert saved_recipe(tmp_path / "ck" / "seed0") == "quick"
    assert not (tmp_path / "ck" / LOCK).exists()  # released at the end


def test_a_lock_written_on_another_host_is_refused(tmp_path: Path) -> None:
    """Whether that run still goes on cannot be told from here: refused, naming the file to remove."""
    (tmp_path / "ck").mkdir()
    record = {"pid": 4242, "host": "another-host", "started": "2026-01-02T03:04:05Z", "recipe": "archive"}
    (tmp_path / "ck" / LOCK).write_text(json.dumps(record))
    before = snapshot(tmp_path)
    outcome = run_cli(*TRAIN, cwd=tmp_path)
    assert outcome.code == 2
    assert ("--checkpoints 'ck' is locked by a train run on another host (pid 4242 on host 'another-host', "
            "started 2026-01-02T03:04:05Z, recipe 'archive')") in outcome.error
    assert "remove 'ck/LOCK'" in outcome.error
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("content", [b"my notes on this run", b"{}", b"\xff\xfe",
                                     pytest.param(b"[" * 4000, id="nested-too-deep")])  # was a crash
def test_a_file_named_lock_that_is_not_a_record_is_kept(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / LOCK).write_bytes(content)
    line = refused(tmp_path, *TRAIN, expect="'ck/LOCK' is not a train run's lock (it holds no owner record)")
    assert "it is kept: move it away" in line


def test_the_lock_is_refused_while_held_and_free_once_released(tmp_path: Path) -> None:
    """The kernel's lock, not the file's content, decides: held by a live owner (here this
    process, through another open file), any record is refused; released, the file is gone."""
    notes: list[str] = []
    with hold(tmp_path / "ck", owner_record(recipe="quick"), notes.append):
        outcome = run_cli(*TRAIN, cwd=tmp_path)
        assert outcome.code == 2 and "is in use by another train run" in outcome.error
    assert notes == [] and not (tmp_path / "ck").exists()  # the folder it made, empty, is removed


# ---- default output names ------------------------------------------------------------------------
FAST = ["--spec", "quadrant", "--modes", "eager", "--budget", "0.02", "--min-repeats", "3", "--max-repeats",
        "5", "--warmup", "1", "--eval-batches", "1", "--batch", "4", "--frameworks", "torch"]


def test_two_time_runs_with_default_outputs_in_the_same_second_keep_both(tmp_path: Path,
                                                                         monkeypatch) -> None:
    """Both runs see the same clock (the second starts and ends inside the first's timing):
    each writes its own results/ files, and neither is refused."""
    from shared.cli import time as time_cli
    from shared.measure import environment
    from tests.results_docs import results_doc

    monkeypatch.setattr(environment, "utc_now", lambda: "2026-12-04T17:00:00Z")
    started, second = [], []

    def timing(*args, **kwargs):  # rows without timing anything; the second run inside the first
        if not started:
            started.append(True)
            second.append(run_cli("time", *FAST, cwd=tmp_path))
        return results_doc()["runs"]

    monkeypatch.setattr(time_cli, "time_spec", timing)
    first = run_cli("time", *FAST, cwd=tmp_path)
    assert (first.code, second[0].code) == (0, 0), (first.stderr, second[0].stderr)
    results = sorted((tmp_path / "results").glob("*.json"))
    assert len(results) == 2, results
    assert all(p.name.startswith("time-quadrant-20261204T170000Z-") for p in results)
    for path in results:
        assert json.loads(path.read_text())["runs"][0]["framework"] == "torch"
        assert path.with_suffix(".csv").exists() and path.with_suffix(".png").exists()
        assert f"wrote {path.relative_to(tmp_path)}" in (first.stdout + second[0].stdout)


@pytest.mark.parametrize("kind", ["time", "sweep"])
def test_a_default_results_name_is_the_runs_own(kind: str) -> None:
    """The name holds the process id (and, after a process's first run, its run number)."""
    import argparse
    import os

    from shared.cli._outputs import output_paths

    args = argparse.Namespace(json=None, csv=None, chart=None, no_chart=False, force=False)
    names = [output_paths(args, "quadrant", kind)["json"].name for _ in range(2)]
    assert names[0] != names[1]
    assert all(name.startswith(f"{kind}-quadrant-") and f"-{os.getpid()}" in name for name in names)
