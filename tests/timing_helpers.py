"""Helpers for tests/test_timing_*.py: run compare.py as a user would, in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from shared.runtime.worker import FAULT_ENV

REPO = Path(__file__).resolve().parents[1]
# The smallest budgets that still exercise warm-up, repeats and the IQR: speed is never asserted.
# One round (`time` defaults to two): the rounds' rule has its own tests.
FAST = ["--spec", "quadrant", "--modes", "eager", "--budget", "0.02", "--min-repeats", "3",
        "--max-repeats", "5", "--warmup", "1", "--eval-batches", "1", "--batch", "4", "--processes", "1"]


def _env(fault: str | None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop(FAULT_ENV, None)
    if fault:
        env[FAULT_ENV] = fault  # injected by the worker around every job (shared/runtime/worker.py)
    return env


def compare(*args: str, fault: str | None = None, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "compare.py"), *args], cwd=REPO, env=_env(fault),
                          capture_output=True, text=True, timeout=timeout)


def start_compare(*args: str, fault: str | None = None) -> subprocess.Popen:
    """Start compare.py without waiting (tests run two slow cases side by side; they never
    assert a time, so sharing the CPU changes nothing they check)."""
    return subprocess.Popen([sys.executable, str(REPO / "compare.py"), *args], cwd=REPO, env=_env(fault),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen, timeout: float = 240) -> subprocess.CompletedProcess:
    stdout, stderr = proc.communicate(timeout=timeout)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def error_line(result: subprocess.CompletedProcess, after_progress: bool = False) -> str:
    """The one line a user sees on a mistake; asserts there is exactly one and no traceback.
    `after_progress`: the mistake shows only once a worker ran, so progress lines precede it."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    if not after_progress:
        assert len(lines) == 1, result.stderr
    assert [line for line in lines if line.startswith("error")] == lines[-1:], result.stderr
    return lines[-1]
