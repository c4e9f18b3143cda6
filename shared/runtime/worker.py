"""The one worker: `python -m shared.runtime.worker JOB.json`, started by `shared.runtime.launch`.

JOB.json (`shared.runtime.job_kinds`) names a framework (a registry entry) and jobs, each a typed
`Job`: its kind, its handler ("module:function") and the fields the handler reads. The handler is
declared beside its function (`JobKind`) in the package that implements it; the worker imports
that module only when a job names it, so the runtime imports no tool, and runs the declared
function, `function(framework, fields, out)`: it reads its fields, imports the port, builds,
loads, computes, and fills `out.report` (JSON) and `out.arrays` (NumPy arrays) as it goes, so a
failure part-way keeps what was done. The worker writes JOB.report.json (job name -> report, with
"error": a one-line reason or None) and JOB.npz ("<job>/<array>"). One job's failure does not stop
the others.

The worker ends when its answer is written: once JOB.report.json is in place it flushes its
output and leaves through `os._exit` (`exit_now`), so a non-daemon thread or an `atexit` handler a
user's model left behind cannot keep it running until the launcher's --timeout. It dies with its
parent too: a thread watches the parent's pid (PORTBENCH_PARENT_PID, set by the launcher) and,
when the parent is gone (even SIGKILLed), kills the worker's own process group, so nothing it or a
user's model started keeps running. An error is at most MESSAGE_LIMIT characters; a job that
calls sys.exit is a one-line error, not a missing report.

It tells the launcher the phase it is in (`print_phase`): each job's kind as the job starts, then
the finer phases the kinds name (importing the framework, building, binding, the forward), so a
timeout says what ran out of time (shared/runtime/launch.py), and some phases have their own limit.
It runs in the user's working directory (the launcher's), and finds portbench's packages through
PYTHONPATH, never through that directory.

Only the standard library and the job format are imported here: the launcher has set threads,
CPU affinity and the registry environment before this process started, and each kind imports
its framework itself (the timing kind times that import).

Test hook, at this one boundary: PORTBENCH_TEST_FAULT="<framework>:<fault>[,...]" wraps every job
of that framework: `crash` (SIGSEGV before the job runs, so before any framework import), `hang`
(sleep until killed), `tamper` (the port loads a head bias 1e-3 off the given weights: a port
that silently computes another function), `breach` (the port reports BREACHED_TENSOR in
another dtype than the precision contract holds it in: a port that breaks the contract),
`tamper-mode=NAME` (the logits the port hands back are 1e-3 off while it runs its mode NAME: one
candidate mode that computes another function, shared/measure/modes.py) or `error` (raise once
the job has run: its partial report is kept and the error is reported in one line).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from shared.errors import PortbenchError, first_line
from shared.runtime.job_kinds import DECLARED, Handler, Job, Output, read_job_file

FAULT_ENV = "PORTBENCH_TEST_FAULT"
PARENT_ENV = "PORTBENCH_PARENT_PID"  # shared.runtime.launch sets it
PHASE_PREFIX = "portbench-phase:"  # a line naming the phase the worker enters (shared.runtime.launch)
JOB_PHASE = "job:"  # the phase a job is in until its kind names a finer one: "job:" + its kind
# The process's own exit, taken before any job runs: a user's code may replace os._exit (the
# guards in shared/your_model/guard.py do, while it runs), and the worker must still end.
EXIT = os._exit
MESSAGE_LIMIT = 600  # characters of one error line
TAMPERED_TENSOR = "head.out.bias"  # shifts every logit by exactly 1e-3 (a key bias would cancel)
BREACHED_TENSOR = "block0.out"  # the token stream: the parameter dtype by contract


def one_line(exc: BaseException) -> str:
    """A failure as a user reads it: the message of a PortbenchError, else type and first line;
    at most MESSAGE_LIMIT characters either way."""
    if isinstance(exc, SystemExit):
        text = f"the job called sys.exit({exc.code!r}) instead of returning or raising"
    elif isinstance(exc, PortbenchError):
        text = str(exc)
    else:
        text = first_line(exc, typed=True)
    if len(text) > MESSAGE_LIMIT:
        text = f"{text[:MESSAGE_LIMIT]}... ({len(text) - MESSAGE_LIMIT:,} more characters)"
    return " ".join(text.splitlines())


def print_phase(phase: str) -> None:
    """The phase this worker enters now, for the launcher (a key of its PHASE_LIMITS_S has a limit
    of its own; a timeout names the phase it was in). Outside a process the launcher started
    (`portbench.check` runs a user's model in the caller's own process) there is no launcher to
    tell, and the caller's output gets no such line."""
    if PARENT_ENV in os.environ:
        print(f"{PHASE_PREFIX} {phase}", file=sys.stderr, flush=True)


# ---- dying with the parent --------------------------------------------------------------------
def watch_parent(interval: float = 0.2) -> None:
    """Start a daemon thread that kills this process's group once the launching process is gone."""
    import threading

    try:
        parent = int(os.environ.get(PARENT_ENV, ""))
    except ValueError:
        return  # not started by the launcher (run by hand): nothing to watch

    def watch() -> None:
        import time

        while _alive(parent) and os.getppid() == parent:
            time.sleep(interval)
        import signal

        if os.getpgrp() == os.getpid():  # the launcher made this process lead its own group
            os.killpg(os.getpgrp(), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="watch-parent", daemon=True).start()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def handler_of(job: Job) -> Handler:
    """The function declared for `job.kind` in the module its handler names (imported here, in
    the worker process, so the runtime imports no tool)."""
    module = job.handler.partition(":")[0]
    try:
        importlib.import_module(module)  # declares its job kinds
    except ModuleNotFoundError as exc:
        if exc.name is None or not module.startswith(exc.name):
            raise  # the module exists; something it imports does not
        raise PortbenchError(f"job kind {job.kind!r}: its handler {job.handler!r} names no module") from None
    kind = DECLARED.get(job.kind)
    if kind is None or kind.handler != job.handler:
        raise PortbenchError(f"unknown job kind {job.kind!r}: {module} declares no JobKind of that name "
                             f"for {job.handler!r}")
    return kind.function


