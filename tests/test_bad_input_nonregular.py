"""Paths that are not regular files, given wherever a user hands portbench a file to read: a
directory, a FIFO (which a plain read waits on forever) and a device (`/dev/zero` never ends).
Each is refused in one line that says what the path is, exit 2, within a deadline, with no
process left and the folder unchanged: every read goes through `shared.core.files.open_user_file`."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from tests.refusals import refused_promptly

MODEL = "def build():\n    raise RuntimeError('never built: the map file is refused first')\n"
# command -> (the argv around the path, what the message calls the file)
COMMANDS: dict[str, tuple[tuple[str, ...], str]] = {
    "input": (("logits", "--spec", "quadrant", "--framework", "reference", "--out", "y.npy", "--input"),
              "input file"),
    "weights": (("logits", "--framework", "reference", "--out", "y.npy", "--weights"), "weights file"),
    "spec": (("spec",), "spec file"),
    "logits": (("diagnose", "--spec", "quadrant", "--logits"), "logits file"),
    "results": (("report",), "results file"),
    "map": (("verify", "--spec", "quadrant", "--model", "mine.py:build", "--map"), "map file"),
    "checkpoint": (("convert", "--from", "big_vision", "--out", "w.safetensors", "--in"), "checkpoint"),
    "source": (("audit", "--source"), "source file"),
    "config": (("convert", "--from", "hf", "--in", "m.safetensors", "--out", "w.safetensors", "--config"),
               "config"),
}
KINDS = {"directory": "is a directory", "fifo": "is a FIFO (named pipe)", "device": "is a character device"}


def make(folder: Path, kind: str) -> str:
    """A path of `kind` (named like a file, so no suffix check can refuse it first)."""
    if kind == "device":
        return "/dev/zero"
    path = folder / "given.json"
    if kind == "directory":
        path.mkdir()
    else:
        os.mkfifo(path)
    return path.name


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_path_that_is_not_a_regular_file_is_named_not_read(tmp_path: Path, command: str, kind: str) -> None:
    (tmp_path / "mine.py").write_text(MODEL)
    save_file({"x": np.zeros(2, np.float32)}, str(tmp_path / "m.safetensors"))  # for the config case
    given = make(tmp_path, kind)
    argv, what = COMMANDS[command]
    line = refused_promptly(tmp_path, *argv, given, seconds=60)
    assert f"{what} {given!r} {KINDS[kind]}, not a regular file" in line, line


def test_mnist_data_that_is_a_fifo_is_named(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "mnist.npz")
    line = refused_promptly(tmp_path, "train", "--spec", "mnist-vit-small", "--data", "mnist:mnist.npz")
    assert "MNIST file 'mnist.npz' is a FIFO (named pipe), not a regular file" in line


def test_a_spec_that_names_a_directory_is_not_called_neither_preset_nor_file(tmp_path: Path) -> None:
    (tmp_path / "specs").mkdir()
    line = refused_promptly(tmp_path, "spec", "specs")
    assert line == "error: spec file 'specs' is a directory, not a regular file; expected a file to read"


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_a_model_file_that_is_not_a_regular_file_is_named(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "mine.py"
    if kind == "directory":
        path.mkdir()
    else:
        os.mkfifo(path)
    line = refused_promptly(tmp_path, "verify", "--spec", "quadrant", "--model", "mine.py:build")
    assert f"--model 'mine.py:build': file 'mine.py' {KINDS[kind]}, not a regular file" in line, line
