"""`compare.py sweep`: the log-log slope fit on known synthetic timings, bad lists and a point that
cannot fit (refused before anything runs), and one tiny real sweep on `quadrant`. No test asserts
a speed."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import tempfile
from pathlib import Path

import pytest

from shared.measure import schema, sweep
from tests import background
from tests.timing_helpers import compare, error_line, finish, start_compare


def test_slope_fit_recovers_known_exponents() -> None:
    # time = 3e-4 * batch^0.9 * tokens^1.7, with a little multiplicative noise that cancels out.
    batches, tokens, times = [], [], []
    for b in (1, 8, 64):
        for n in (17, 65, 257):
            for wobble in (0.97, 1 / 0.97):
                batches.append(b)
                tokens.append(n)
                times.append(3e-4 * b**0.9 * n**1.7 * wobble)
    fit = sweep.fit_slopes(batches, tokens, times)
    assert fit["batch"] == pytest.approx(0.9, abs=1e-9)
    assert fit["tokens"] == pytest.approx(1.7, abs=1e-9)


def test_slope_fit_with_one_image_size_has_no_token_slope() -> None:
    fit = sweep.fit_slopes([1, 2, 4], [50, 50, 50], [1.0, 1.5, 2.25])
    assert fit["tokens"] is None
    assert fit["batch"] == pytest.approx(0.5849625, rel=1e-6)  # log2(1.5)
    assert sweep.fit_slopes([4], [50], [1.0]) == {"batch": None, "tokens": None}


@pytest.mark.parametrize(("args", "expected"), [
    (["--batch", ""], "argument --batch: '' is empty; expected comma-separated whole numbers, e.g. 1,8,64"),
    (["--batch", "1,x,8"], "--batch has 'x'"),
    (["--batch", "1,8", "--image", "32,-4"], "--image has '-4'"),
    (["--batch", "1,01"], "--batch '1,01' names '01' twice; name each once"),
])
def test_bad_lists_are_one_line_errors(args: list[str], expected: str) -> None:
    assert expected in error_line(compare("sweep", "--spec", "quadrant", *args))


def test_a_point_that_cannot_fit_is_refused_before_running(tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    line = error_line(compare("sweep", "--spec", "vit-b16", "--batch", "1,100000000", "--json", str(out)))
    assert "needs about" in line and "at batch 100000000" in line and "available" in line
    assert not out.exists()


@background.task("tiny-sweep", "test_timing_sweep.py::test_tiny_sweep")
def tiny_sweep(start: background.Start) -> tuple[Path, subprocess.CompletedProcess]:
    """Four sweep points, a worker each, in the background (tests/background.py)."""
    out = Path(tempfile.mkdtemp(prefix="portbench-sweep-")) / "sweep.json"
    return out, finish(start(start_compare("sweep", "--spec", "quadrant", "--batch", "1,4", "--image", "8,16",
                                           "--frameworks", "torch", "--modes", "eager", "--budget", "0.02",
                                           "--json", str(out))))


def test_tiny_sweep_writes_fits_csv_and_chart() -> None:
    out, result = background.result("tiny-sweep")
    assert result.returncode == 0, result.stderr
    assert "time ~ batch^" in result.stdout and "tokens^" in result.stdout
    doc = schema.load(out)  # a results file `compare.py report` can read
    assert [r["sweep_point"]["batch"] for r in doc["runs"]] == [1, 4, 1, 4]
    assert sorted({r["sweep_point"]["tokens"] for r in doc["runs"]}) == [5, 17]
    fit = doc["sweep"]["fits"]["torch"]
    assert fit["points"] == 4 and isinstance(fit["time"]["batch"], float)
    assert isinstance(fit["time"]["tokens"], float)
    lines = list(csv.DictReader(io.StringIO(out.with_suffix(".csv").read_text())))
    assert len(lines) == 4 and {line["mode"] for line in lines} == {"forward_eager"}
    assert out.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"
    again = compare("sweep", "--spec", "quadrant", "--batch", "1", "--frameworks", "torch",
                    "--json", str(out))
    assert "already exists" in error_line(again)
    assert json.loads(out.read_text())["sweep"]["batches"] == [1, 4]  # untouched
