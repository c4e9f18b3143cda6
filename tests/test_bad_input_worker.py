"""A worker ends when its job ends and runs where the user is (shared/runtime/worker.py,
shared/runtime/launch.py): a non-daemon thread or an `atexit` handler a user's factory leaves
behind does not keep its worker running (the verdict comes, and nothing of the worker's process
group is left); the factory runs in the user's working directory, so its relative reads find the
user's files and its relative writes land there, never in portbench's checkout; that directory
cannot stand in for portbench's packages or a framework; and a timeout names the phase the
worker was in."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import psutil

import portbench
import ports
from shared import REPO_ROOT
from shared.core.inputs import probe_batch
from shared.core.presets import get_preset
from shared.runtime import launch
from shared.runtime.jobs import LOGITS
from shared.runtime.launch import PROGRESS_PREFIX, Process, Worker
from shared.runtime.worker import FAULT_ENV, PHASE_PREFIX
from shared.your_model.jobs import USER
from shared.your_model.run import USER_CODE_ENV, user_job
from tests.adversarial import refused, run_cli

SPEC = "mnist-vit-small"
EXAMPLES = REPO_ROOT / "examples"
# The example's model (it passes verify), built by a factory that first runs {body}.
FACTORY = f"""
import atexit, os, sys, threading, time
sys.path.insert(0, {str(EXAMPLES)!r})
from torch_mha_vit import build as example, MnistViT

def build(spec):
    {{body}}
    return example(spec)
