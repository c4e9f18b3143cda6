"""The suite never writes into the checkout: a snapshot of every file under the repository root
(path, size, modification time) taken when the session starts, compared by the last test.

Ignored files count too: `results/` and `runs/` are ignored by git, and they are exactly where a
user's own outputs live (a test once rewrote the user's `results/index.html`). Only the caches
that Python, pytest, ruff and hypothesis keep for themselves, and the virtual environment, are
left out."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Folders whose contents are tools' own caches, never a user's or the product's files.
CACHE_DIRS = {".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache", ".hypothesis"}
MODULE = "test_zz_checkout_unchanged.py"

Snapshot = dict[str, tuple[int, int]]
_AT_START: list[Snapshot] = []


def snapshot(root: Path = ROOT) -> Snapshot:
    files: Snapshot = {}
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in CACHE_DIRS and not d.endswith(".egg-info")]
        for name in names:
            path = Path(folder, name)
            try:
                stat = path.lstat()
            except FileNotFoundError:  # removed while we walked (another process's temporary)
                continue
            files[str(path.relative_to(root))] = (stat.st_size, stat.st_mtime_ns)
    return files


def record() -> None:
    """Called by conftest.py when the session starts."""
    if not _AT_START:
        _AT_START.append(snapshot())


def changes() -> list[str]:
    """What the session added, removed or changed under the checkout, one line each."""
    before, after = _AT_START[0], snapshot()
    lines = [f"added {p}" for p in sorted(after.keys() - before.keys())]
    lines += [f"removed {p}" for p in sorted(before.keys() - after.keys())]
    lines += [f"changed {p}" for p in sorted(before.keys() & after.keys()) if before[p] != after[p]]
    return lines
