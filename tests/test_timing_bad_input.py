"""Bad input to `compare.py time` / `report`: one line naming the problem, exit 2, and no earlier
results file overwritten."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from shared.measure import schema
from tests.timing_helpers import FAST, compare, error_line


@pytest.mark.parametrize("args, expected", [
    (["--spec", "no-such-spec"], "--spec 'no-such-spec' is neither a preset"),
    (["--frameworks", "torch,mxnet"], "unknown framework 'mxnet'"),
    (["--device", "tpu"], "argument --device: invalid choice: 'tpu'"),
    (["--modes", "eager,turbo"], "unknown mode 'turbo'; expected one of: eager, compiled, train"),
    (["--modes", "eager, eager"], "--modes 'eager, eager' names 'eager' twice"),  # was timed twice
    (["--batch", "0"], "argument --batch: 0 is not a whole number >= 1"),
    (["--rank-by", "speed"], "unknown ranking metric 'speed'"),
])
def test_unknown_values_are_one_line_errors(args: list[str], expected: str, tmp_path: Path) -> None:
    result = compare("time", *FAST, "--frameworks", "torch", *args, "--json", str(tmp_path / "r.json"))
    assert expected in error_line(result)
    assert not (tmp_path / "r.json").exists()


def test_a_sweep_refuses_train_however_the_modes_are_spaced(tmp_path: Path) -> None:
    """`--modes "eager, train"` passed the sweep's check (it split without stripping) and the sweep
    then timed training, which its fit does not model."""
    result = compare("sweep", "--spec", "quadrant", "--batch", "1,2", "--frameworks", "torch",
                     "--modes", "eager, train", "--json", str(tmp_path / "s.json"))
    assert "unknown mode 'train'; expected one of: eager, compiled" in error_line(result)
    assert not (tmp_path / "s.json").exists()


def test_unwritable_output_is_refused_before_timing(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = compare("time", *FAST, "--frameworks", "torch", "--json", str(blocker / "sub" / "r.json"))
    line = error_line(result)
    assert "cannot be created" in line and "a-file" in line


def test_existing_results_are_not_overwritten_without_force(tmp_path: Path) -> None:
    existing = tmp_path / "r.json"
    existing.write_text("{\"earlier\": true}")
    result = compare("time", *FAST, "--frameworks", "torch", "--json", str(existing))
    assert "already exists; pass --force" in error_line(result)
    assert existing.read_text() == "{\"earlier\": true}"
    report_out = tmp_path / "merged.csv"
    report_out.write_text("earlier")
    result = compare("report", str(existing), "--csv", str(report_out))
    assert "already exists" in error_line(result)
    assert report_out.read_text() == "earlier"


def test_report_refuses_another_schema_version(tmp_path: Path) -> None:
    doc = schema.new_results({}, {}, [], "2026-01-01T00:00:00Z", ["compare.py"])
    doc["schema_version"] = 0
    old = tmp_path / "old.json"
    old.write_text(json.dumps(doc))
    line = error_line(compare("report", str(old)))
    assert "schema_version 0" in line and "old.json" in line
    assert "does not exist" in error_line(compare("report", str(tmp_path / "missing.json")))
    assert "is malformed JSON" in error_line(compare("report", __file__))


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has a CUDA device")
def test_a_device_that_is_not_present(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    result = compare("time", *FAST, "--frameworks", "torch", "--device", "cuda", "--json", str(out))
    line = error_line(result, after_progress=True)
    assert line == "error: device 'cuda' is not present for framework 'torch' (available: cpu)"
    assert not out.exists()