# ---- the test hook --------------------------------------------------------------------------
def fault_for(framework: str) -> str | None:
    for item in os.environ.get(FAULT_ENV, "").split(","):
        name, _, fault = item.partition(":")
        if name.strip() == framework and fault:
            return fault.strip()
    return None


def with_fault(function: Handler, fault: str) -> Handler:
    def faulty(framework: str, job: dict[str, Any], out: Output) -> None:
        if fault == "crash":
            import signal

            os.kill(os.getpid(), signal.SIGSEGV)
        if fault == "hang":
            import time

            time.sleep(10**6)
        if fault == "tamper":
            _replace_port(_tampered)
        if fault == "breach":
            _replace_port(_breached)
        if fault.startswith("tamper-mode="):
            _replace_port(lambda port: _mode_tampered(port, fault.partition("=")[2]))
        function(framework, job, out)
        if fault == "error":
            raise RuntimeError(f"injected failure after the job ran ({FAULT_ENV})")

    return faulty


def _tampered(port: type) -> type:
    """`port` adding 1e-3 to TAMPERED_TENSOR in `load`."""
    import numpy as np

    class TamperedPort(port):  # type: ignore[valid-type, misc]
        def load(self, tensors: dict[str, Any]) -> None:
            shifted = dict(tensors)
            shifted[TAMPERED_TENSOR] = (tensors[TAMPERED_TENSOR] + np.float32(1e-3)).astype(np.float32)
            super().load(shifted)

    return TamperedPort


def _breached(port: type) -> type:
    """`port` reporting BREACHED_TENSOR's dtype as the other one of its rung's two (float32 <->
    the low dtype): the stream held in the compute dtype under mixed precision, or left in
    float32 under pure. Its values are untouched."""
    class BreachedPort(port):  # type: ignore[valid-type, misc]
        def tap_dtypes(self, images: Any) -> dict[str, str]:
            dtypes = super().tap_dtypes(images)
            kept = dtypes[BREACHED_TENSOR]
            dtypes[BREACHED_TENSOR] = self.precision.dtype if kept == "float32" else "float32"
            return dtypes

    return BreachedPort


def _mode_tampered(port: type, mode: str) -> type:
    """`port` reading its results back 1e-3 off while it runs `mode`."""
    class ModeTamperedPort(port):  # type: ignore[valid-type, misc]
        def to_numpy(self, result: Any) -> Any:
            values = super().to_numpy(result)
            return values + 1e-3 if getattr(self, "mode", None) == mode else values

    return ModeTamperedPort


def _replace_port(subclass: Callable[[type], type]) -> None:
    """Every port module this process loads holds `subclass(its Port)` as its `Port`."""
    import ports

    original = ports.load_port_module

    def load_port_module(name: str) -> Any:
        module = original(name)
        replaced = type(module)(module.__name__)
        replaced.__dict__.update({**module.__dict__, "Port": subclass(module.Port)})
        return replaced

    ports.load_port_module = load_port_module


# ---- the run ----------------------------------------------------------------------------------
def run_job(framework: str, job: Job) -> Output:
    out = Output()
    try:
        function = handler_of(job)
        fault = fault_for(framework)
        (with_fault(function, fault) if fault else function)(framework, job.fields, out)
        out.report.setdefault("error", None)
    except (Exception, SystemExit) as exc:  # one job's failure is one line, never fatal to the rest
        out.report["error"] = one_line(exc)
        out.report["error_kind"] = type(exc).__name__  # e.g. FrameworkUnavailable: a row, not a failure
        if not isinstance(exc, (PortbenchError, SystemExit)):
            out.report["traceback"] = traceback.format_exc(limit=8)[-4000:]
    return out


def main(argv: list[str]) -> int:
    watch_parent()
    job_file = Path(argv[0])
    framework, jobs = read_job_file(job_file)
    reports: dict[str, Any] = {}
    arrays: dict[str, Any] = {}
    for name, job in jobs.items():
        print_phase(JOB_PHASE + job.kind)
        out = run_job(framework, job)
        reports[name] = out.report
        arrays.update({f"{name}/{key}": value for key, value in out.arrays.items()})
    print_phase("report")
    if arrays:
        import numpy as np

        with open(job_file.with_suffix(".npz"), "wb") as handle:
            np.savez(handle, **arrays)
    partial = job_file.with_suffix(".report.tmp")
    partial.write_text(json.dumps(reports, default=_jsonable))
    os.replace(partial, job_file.with_suffix(".report.json"))
    return 0


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, (set, tuple)):
        return list(value)
    return str(value)


def exit_now(status: int) -> NoReturn:
    """End this process now, with its output flushed: no wait for the threads a job left running
    (a user's model's non-daemon thread) and no `atexit` handler (one that sleeps), whatever they
    are; the launcher kills whatever they started (the process group)."""
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        with contextlib.suppress(Exception):  # a stream the user's code closed or replaced
            stream.flush()  # type: ignore[union-attr]
    with contextlib.suppress(Exception):  # C's stdio buffers, which a normal exit would flush
        import ctypes

        ctypes.CDLL(None).fflush(None)
    EXIT(status)


if __name__ == "__main__":
    try:
        status = main(sys.argv[1:])
    except BaseException:  # no report was written: the launcher quotes the traceback's last line
        traceback.print_exc()
        status = 1
    exit_now(status)
