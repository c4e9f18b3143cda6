"""Class 12, a user's model file (`--model FILE.py:NAME`, run in a worker) cannot break the
promise: a child it starts does not outlive portbench; sys.exit / os._exit in it are one line
naming the phase; a huge print or message is clipped; a sibling named like portbench's own
package is named as the problem; an import or build that hangs is stopped by its own, shorter
limit (shared/runtime/launch.py PHASE_LIMITS_S) and the message says which phase."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shared.runtime import launch
from tests.adversarial import refused, run_cli

ROOT = Path(__file__).resolve().parents[1]
SPEC = ("--spec", "mnist-vit-small")
SPAWNS = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
open({pidfile!r}, "w").write(str(child.pid))
{after}
"""


def _gone(pid: int, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            if state == "Z":
                return True
        except (ProcessLookupError, FileNotFoundError):
            return True
        time.sleep(0.05)
    return False


def test_a_child_the_model_starts_does_not_outlive_portbench(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    after = "def build():\n    return 42\n"
    (tmp_path / "mine.py").write_text(SPAWNS.format(pidfile=str(pidfile), after=after))
    outcome = run_cli("verify", "--model", "mine.py:build", *SPEC, cwd=tmp_path)
    assert outcome.code == 2 and "returned a int" in outcome.error
    assert _gone(int(pidfile.read_text()))


def test_a_signal_during_a_model_run_leaves_nothing_running(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    after = "import time\ntime.sleep(600)\ndef build():\n    pass\n"
    (tmp_path / "mine.py").write_text(SPAWNS.format(pidfile=str(pidfile), after=after))
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        pidfile.unlink(missing_ok=True)
        command = [sys.executable, str(ROOT / "compare.py"), "verify", "--model", "mine.py:build", *SPEC]
        proc = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        deadline = time.monotonic() + 120
        while not pidfile.exists() or not pidfile.read_text():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=60)
        if signum != signal.SIGKILL:
            assert proc.returncode == 130 and stderr.strip().splitlines()[-1] == "error: interrupted", stderr
        assert _gone(int(pidfile.read_text())), signum  # the model's child, and with it its worker


CASES = {
    "sys.exit on import": ("import sys\nsys.exit(3)\n", "your code called sys.exit(3) while importing it"),
    "os._exit on import": ("import os\nos._exit(4)\n", "your code called os._exit(4) while importing it"),
    "sys.exit on build": ("import sys\ndef build():\n    sys.exit('bye')\n",
                          "your code called sys.exit('bye') while building the model"),
    "os._exit on build": ("import os\ndef build():\n    os._exit(0)\n",
                          "your code called os._exit(0) while building the model"),
    "KeyboardInterrupt on import": ("raise KeyboardInterrupt\n", "importing it raised KeyboardInterrupt"),
    "imports its own shared/": ("from shared.layers import Block\n", "its folder holds 'shared/'"),
    "imports its own ports.py": ("import ports\n", "its folder holds 'ports.py'"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_model_that_exits_or_shadows_portbench_is_one_line(tmp_path: Path, case: str) -> None:
    text, expect = CASES[case]
    (tmp_path / "mine.py").write_text(text)
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "__init__.py").write_text("")
    (tmp_path / "shared" / "layers.py").write_text("Block = object\n")
    (tmp_path / "ports.py").write_text("")
    refused(tmp_path, "verify", "--model", "mine.py:build", *SPEC, expect=expect)


def test_a_sibling_that_is_not_imported_is_no_problem(tmp_path: Path) -> None:
    (tmp_path / "shared").mkdir()
    (tmp_path / "mine.py").write_text("def build():\n    return 42\n")
    refused(tmp_path, "verify", "--model", "mine.py:build", *SPEC, expect="returned a int")


@pytest.mark.parametrize("where", ["message", "print"])
def test_50_mb_of_output_is_not_a_50_million_character_line(tmp_path: Path, where: str) -> None:
    body = {"message": "raise ValueError('x' * 50_000_000)\n",
            # posix._exit is os._exit's own function, which the guard cannot see: the worker ends
            # without a report, and the message quotes its last line of output
            "print": "import posix, sys\nprint('y' * 50_000_000)\nsys.stdout.flush()\nposix._exit(7)\n"}
    (tmp_path / "mine.py").write_text(body[where])
    line = refused(tmp_path, "verify", "--model", "mine.py:build", *SPEC)
    assert len(line) < 1200 and "more characters" in line, len(line)


@pytest.mark.parametrize("phase, text, words", [
    ("user-import", "import time\ntime.sleep(600)\n", "while importing your model's file"),
    ("user-build", "import time\ndef build():\n    time.sleep(600)\n", "while building your model"),
])
def test_a_hang_in_import_or_build_meets_its_own_limit(tmp_path: Path, monkeypatch, phase: str, text: str,
                                                      words: str) -> None:
    monkeypatch.setitem(launch.PHASE_LIMITS_S, phase, 3.0)  # in-process: the launcher runs here
    (tmp_path / "mine.py").write_text(text)
    started = time.monotonic()
    refused(tmp_path, "verify", "--model", "mine.py:build", *SPEC, expect=f"timed out after 3 s {words}")
    assert time.monotonic() - started < 60  # not the 300 s --timeout


def test_import_and_build_have_shorter_defaults_than_the_run() -> None:
    assert launch.PHASE_LIMITS_S == {"user-import": 120.0, "user-build": 120.0}
