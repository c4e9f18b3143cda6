"""The one launcher: every framework subprocess starts here, the same way.

A framework process gets, before it imports anything, its environment and its CPUs
(shared/runtime/process_env.py: the registry entry's variables, `USE_TF` / `USE_FLAX` /
`USE_TORCH`, thread variables, a CPU affinity inherited at fork, PYTHONPATH = the repository root,
`PORTBENCH_PARENT_PID`: the worker kills its own process group when this process is gone, so a
SIGKILL of portbench leaves no worker running), and:
- the user's working directory (this process's): a relative path in a user's model means where
  the user is, not portbench's checkout. Python starts with `-P`, so that directory is not on
  sys.path: a `shared/` or `torch/` there cannot stand in for portbench's packages or a framework
  (they are found through PYTHONPATH);
- its own session, so a timeout kills the process and everything it started (compilers);
- its own temporary folder (TMPDIR), removed when it ends: a worker leaves through `os._exit`,
  which skips the `atexit` handlers that would delete what a framework wrote there (TensorFlow's
  autograph leaves a .py file per traced function: eight for one Keras `time` run). Compile
  caches that should outlive a process are placed by the caller (shared/measure/runner.py).
When the process ends, whatever is left in its group (a child a user's model started) is killed
before the process is reaped; an interrupt (Ctrl-C, or SIGTERM, which compare.py turns into
one) kills the group too. A worker whose answer (its report) is written but which is still
running ANSWER_GRACE_S later is killed with its group: nothing a job left behind is waited on.
Lines starting with PROGRESS_PREFIX are relayed; PHASE_PREFIX lines name the phase the worker is
in, some of which have their own, shorter time limit (PHASE_LIMITS_S: a user's model that hangs
while importing or building is stopped after minutes, not at the run's --timeout); a timeout
names the phase it ran out in and the last progress line after it; the last other lines are
kept, each at most LINE_LIMIT characters, for the report.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shared.runtime.job_kinds import Job, write_job_file
from shared.runtime.process_env import framework_env, pin_cpus
from shared.runtime.worker import JOB_PHASE, PHASE_PREFIX

PROGRESS_PREFIX = "portbench-progress:"
TAIL_LINES = 20
LINE_LIMIT = 400  # characters of one kept line: a 50 MB print is not a "line" of a message
# Phases with their own default limit (the run's --timeout still applies when it is shorter).
PHASE_LIMITS_S = {"user-import": 120.0, "user-build": 120.0}
# How a message names each phase a worker announces (shared/runtime/worker.py print_phase); a
# job's own phase, JOB_PHASE + its kind, is named by the kind.
PHASE_WORDS = {"user-import": "while importing your model's file",
               "user-build": "while building your model",
               "user-run": "while running your model",
               "user-bind": "while binding your model's parameters to the spec's tensors",
               "user-forward": "while running your model's forward",
               "user-taps": "while capturing your model's intermediate outputs",
               "port-import": "while importing the port's framework",
               "port-build": "while building the port and loading its weights",
               "port-forward": "while running the port's forward",
               "port-dtypes": "while reading the dtype of every named tensor",
               "report": "while writing its report"}
ANSWER_GRACE_S = 5.0  # a worker that wrote its answer ends at once (os._exit); this is the bound
Lines = Callable[[str], None]


def print_progress(framework: str, message: str) -> None:
    """In a framework process: one line the launcher relays to the user."""
    print(f"{PROGRESS_PREFIX} {framework}: {message}", file=sys.stderr, flush=True)


def phase_words(phase: str) -> str:
    """A phase a worker announced, as a timeout message says it."""
    if phase in PHASE_WORDS:
        return PHASE_WORDS[phase]
    if phase.startswith(JOB_PHASE):
        return f"in its {phase[len(JOB_PHASE):]!r} job"
    return f"in phase {phase!r}"


def clip(line: str, limit: int = LINE_LIMIT) -> str:
    """At most `limit` characters of `line`, saying how many were left out."""
    return line if len(line) <= limit else f"{line[:limit]}... ({len(line) - limit:,} more characters)"


# ---- one process ------------------------------------------------------------------------------
@dataclass
class Finished:
    returncode: int | None
    timed_out: bool
    timeout_s: float | None
    wall_s: float
    tail: list[str] = field(default_factory=list)  # the last lines that were not progress
    phase: str | None = None  # on a timeout: what the worker was doing, in words (None: it never said)
    lingered: bool = False  # it wrote its answer but was still running ANSWER_GRACE_S later: killed

    @property
    def exit(self) -> str:
        """How the process ended: "exited with status N" or "killed by signal NAME"."""
        code = self.returncode
        if code is not None and code < 0:
            return f"killed by signal {signal.Signals(-code).name}"
        return f"exited with status {code}"

    @property
    def error(self) -> str | None:
        """Why the process failed, in one line; None when it exited with status 0 (or was killed
        after its answer was written: the answer is whole)."""
        if self.timed_out:
            during = f" {self.phase}" if self.phase else ""
            return f"timed out after {self.timeout_s:g} s{during}; worker killed"
        if self.returncode == 0 or self.lingered:
            return None
        if self.returncode is not None and self.returncode < 0:
            return f"worker {self.exit}"
        return f"worker {self.exit}: {self.tail[-1] if self.tail else 'no output'}"


class Process:
    """A started framework process; `finish` waits for it (and kills its group on a timeout)."""

    def __init__(self, argv: list[str], framework: str | None, *, threads: int | None = None,
                 pin: bool = False, env: dict[str, str] | None = None, progress: Lines | None = None,
                 echo: Lines | None = None) -> None:
        self.tail: list[str] = []
        self.phase: tuple[str, float] | None = None  # (name, when it started)
        self.last_progress: tuple[str, float] | None = None  # (its text, when it came)
        self.started = time.perf_counter()
        self.scratch = tempfile.mkdtemp(prefix="portbench-process-")  # its TMPDIR, removed in `finish`
        saved = os.sched_getaffinity(0) if pin and hasattr(os, "sched_getaffinity") else None
        try:
            if pin and threads is not None:
                pin_cpus(threads)  # the child inherits this thread's affinity at fork
            # cwd: this process's, the user's; -P: that directory is not put on sys.path
            self.popen = subprocess.Popen(
                [sys.executable, "-P", *argv],
                env=framework_env(framework, threads, {"TMPDIR": self.scratch, **(env or {})}),
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                start_new_session=True)
        except BaseException:
            shutil.rmtree(self.scratch, ignore_errors=True)
            raise
        finally:
            if saved is not None:
                os.sched_setaffinity(0, saved)
        self.reader = threading.Thread(target=self._relay, args=(progress, echo), daemon=True)
        self.reader.start()

    def _relay(self, progress: Lines | None, echo: Lines | None) -> None:
        assert self.popen.stdout is not None
        for raw in self.popen.stdout:
            line = raw.rstrip("\n")
            if line.startswith(PHASE_PREFIX):
                self.phase = (line[len(PHASE_PREFIX):].strip(), time.perf_counter())
                continue
            if line.startswith(PROGRESS_PREFIX):
                text = line[len(PROGRESS_PREFIX):].strip()
                self.last_progress = (clip(text), time.perf_counter())
                if progress is not None:
                    progress("  " + text)
                continue
            if echo is not None:
                echo(line)
            if line.strip():
                self.tail.append(clip(line))
                del self.tail[:-TAIL_LINES]

    def doing(self) -> str | None:
        """What the process says it is doing, in words: its phase, and the last progress line
        since that phase began (the timing worker's steps); None when it said neither."""
        words = phase_words(self.phase[0]) if self.phase else None
        if self.last_progress and (self.phase is None or self.last_progress[1] >= self.phase[1]):
            last = f"last at {self.last_progress[0]!r}"
            words = f"{words}, {last}" if words else last
        return words

    def finish(self, timeout: float | None, answered: Callable[[], bool] | None = None) -> Finished:
        """Wait for the process: until it exits, its `timeout` passes, or the phase it is in
        outlasts its own limit; once `answered()` is true (its answer is written), no longer than
        ANSWER_GRACE_S. Whatever is left in its group is killed, also on an interrupt."""
        limit, answered_at = timeout, None
        try:
            while not self._exited():
                now = time.perf_counter()
                if answered_at is None and answered is not None and answered():
                    answered_at = now
                if answered_at is not None:
                    if now - answered_at > ANSWER_GRACE_S:
                        break  # what a job left running is not waited on
                elif timeout is not None and now - self.started > timeout:
                    break
                elif self.phase is not None and self.phase[0] in PHASE_LIMITS_S:
                    own = PHASE_LIMITS_S[self.phase[0]]
                    if (timeout is None or own < timeout) and now - self.phase[1] > own:
                        limit = own
                        break
                time.sleep(0.05)
        finally:  # also on Ctrl-C / SIGTERM: nothing of the worker's is left running
            running = not self._exited()
            self.kill()
            shutil.rmtree(self.scratch, ignore_errors=True)
        self.reader.join(timeout=5)
        lingered = running and answered_at is not None
        timed_out = running and not lingered
        return Finished(self.popen.returncode, timed_out, limit, time.perf_counter() - self.started,
                        list(self.tail), self.doing() if timed_out else None, lingered)

    def _exited(self) -> bool:
        """Whether the process has exited; it is not reaped yet, so its group id stays its own."""
        if self.popen.returncode is not None:
            return True
        if not hasattr(os, "waitid"):
            return self.popen.poll() is not None
        try:
            return os.waitid(os.P_PID, self.popen.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            return True

    def kill(self) -> None:
        """The process leads its own session: kill it and every process left in its group (a
        compiler, a child of a user's model), then reap it."""
        try:
            os.killpg(self.popen.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            if self.popen.returncode is None:
                self.popen.kill()
        self.popen.wait(timeout=30)


def launch(argv: list[str], framework: str | None, timeout: float | None, **options: Any) -> Finished:
    """Start `python ARGV...` for `framework` and wait for it (see `Process` for the options)."""
    return Process(argv, framework, **options).finish(timeout)


# ---- the worker: jobs in, reports and arrays out ----------------------------------------------
@dataclass
class WorkerResult:
    reports: dict[str, dict[str, Any]]  # job name -> its report ("error": one line or None)
    arrays: dict[str, dict[str, Any]]  # job name -> named NumPy arrays
    process: Finished

    def error(self, name: str) -> str | None:
        """Why job `name` failed (its own error, else the process's), or None."""
        report = self.reports.get(name)
        if report is None:
            return self.process.error or (f"the worker {self.process.exit} before writing its report "
                                          "for this job")
        return report.get("error")


class Worker:
    """`python -m shared.runtime.worker JOB.json` on `jobs` (name -> a `Job`: runtime/job_kinds.py)."""

    def __init__(self, framework: str, jobs: Mapping[str, Job], workdir: str | Path,
                 **options: Any) -> None:
        self.jobs = list(jobs)
        folder = Path(workdir).absolute()  # the job file's name means one file in any working directory
        folder.mkdir(parents=True, exist_ok=True)
        self.job_file = folder / f"{framework}-jobs.json"
        for stale in (self.job_file.with_suffix(".report.json"), self.job_file.with_suffix(".npz")):
            stale.unlink(missing_ok=True)
        write_job_file(self.job_file, framework, jobs)
        self.process = Process(["-m", "shared.runtime.worker", str(self.job_file)], framework, **options)

    def result(self, timeout: float | None) -> WorkerResult:
        report_file, array_file = self.job_file.with_suffix(".report.json"), self.job_file.with_suffix(".npz")
        finished = self.process.finish(timeout, answered=report_file.exists)  # written last, by a rename
        reports: dict[str, dict[str, Any]] = {}
        if report_file.exists() and not finished.timed_out:
            reports = json.loads(report_file.read_text())
        arrays: dict[str, dict[str, Any]] = {}
        if reports and array_file.exists():
            import numpy as np

            with np.load(array_file, allow_pickle=False) as npz:
                for key in npz.files:
                    job, name = key.split("/", 1)
                    arrays.setdefault(job, {})[name] = npz[key]
        return WorkerResult(reports, arrays, finished)


def run_worker(framework: str, jobs: Mapping[str, Job], workdir: str | Path,
               timeout: float | None, **options: Any) -> WorkerResult:
    return Worker(framework, jobs, workdir, **options).result(timeout)
