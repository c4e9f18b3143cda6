"""Class 1, decoding what a user hands over: spec and config files that are not UTF-8, JSON too
deep for the parser, integers with thousands of digits, zero-byte or truncated arrays and weight
files. Each is one `error:` line naming the file, exit 2, and nothing changed on disk."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.adversarial import refused


def spec_text(**fields: object) -> str:
    return json.dumps({"name": "q", "image_height": 8, "image_width": 8, "channels": 1, "patch_height": 4,
                       "patch_width": 4, "dim": 8, "depth": 1, "heads": 2, "head_dim": 4, "mlp_dim": 16,
                       "num_classes": 2, **fields})


@pytest.mark.parametrize("content, expect", [
    (b'{"name": "caf\xe9"}', "is not UTF-8"),
    (b"[" * 100_000 + b"]" * 100_000, "nested"),
    (spec_text(dim=0).replace('"dim": 0', '"dim": ' + "9" * 5000).encode(), "digits"),
    (b"", "malformed JSON"),
    (b"[1, 2]", "expected an object"),
])
def test_spec_files_that_cannot_be_decoded(tmp_path: Path, content: bytes, expect: str) -> None:
    (tmp_path / "s.json").write_bytes(content)
    line = refused(tmp_path, "spec", "s.json", expect=expect)
    assert "s.json" in line


def test_toml_syntax_error_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "s.toml").write_text("dim = = 3\n")
    refused(tmp_path, "spec", "s.toml", expect="s.toml")


@pytest.mark.parametrize("content, expect", [
    (b"", "is empty (0 bytes); expected a .npy array"),
    (b"\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2, 8, 8, 1), }",
     "is not a readable .npy array"),
    (b"not an array at all", "is not a readable .npy array"),
])
def test_input_arrays_that_are_empty_or_truncated(tmp_path: Path, content: bytes, expect: str) -> None:
    (tmp_path / "x.npy").write_bytes(content)
    refused(tmp_path, "logits", "--spec", "quadrant", "--framework", "reference", "--input", "x.npy",
            "--out", "y.npy", expect=expect)


def test_a_pickled_input_is_never_loaded(tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    refused(tmp_path, "logits", "--spec", "quadrant", "--framework", "reference", "--input", "x.npy",
            "--out", "y.npy", expect="pickled objects, which portbench never loads")


@pytest.mark.parametrize("content", [b"", b"\x00" * 7, b"\xff" * 64])
def test_weight_files_that_are_empty_or_garbage(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "w.safetensors").write_bytes(content)
    line = refused(tmp_path, "logits", "--weights", "w.safetensors", "--framework", "reference", "--out",
                   "y.npy")
    assert "w.safetensors" in line


@pytest.mark.parametrize("content", [b"", b"PK\x03\x04 truncated"])
def test_big_vision_npz_that_is_empty_or_truncated(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "c.npz").write_bytes(content)
    line = refused(tmp_path, "convert", "--from", "big_vision", "--in", "c.npz", "--out", "w.safetensors")
    assert "c.npz" in line


def test_hf_config_that_is_not_utf8(tmp_path: Path) -> None:
    (tmp_path / "m.safetensors").write_bytes(b"")
    (tmp_path / "config.json").write_bytes(b'{"hidden_size": 8, "x": "\xe9"}')
    line = refused(tmp_path, "convert", "--from", "hf", "--in", "m.safetensors", "--config", "config.json",
                   "--out", "w.safetensors")
    assert "config.json" in line or "m.safetensors" in line
