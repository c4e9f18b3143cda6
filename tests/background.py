"""Worker runs that start in the background as soon as pytest has collected the tests that need
them, one worker at a time at low CPU priority, while the in-process tests run.

Why: the in-process tests keep about one of CI's two cores busy, and some modules' proofs are
minutes of CPU in framework worker processes (the precision ladder; training parity: four
frameworks, ten AdamW steps on two specs, ten mutated runs, a training loop; ViT-S/B in every
port). Started at collection and niced, those workers
use the core the rest of the suite leaves idle; `conftest.py` moves the tests that read them to
the end of the session, so they find their results ready. Nothing in the suite asserts a time,
so sharing the machine changes no result. A task's own Python code (references, emulated gaps)
runs in a thread of the pytest process, so an in-process test must never patch a module's
function that such code calls: a test that shifted `reference.forward` for a few seconds once
made the ViT-S/16 reference computed meanwhile 1e-4 wrong. Pass the changed value in instead.

A task is a function that starts its processes (framework workers, or `compare.py` runs)
through `start`, so they can be reniced and, at the end of the session, killed, and returns what
its tests read (or raises what they report); `result(name)` waits for it. The session's summary
says when each task ran, so a task that outlasts the in-process tests shows.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from shared import REPO_ROOT
from shared.runtime.launch import Worker
from tests.adversarial import Outcome

NICE = 10  # below the in-process tests: the background takes what they leave idle
Started = TypeVar("Started", Worker, subprocess.Popen)
Start = Callable[[Started], Started]
Task = Callable[[Start], Any]

TASKS: dict[str, tuple[str, Task]] = {}  # task name -> (which tests read it, the task)


def task(name: str, readers: str) -> Callable[[Task], Task]:
    """Register `function` as the background task `name`, read by the tests whose node id
    contains `readers`: a module ("test_x.py::") or a module and a test name prefix
    ("test_x.py::test_large")."""
    def register(function: Task) -> Task:
        TASKS[name] = (readers, function)
        return function
    return register


class Runner:
    """The tasks, taken in turn by LANES threads; each worker they start is niced. Two lanes:
    while the in-process tests run, both share the core those leave idle (nice keeps them off the
    tests' core); when the in-process tests are done, the rest of the background has both cores."""

    LANES = 2

    def __init__(self, names: list[str]) -> None:
        self.results: dict[str, Any] = {}
        self.errors: dict[str, BaseException] = {}
        self.done = {name: threading.Event() for name in names}
        self.queue = list(names)
        self.lock = threading.Lock()
        self.current: list[subprocess.Popen] = []  # the processes started, so `stop` can kill them
        self.stopped = False
        self.began = time.monotonic()
        self.in_process_end = 0.0  # when the last test reading no task ended (mark_in_process_end)
        self.spans: dict[str, tuple[float, float]] = {}  # task -> (start, end), s since the session began
        self.threads = [threading.Thread(target=self._lane, daemon=True) for _ in range(self.LANES)]
        for thread in self.threads:
            thread.start()

    def _start(self, started: Started) -> Started:
        popen = started.process.popen if isinstance(started, Worker) else started
        with self.lock:
            self.current.append(popen)
            stopped = self.stopped
        if stopped:
            kill(popen)
            raise RuntimeError("the test session ended before this background process ran")
        os.setpriority(os.PRIO_PROCESS, popen.pid, NICE)
        return started

    def _lane(self) -> None:
        while True:
            with self.lock:
                if not self.queue:
                    return
                name = self.queue.pop(0)
            began = time.monotonic() - self.began
            try:
                self.results[name] = TASKS[name][1](self._start)
            except BaseException as exc:  # raised again in the test that reads it
                self.errors[name] = exc
            finally:
                self.spans[name] = (began, time.monotonic() - self.began)
                self.done[name].set()

    def result(self, name: str) -> Any:
        self.done[name].wait()
        if name in self.errors:
            raise self.errors[name]
        return self.results[name]

    def stop(self) -> None:
        """At the end of the session (an -x stop, Ctrl-C): no orphaned worker."""
        with self.lock:
            self.stopped = True
            running = list(self.current)
        for popen in running:
            kill(popen)


def kill(popen: subprocess.Popen) -> None:
    """A process and, when it leads its own session (every framework worker does), its group."""
    if popen.poll() is not None:
        return
    try:
        if os.getpgid(popen.pid) == popen.pid:
            os.killpg(popen.pid, signal.SIGKILL)
        else:
            popen.kill()
    except (ProcessLookupError, PermissionError):
        pass


_RUNNER: list[Runner] = []
# The environment the session began with: a task's process starts with this, never with os.environ
# as it is when the task runs, which an in-process test may have changed for a while meanwhile
# (the `transformers4` fixture puts Transformers 4.x first on PYTHONPATH: a Transformers 5 model
# run under it crashed its worker). It is always passed as `env=`, never inherited: a child that
# inherits execs with the parent's C `environ`, which a test setting a variable in the main thread
# may be reallocating at that instant (an exec once failed with EFAULT, "Bad address").
# tests/test_runtime_launch.py holds that every process a task starts is given it.
ENVIRON = dict(os.environ)


def reads_a_task(nodeid: str) -> bool:
    """Whether a test reads a background task (conftest.py runs those tests last)."""
    return any(readers in nodeid for readers, _ in TASKS.values())


def start(nodeids: list[str]) -> None:
    """Called by conftest.py after collection: start the tasks that the tests to run read."""
    names = [name for name, (readers, _) in TASKS.items() if any(readers in n for n in nodeids)]
    if names and not _RUNNER:
        _RUNNER.append(Runner(names))


def result(name: str) -> Any:
    """A task's result, waiting for it (running it now if collection did not start it)."""
    if not _RUNNER or name not in _RUNNER[0].done:
        return TASKS[name][1](lambda worker: worker)  # e.g. a module run by path in another way
    return _RUNNER[0].result(name)


def compare_py(start: Start, *argv: str | os.PathLike, cwd: str | os.PathLike | None = None,
               env: dict[str, str] | None = None, timeout: float = 600) -> Outcome:
    """`compare.py ARGV` as a user runs it, in a process of its own started through `start`: a task
    for a test that would otherwise wait on a command's framework workers in the pytest process
    (`run_cli` runs the same `main` in-process). Returns what the command printed and its exit
    status."""
    proc = start(subprocess.Popen([sys.executable, str(REPO_ROOT / "compare.py"), *map(str, argv)],
                                  cwd=cwd or REPO_ROOT, env=env or ENVIRON, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True))
    stdout, stderr = proc.communicate(timeout=timeout)
    return Outcome(proc.returncode, stdout, stderr)


def transformers4_environ() -> dict[str, str]:
    """The session's environment (ENVIRON) with Transformers 4.x's side directory first on
    PYTHONPATH where the installed Transformers is 5 (shared/runtime/process_env.py), for a
    process that needs its TensorFlow or Flax classes. No side directory fails the test that
    asked, naming what installs it: CI always has one."""
    from shared.runtime.process_env import TRANSFORMERS4_NEEDED, transformers4_env

    added = transformers4_env()
    assert added is not None, f"Transformers' TensorFlow and Flax classes need {TRANSFORMERS4_NEEDED}"
    env = dict(ENVIRON)
    if "PYTHONPATH" in added:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (added["PYTHONPATH"], env.get("PYTHONPATH")) if p)
    return env


def stop() -> None:
    for runner in _RUNNER:
        runner.stop()


def mark_in_process_end() -> None:
    """Called as each test that reads no task ends (conftest.py): the last call is when the
    in-process tests were done and the tests that read the background began."""
    if _RUNNER:
        _RUNNER[0].in_process_end = time.monotonic() - _RUNNER[0].began


def summary() -> list[str]:
    """When each task ran, in seconds since the background began (for the session's last lines),
    and when the in-process tests ended: which of the two the run waited on."""
    if not _RUNNER:
        return []
    spans = sorted(_RUNNER[0].spans.items(), key=lambda item: item[1])
    ended = time.monotonic() - _RUNNER[0].began
    return [*(f"background {name}: {a:.0f}-{b:.0f} s" for name, (a, b) in spans),
            f"in-process tests: 0-{_RUNNER[0].in_process_end:.0f} s; the tests reading the background "
            f"then until {ended:.0f} s"]
