"""A port that breaks the precision contract (shared/core/precision.py) fails `verify` and is never
ranked by `time`, both through the one verdict (shared/core/equivalence.check_logits). The
breach is planted at the worker's test hook: `PORTBENCH_TEST_FAULT=torch:breach` makes the torch
port report its token stream (`block0.out`) in bfloat16 where bfloat16-mixed holds it in float32
(the mistake a global mixed policy makes); its values are untouched, so the logits alone pass.
Contract dtypes are read below float32 only, so the runs are at bfloat16-mixed; quadrant, eager,
torch alone: about 20 s of worker each, in the background (tests/background.py)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from shared.core.equivalence import PortVerdict
from shared.measure import schema
from tests import background
from tests.timing_helpers import FAST, finish, start_compare

RUNG = ["--dtype", "bfloat16", "--precision", "mixed"]
BREACH = ("'block0.out' was computed in bfloat16, the bfloat16-mixed contract holds it in float32")


@background.task("contract-breach", "test_contract_breach.py::")
def breached_runs(start: background.Start) -> dict[str, tuple[Path, object]]:
    """`verify` and `time` on the breached torch port, started together."""
    root = Path(tempfile.mkdtemp(prefix="portbench-breach-"))
    verified, timed = root / "verify.json", root / "time.json"
    procs = {
        "verify": (verified, start(start_compare("verify", "--spec", "quadrant", "--frameworks", "torch",
                                                 *RUNG, "--json", str(verified), fault="torch:breach"))),
        "time": (timed, start(start_compare("time", *FAST, "--frameworks", "torch", *RUNG, "--json",
                                            str(timed), fault="torch:breach"))),
    }
    return {name: (path, finish(proc)) for name, (path, proc) in procs.items()}


@pytest.fixture(scope="module")
def runs() -> dict[str, tuple[Path, object]]:
    return background.result("contract-breach")


def test_verify_fails_the_port_that_breaks_the_contract(runs) -> None:
    path, result = runs["verify"]
    assert result.returncode == 1, result.stderr
    verdict = PortVerdict.from_dict(json.loads(path.read_text())["entries"][0])
    assert verdict.status == "FAIL" and verdict.reason == BREACH
    assert verdict.dtypes["block0.out"] == "bfloat16" and verdict.dtypes["block0.mlp"] == "bfloat16"
    assert verdict.max_abs_diff < verdict.tolerance  # the logits alone would pass: only the contract fails
    assert "0 passed, 1 failed" in result.stdout and BREACH.split(",")[0] in result.stdout


def test_time_refuses_to_rank_the_same_port(runs) -> None:
    path, result = runs["time"]
    assert result.returncode == 1, result.stderr
    row = schema.load(path)["runs"][0]
    assert row["status"] == "invalid" and row["reason"] == f"equivalence gate failed in eager mode: {BREACH}"
    verdict = PortVerdict.from_dict(row["equivalence"]["eager"])
    assert verdict.reason == BREACH and verdict.max_abs_diff < verdict.tolerance
    assert "forward_eager" not in row["phases"]  # an invalid port is not timed further
    # the port column names the mode the row ran (torch/fused, torch/explicit)
    cells = next(cells for cells in map(str.split, result.stdout.splitlines())
                 if cells[1:2] and cells[1].split("/")[0] == "torch")
    assert cells[0] == "-" and cells[-1] == "INVALID"  # the rank column: not ranked