"""
LINGERING = {  # what a factory leaves behind that a normal interpreter exit waits for
    "non-daemon thread": "threading.Thread(target=time.sleep, args=(600,)).start()",
    "atexit handler": "atexit.register(time.sleep, 600)",
}


def group_left(pgid: int) -> list[int]:
    """The processes of group `pgid` still running (zombies aside), given up to 10 s to go: a
    group is killed with one signal, which each process receives on its own time."""
    deadline = time.monotonic() + 10
    while True:
        left = []
        for proc in psutil.process_iter(["status"]):
            with contextlib.suppress(psutil.Error, ProcessLookupError):
                if os.getpgid(proc.pid) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                    left.append(proc.pid)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def test_what_a_factory_leaves_running_does_not_keep_its_worker(tmp_path: Path) -> None:
    for case, leaves in LINGERING.items():
        ids = tmp_path / f"{case}.ids"
        record = f"open({str(ids)!r}, 'w').write(f'{{os.getpid()}} {{os.getpgrp()}}')\n    {leaves}"
        (tmp_path / "mine.py").write_text(FACTORY.format(body=record))
        # --timeout bounds a regression (the worker would outlive its answer until then); no time
        # is asserted
        outcome = run_cli("verify", "--model", "mine.py:build", "--spec", SPEC, "--timeout", "120",
                          cwd=tmp_path)
        assert outcome.code == 0, (case, outcome.stderr)
        assert "equivalent: max abs gap" in outcome.stdout, case
        pid, pgid = map(int, ids.read_text().split())
        assert pid == pgid, case  # the worker leads its own group: the group is everything it started
        assert group_left(pgid) == [], case


def test_a_process_still_running_after_its_answer_is_killed_with_its_group(tmp_path: Path,
                                                                          monkeypatch) -> None:
    """The launcher's side: a worker that wrote its answer but does not end (its own os._exit
    is the rule; this is the bound) is not waited on, and its answer stands."""
    monkeypatch.setattr(launch, "ANSWER_GRACE_S", 0.5)
    answer = tmp_path / "report.json"
    code = ("import subprocess, sys, time; "
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
            f"open({str(answer)!r}, 'w').write('{{}}'); time.sleep(600)")
    process = Process(["-c", code], None)
    done = process.finish(120, answered=answer.exists)  # 120 s bounds a regression; no time is asserted
    assert done.lingered and not done.timed_out and done.error is None
    assert group_left(process.popen.pid) == []  # the worker and the child it started


def test_a_factory_reads_and_writes_where_the_user_is_and_no_cwd_shadows_a_package(tmp_path: Path) -> None:
    work, model = tmp_path / "work", tmp_path / "model"
    for package in ("shared", "ports", "numpy", "torch"):  # each would break the worker if imported
        (work / package).mkdir(parents=True)
        (work / package / "__init__.py").write_text(f"raise ImportError('the cwd shadowed {package}')\n")
    (work / "data.txt").write_text("the user's data\n")
    model.mkdir()
    body = "assert open('data.txt').read() == \"the user's data\\n\"\n    open('made.txt', 'w').write('mine')"
    (model / "mine.py").write_text(FACTORY.format(body=body))
    outcome = run_cli("verify", "--model", "../model/mine.py:build", "--spec", SPEC, cwd=work)
    assert outcome.code == 0, outcome.stderr
    assert (work / "made.txt").read_text() == "mine"
    assert not (REPO_ROOT / "made.txt").exists() and not (model / "made.txt").exists()


def test_a_module_reference_is_imported_from_where_the_user_is(tmp_path: Path) -> None:
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "models.py").write_text("def build():\n    return 42\n")
    # found (its factory ran) and nothing written beside it (no __pycache__): `refused` compares
    refused(tmp_path, "verify", "--model", "mypkg.models:build", "--spec", SPEC, expect="returned a int")


def test_every_framework_process_finds_portbench_and_not_the_cwd(tmp_path: Path) -> None:
    for package in ("shared", "ports"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("raise ImportError('the cwd shadowed it')\n")
    show = "import os, shared, ports; print(os.getcwd(), shared.__file__, ports.__file__)"
    previous = Path.cwd()
    try:
        os.chdir(tmp_path)
        for entry in ports.PORTS:
            lines: list[str] = []
            done = launch.launch(["-c", show], entry, 60, echo=lines.append)
            assert done.error is None, (entry, done.tail)
            assert lines[-1].split() == [str(tmp_path), str(REPO_ROOT / "shared" / "__init__.py"),
                                         str(REPO_ROOT / "ports" / "__init__.py")], entry
    finally:
        os.chdir(previous)


def _wait_until(process: Process, said: Callable[[Process], bool]) -> None:
    """Wait (up to 120 s) until `process` has said what `said` looks for."""
    deadline = time.monotonic() + 120
    while not said(process):
        assert time.monotonic() < deadline and process.popen.poll() is None, (process.phase, process.tail)
        time.sleep(0.05)


def _in_phase(phase: str) -> Callable[[Process], bool]:
    return lambda process: process.phase is not None and process.phase[0] == phase


def test_a_timeout_names_the_phase_and_the_last_progress_line() -> None:
    code = (f"import sys, time; print('{PHASE_PREFIX} user-forward', file=sys.stderr, flush=True); "
            f"print('{PROGRESS_PREFIX} torch: compiling', file=sys.stderr, flush=True); time.sleep(600)")
    process = Process(["-c", code], None)
    _wait_until(process, lambda p: p.last_progress is not None)
    done = process.finish(0)  # its time is up now: the message, not the clock, is under test
    assert done.timed_out
    assert done.error == ("timed out after 0 s while running your model's forward, "
                          "last at 'torch: compiling'; worker killed")


def test_a_model_checked_in_the_callers_process_prints_no_phase_line(capfd) -> None:
    """portbench.check runs the user's model in the caller's process: no launcher, no phase lines."""
    sys.path.insert(0, str(EXAMPLES))
    try:
        from torch_mha_vit import build
    finally:
        sys.path.remove(str(EXAMPLES))
    spec = get_preset(SPEC)
    assert portbench.check(build(spec), spec, batch=2, trace=False).passed
    assert PHASE_PREFIX not in capfd.readouterr().err


def test_a_worker_that_times_out_names_its_job_and_its_phase(tmp_path: Path) -> None:
    # the logits job sleeps before it starts (in that worker's environment only: tests/background.py)
    hung = Worker("torch", {"a": LOGITS.job()}, tmp_path / "hang", env={FAULT_ENV: "torch:hang"})
    _wait_until(hung.process, _in_phase("job:logits"))
    assert hung.result(0).error("a") == "timed out after 0 s in its 'logits' job; worker killed"
    # a user's model whose forward never returns: the phase is the forward, not the build
    forever = "MnistViT.forward = lambda self, x: time.sleep(600)"
    (tmp_path / "mine.py").write_text(FACTORY.format(body=forever))
    spec = get_preset(SPEC)
    np.save(tmp_path / "x.npy", probe_batch(spec))
    job = {**user_job(spec), "model": f"{tmp_path / 'mine.py'}:build", "input": str(tmp_path / "x.npy")}
    stuck = Worker("torch", {"user": USER.job(**job)}, tmp_path / "user", env=USER_CODE_ENV)
    _wait_until(stuck.process, _in_phase("user-forward"))
    assert stuck.result(0).error("user") == ("timed out after 0 s while running your model's forward; "
                                             "worker killed")
