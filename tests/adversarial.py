"""Helpers for the adversarial tests (tests/test_bad_input_*.py): run compare.py as a user would,
in-process (the same `main` the script calls, so no traceback can hide), and check the promise:
a non-zero exit, exactly one `error:` line naming the problem, and every file that was there
before is byte-identical afterwards."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
from dataclasses import dataclass
from pathlib import Path

import compare


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str

    @property
    def error(self) -> str:
        """The single error line; asserts there is exactly one and no traceback."""
        lines = [line for line in self.stderr.splitlines() if line.strip()]
        assert "Traceback" not in self.stderr, self.stderr
        errors = [line for line in lines if line.startswith("error:")]
        assert len(errors) == 1, self.stderr
        return errors[0]


def run_cli(*argv: str, cwd: Path | None = None) -> Outcome:
    out, err = io.StringIO(), io.StringIO()
    previous = Path.cwd()
    try:
        if cwd:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = compare.main([str(a) for a in argv])
            except SystemExit as exc:  # argparse exits on its own errors
                code = int(exc.code or 0)
    finally:
        os.chdir(previous)
    return Outcome(code, out.getvalue(), err.getvalue())


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under `folder` -> sha256 of its bytes."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def refused(folder: Path, *argv: str, code: int = 2, expect: str = "") -> str:
    """Run a bad command in `folder`; assert it is refused as promised; return the error line."""
    before = snapshot(folder)
    outcome = run_cli(*argv, cwd=folder)
    assert outcome.code == code, (outcome.code, outcome.stderr)
    line = outcome.error
    assert expect in line, line
    assert snapshot(folder) == before, "a file was changed, added or left behind"
    return line
