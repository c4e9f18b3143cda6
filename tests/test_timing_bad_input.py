"""Bad input to `compare.py time` / `report`: one line naming the problem, exit 2, and no earlier
results file overwritten. Each refusal is a `compare.py` process of its own, as a user meets it:
they run together in the background (tests/background.py), and each test reads its outcome."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from shared.measure import schema
from tests import background
from tests.timing_helpers import FAST, error_line

UNKNOWN_VALUES = [
    (["--spec", "no-such-spec"], "--spec 'no-such-spec' is neither a preset"),
    (["--frameworks", "torch,mxnet"], "unknown framework 'mxnet'"),
    (["--device", "tpu"], "argument --device: invalid choice: 'tpu'"),
    (["--modes", "eager,turbo"], "unknown mode 'turbo'; expected one of: eager, compiled, train"),
    (["--modes", "eager, eager"], "--modes 'eager, eager' names 'eager' twice"),  # was timed twice
    (["--batch", "0"], "argument --batch: 0 is not a whole number >= 1"),
    (["--rank-by", "speed"], "unknown ranking metric 'speed'"),
    (["--min-repeats", "2"], "--min-repeats 2: at least 3 (a median of fewer timed calls"),
]
EARLIER = "{\"earlier\": true}"
NO_CUDA = shutil.which("nvidia-smi") is None


def _commands(folder: Path) -> dict[str, list[str]]:
    """Each refusal's command line, its files made in `folder` first."""
    (folder / "a-file").write_text("")
    (folder / "r.json").write_text(EARLIER)
    (folder / "merged.csv").write_text("earlier")
    old = schema.new_results({}, {}, [], "2026-01-01T00:00:00Z", ["compare.py"])
    (folder / "old.json").write_text(json.dumps({**old, "schema_version": 0}))
    time = ["time", *FAST, "--frameworks", "torch"]
    commands = {f"unknown-{i}": [*time, *args, "--json", f"unknown-{i}.json"]
                for i, (args, _) in enumerate(UNKNOWN_VALUES)}
    commands |= {
        "sweep-train": ["sweep", "--spec", "quadrant", "--batch", "1,2", "--frameworks", "torch",
                        "--modes", "eager, train", "--json", "s.json"],
        "unwritable": [*time, "--json", str(Path("a-file") / "sub" / "r.json")],
        "existing-time": [*time, "--json", "r.json"],
        "existing-report": ["report", "r.json", "--csv", "merged.csv"],
        "old-schema": ["report", "old.json"],
        "missing": ["report", "missing.json"],
        "not-json": ["report", __file__],
    }
    if NO_CUDA:
        commands["cuda"] = [*time, "--device", "cuda", "--json", "cuda.json"]
    return commands


@background.task("timing-refusals", "test_timing_bad_input.py::")
def timing_refusals(start: background.Start) -> tuple[Path, dict[str, subprocess.CompletedProcess]]:
    folder = Path(tempfile.mkdtemp(prefix="portbench-timing-refusals-"))
    outcomes = {}
    for name, argv in _commands(folder).items():
        outcome = background.compare_py(start, *argv, cwd=folder)
        outcomes[name] = subprocess.CompletedProcess(argv, outcome.code, outcome.stdout, outcome.stderr)
    return folder, outcomes


@pytest.mark.parametrize("case", range(len(UNKNOWN_VALUES)), ids=[e for _, e in UNKNOWN_VALUES])
def test_unknown_values_are_one_line_errors(case: int) -> None:
    folder, outcomes = background.result("timing-refusals")
    assert UNKNOWN_VALUES[case][1] in error_line(outcomes[f"unknown-{case}"])
    assert not (folder / f"unknown-{case}.json").exists()


def test_a_sweep_refuses_train_however_the_modes_are_spaced() -> None:
    """`--modes "eager, train"` passed the sweep's check (it split without stripping) and the sweep
    then timed training, which its fit does not model."""
    folder, outcomes = background.result("timing-refusals")
    assert "unknown mode 'train'; expected one of: eager, compiled" in error_line(outcomes["sweep-train"])
    assert not (folder / "s.json").exists()


def test_unwritable_output_is_refused_before_timing() -> None:
    line = error_line(background.result("timing-refusals")[1]["unwritable"])
    assert "cannot be created" in line and "a-file" in line


def test_existing_results_are_not_overwritten_without_force() -> None:
    folder, outcomes = background.result("timing-refusals")
    assert "already exists; pass --force" in error_line(outcomes["existing-time"])
    assert (folder / "r.json").read_text() == EARLIER
    assert "already exists" in error_line(outcomes["existing-report"])
    assert (folder / "merged.csv").read_text() == "earlier"


def test_report_refuses_another_schema_version() -> None:
    outcomes = background.result("timing-refusals")[1]
    line = error_line(outcomes["old-schema"])
    assert "schema_version 0" in line and "old.json" in line
    assert "does not exist" in error_line(outcomes["missing"])
    assert "is malformed JSON" in error_line(outcomes["not-json"])


@pytest.mark.skipif(not NO_CUDA, reason="this machine has a CUDA device")
def test_a_device_that_is_not_present() -> None:
    folder, outcomes = background.result("timing-refusals")
    line = error_line(outcomes["cuda"], after_progress=True)
    assert line == "error: device 'cuda' is not present for framework 'torch' (available: cpu)"
    assert not (folder / "cuda.json").exists()
