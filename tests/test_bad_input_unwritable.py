"""Class 8, unwritable outputs: a read-only folder, a path under a file, a missing folder: one
line naming the path, exit 2, no traceback, nothing changed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.adversarial import refused

Q = ["--spec", "quadrant"]
COMMANDS = [
    ["init", *Q, "--out", "{out}/w.safetensors"],
    ["logits", *Q, "--framework", "reference", "--out", "{out}/y.npy"],
    ["convert", "--to", "hf", "--in", "w.safetensors", "--out", "{out}/hf"],
    ["trace", *Q, "--frameworks", "torch", "--json", "{out}/t.json"],
]


@pytest.fixture
def read_only(tmp_path: Path) -> Path:
    """A folder this process cannot write into. Root (as CI runs) writes through permission
    bits, so there it is /sys, which the kernel keeps read-only even for root."""
    if os.geteuid() == 0:
        yield Path("/sys")
        return
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    yield folder
    folder.chmod(0o755)


@pytest.mark.parametrize("argv", COMMANDS)
def test_a_read_only_folder(tmp_path: Path, read_only: Path, argv: list[str]) -> None:
    from tests.adversarial import run_cli

    run_cli("init", *Q, "--out", "w.safetensors", cwd=tmp_path)
    refused(tmp_path, *[a.format(out=read_only) for a in argv], expect=str(read_only))


@pytest.mark.parametrize("argv", COMMANDS)
def test_a_path_under_a_file_or_a_missing_folder(tmp_path: Path, argv: list[str]) -> None:
    from tests.adversarial import run_cli

    run_cli("init", *Q, "--out", "w.safetensors", cwd=tmp_path)
    (tmp_path / "a-file").write_text("x")
    refused(tmp_path, *[a.format(out="a-file") for a in argv])
    refused(tmp_path, *[a.format(out="no/such/folder") for a in argv])
