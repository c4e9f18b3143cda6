"""`refused` (tests/adversarial.py) with the rest of the promise checked too: the refusal comes
within a deadline (a FIFO read would otherwise hang the suite: the deadline turns a hang into a
failure) and leaves no process of portbench's running."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

from tests.adversarial import refused


class HungError(Exception):
    """The command did not return within its deadline."""


@contextlib.contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """Raise `HungError` in the main thread after `seconds` (SIGALRM interrupts a blocking open too)."""
    def expire(signum: int, frame: object) -> None:
        raise HungError(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def child_pids() -> set[int]:
    """The live children this process's main thread started (Linux: /proc/self/task/PID/children).
    Only the main thread's: the background runner's threads (tests/background.py) start workers
    of their own while a test runs, and those are not the test's to leave behind."""
    out: set[int] = set()
    with contextlib.suppress(OSError):
        out = {int(pid) for pid in Path(f"/proc/self/task/{os.getpid()}/children").read_text().split()}
    return {pid for pid in out if _alive(pid)}


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def refused_promptly(folder: Path, *argv: str, expect: str = "", code: int = 2, seconds: int = 60) -> str:
    """`refused`, within `seconds`, with no child process left behind; returns the error line."""
    before = child_pids()
    with deadline(seconds):
        line = refused(folder, *argv, code=code, expect=expect)
    left = child_pids() - before
    assert not left, f"processes left running: {sorted(left)}"
    return line
