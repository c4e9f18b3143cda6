"""Class 9, reports: a results file is type-checked field by field on read, the same run given
twice is refused instead of being ranked against itself, and a run's warnings are printed beside
its row."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.adversarial import refused, run_cli
from tests.results_docs import results_doc


def write(folder: Path, name: str, doc: dict[str, Any]) -> Path:
    path = folder / name
    path.write_text(json.dumps(doc))
    return path


def broken(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(results_doc())
    target: Any = doc
    for key in path[:-1]:
        target = target[int(key)] if isinstance(target, list) else target[key]
    target[path[-1]] = value
    return doc


@pytest.mark.parametrize("path, value, expect", [
    (("runs", "0", "conditions", "batch"), "eight",
     "runs[0].conditions.batch is 'eight', expected an integer"),
    (("runs", "0", "phases"), None, "runs[0].phases is None, expected an object"),
    (("runs", "0", "phases", "forward_eager", "median"), "fast", "forward_eager.median is 'fast'"),
    (("runs", "0", "phases", "forward_eager", "median"), -1.0, "expected a non-negative number"),
    (("runs", "0", "memory", "peak_rss_bytes"), 1.5, "memory.peak_rss_bytes is 1.5"),
    (("runs", "0", "framework"), 7, "runs[0].framework is 7, expected a string"),
    (("runs",), {"torch": 1}, "'runs' is {'torch': 1}, expected a list"),
    (("conditions",), [], "'conditions' is [], expected an object"),
    (("runs", "0", "conditions", "threads"), True, "conditions.threads is True, expected an integer"),
])
def test_a_field_of_the_wrong_type_is_refused(tmp_path: Path, path: tuple[str, ...], value: Any,
                                              expect: str) -> None:
    file = write(tmp_path, "r.json", broken(path, value))
    refused(tmp_path, "report", file.name, expect=expect)


def test_the_same_file_twice_is_refused(tmp_path: Path) -> None:
    write(tmp_path, "r.json", results_doc())
    refused(tmp_path, "report", "r.json", "r.json", expect="repeats the torch run already read from")


def test_a_copy_of_a_run_is_refused(tmp_path: Path) -> None:
    write(tmp_path, "a.json", results_doc())
    write(tmp_path, "b.json", results_doc())
    refused(tmp_path, "report", "a.json", "b.json", expect="'b.json' repeats the torch run")


def test_a_run_in_a_merged_file_is_refused_beside_its_own_file(tmp_path: Path) -> None:
    """report --json writes a file of its own `created` time holding the runs it merged: merged
    again beside a source, the same run was ranked against itself."""
    write(tmp_path, "a.json", results_doc())
    outcome = run_cli("report", "a.json", "--json", "m.json", cwd=tmp_path)
    assert outcome.code == 0, outcome.stderr
    refused(tmp_path, "report", "m.json", "a.json", expect="'a.json' repeats the torch run already read from "
            "'m.json'")


def test_an_oversubscribed_run_is_warned_about_beside_its_row(tmp_path: Path) -> None:
    note = "999 threads requested but only 2 CPUs usable: oversubscribed"
    write(tmp_path, "r.json", results_doc(threads=999, note=note))
    outcome = run_cli("report", "r.json", cwd=tmp_path)
    assert outcome.code == 0, outcome.stderr
    assert f"torch@r: WARNING: {note}" in outcome.stdout


def test_a_valid_file_still_reads(tmp_path: Path) -> None:
    write(tmp_path, "r.json", results_doc())
    outcome = run_cli("report", "r.json", cwd=tmp_path)
    assert outcome.code == 0 and "torch" in outcome.stdout, outcome.stderr


# ---- every field a reader uses, checked once on load for the text table and the HTML page alike
INF, NAN = float("inf"), float("nan")
ROW = ("runs", "0")
EAGER = (*ROW, "phases", "forward_eager")
CHECK = (*ROW, "equivalence", "eager")
REFUSED_FIELDS = [
    ((*ROW, "conditions", "spec_hash"), None, "conditions.spec_hash is None, expected a value"),
    ((*ROW, "conditions", "spec_hash"), "", "conditions.spec_hash is '', expected a value"),
    ((*ROW, "conditions", "batch"), None, "conditions.batch is None, expected a value"),
    ((*EAGER, "median"), INF, "forward_eager.median is inf, expected a non-negative number (finite)"),
    ((*EAGER, "median"), NAN, "forward_eager.median is nan"),
    ((*EAGER, "iqr"), -0.001, "forward_eager.iqr is -0.001, expected a non-negative number"),
    ((*EAGER, "q1"), 0.0025, "median 0.002 lies outside its quartiles q1 0.0025 .. q3 0.0025"),
    ((*EAGER, "n"), 0, "forward_eager.n is 0, expected an integer >= 1"),
    ((*EAGER, "samples"), [0.001, "0.002"], "forward_eager.samples[1] is '0.002'"),
    ((*CHECK, "max_abs_err"), "2e-7",
     "equivalence.eager.max_abs_err is '2e-7', expected a non-negative number"),
    ((*CHECK, "atol"), "5e-6", "equivalence.eager.atol is '5e-6'"),
    ((*CHECK, "passed"), "no", "equivalence.eager.passed is 'no', expected a boolean"),
    ((*CHECK, "passed"), 0, "equivalence.eager.passed is 0, expected a boolean"),
    ((*ROW, "equivalence"), [], "runs[0].equivalence is [], expected an object or null"),
    ((*ROW, "equivalence", "eager"), [True], "equivalence.eager is [True], expected an object"),
    ((*ROW, "roofline"), [], "runs[0].roofline is [], expected an object or null"),
    ((*ROW, "roofline", "gemm", "gflops"), "50", "roofline.gemm.gflops is '50'"),
    ((*ROW, "roofline", "phases", "forward_eager", "fraction"), "0.2", "forward_eager.fraction is '0.2'"),
    ((*ROW, "threads_applied"), [1], "runs[0].threads_applied is [1], expected an object or null"),
    ((*EAGER,), [0.002], "phases.forward_eager is [0.002], expected an object"),
    ((*ROW, "memory"), [], "runs[0].memory is [], expected an object"),
    ((*ROW, "notes"), "contended", "runs[0].notes is 'contended', expected a list"),
    # the machine of a row merged by report --json, which report reads (internal error before)
    ((*ROW, "host"), "vm", "runs[0].host is 'vm', expected an object or null"),
    (("environment", "git_dirty"), "no", "'environment'.git_dirty is 'no', expected a boolean"),
    (("created",), 20261201, "'created' is 20261201, expected a string"),
    (("command",), "compare.py time", "'command' is 'compare.py time', expected a list"),
    # a statistic a worker always states as a number (stats.summarise) is never null: the tables
    # divided, compared or joined it (`internal error TypeError` before)
    ((*EAGER, "iqr"), None, "results file 'r.json': runs[0].phases.forward_eager.iqr is None, expected a "
                            "non-negative number"),
    ((*EAGER, "n"), None, "runs[0].phases.forward_eager.n is None, expected an integer >= 1"),
    ((*EAGER, "q1"), None, "runs[0].phases.forward_eager.q1 is None, expected a non-negative number"),
    ((*ROW, "roofline", "gemm", "dtype"), None, "runs[0].roofline.gemm.dtype is None, expected a string"),
    ((*ROW, "roofline", "phases", "forward_eager", "gflops"), None,
     "runs[0].roofline.phases.forward_eager.gflops is None, expected a non-negative number"),
    ((*ROW, "sweep_point"), {"batch": None, "tokens": 4}, "runs[0].sweep_point.batch is None, expected an "
                                                          "integer >= 1"),
    ((*ROW, "sweep_point"), {"batch": 2, "tokens": None}, "runs[0].sweep_point.tokens is None"),
    ((*ROW, "sweep_point"), {"batch": 2, "tokens": 0},
     "runs[0].sweep_point.tokens is 0, expected an integer >= 1"),
    ((*ROW, "sweep_point"), {"batch": 2}, "runs[0].sweep_point lacks the field 'tokens'"),
]


@pytest.mark.parametrize("output", ["text", "html"])
@pytest.mark.parametrize("path, value, expect", REFUSED_FIELDS)
def test_every_field_a_reader_uses_is_checked_on_load(tmp_path: Path, path: tuple[str, ...], value: Any,
                                                      expect: str, output: str) -> None:
    write(tmp_path, "r.json", broken(path, value))
    html = ("--html", "page.html") if output == "html" else ()
    refused(tmp_path, "report", "r.json", *html, expect=expect)


def test_a_missing_spec_hash_is_refused_not_ranked_with_another_spec(tmp_path: Path) -> None:
    """Before, two rows without a spec_hash compared equal (None == None) and were ranked."""
    doc = broken((*ROW, "conditions", "spec_name"), "vit-b16")
    del doc["runs"][0]["conditions"]["spec_hash"]
    write(tmp_path, "a.json", doc)
    other = broken((*ROW, "conditions", "spec_name"), "quadrant")
    del other["runs"][0]["conditions"]["spec_hash"]
    other["created"] = "2026-12-02T00:00:00Z"
    write(tmp_path, "b.json", other)
    refused(tmp_path, "report", "a.json", "b.json", expect="a.json': runs[0].conditions.spec_hash is None")


def test_an_unranked_row_may_lack_the_ranking_conditions(tmp_path: Path) -> None:
    """An `unavailable` row (a framework not installed) states no spec: it is shown, not ranked."""
    doc = results_doc()
    doc["runs"].append({"framework": "onnx", "status": "unavailable", "conditions": {}, "phases": {},
                        "memory": {}, "reason": "onnxruntime is not installed"})
    write(tmp_path, "r.json", doc)
    outcome = run_cli("report", "r.json", "--html", "page.html", cwd=tmp_path)
    assert outcome.code == 0, outcome.stderr
    assert "onnx" in outcome.stdout and (tmp_path / "page.html").is_file()


def test_a_sweep_fit_and_a_roofline_phase_are_checked_too(tmp_path: Path) -> None:
    doc = results_doc()
    doc["sweep"] = {"fits": {"torch": {"points": 3, "time": {"batch": "0.9", "tokens": None}}}}
    write(tmp_path, "s.json", doc)
    refused(tmp_path, "report", "s.json", "--html", "p.html", expect="'sweep'.fits.torch.time.batch is '0.9'")
    doc = broken((*ROW, "roofline", "phases", "bogus"), {"gflops": 1.0, "fraction": 0.1})
    write(tmp_path, "r.json", doc)
    refused(tmp_path, "report", "r.json", "--html", "p.html",
            expect="roofline.phases has unknown key(s) ['bogus']")


# ---- a field left out where the tables need it, and the nulls a writer does produce -------------
@pytest.mark.parametrize("output", ["text", "html"])
@pytest.mark.parametrize("field, expect", [
    ("iqr", "results file 'r.json': runs[0].phases.forward_eager lacks the field 'iqr', which an ok phase of "
            "n 3 > 1 states"),
    ("median", "results file 'r.json': runs[0].phases.forward_eager lacks the field 'median', which an ok "
               "phase states"),
])
def test_a_statistic_the_table_prints_may_not_be_left_out(tmp_path: Path, field: str, expect: str,
                                                          output: str) -> None:
    doc = results_doc()
    del doc["runs"][0]["phases"]["forward_eager"][field]
    write(tmp_path, "r.json", doc)
    html = ("--html", "page.html") if output == "html" else ()
    assert refused(tmp_path, "report", "r.json", *html) == f"error: {expect}"


def test_what_a_writer_leaves_out_or_writes_as_null_still_reads(tmp_path: Path) -> None:
    """A single measurement needs no IQR, a file from before the precision ladder has no GEMM
    dtype (float32), a cached mode's candidate may lack its median (printed `-`), and a CPU share
    that could not be measured is null: each is shown, not refused."""
    doc = results_doc()
    row = doc["runs"][0]
    row["phases"]["import"] = {"status": "ok", "samples": [1.5], "n": 1, "median": 1.5}
    row["phases"]["forward_eager"].update(cpu_util=None, foreign_cpu=None, note=None)
    row["roofline"]["gemm"] = {"status": "ok", "gflops": 50.0}  # no dtype
    row["mode_choice"] = {"chosen": "explicit", "source": "cached", "offered": ["explicit", "fused"],
                          "candidates": [{"mode": "explicit", "status": "ok"},
                                         {"mode": "fused", "status": "ok", "median": 0.003}]}
    write(tmp_path, "r.json", doc)
    outcome = run_cli("report", "r.json", "--html", "page.html", cwd=tmp_path)
    assert outcome.code == 0, outcome.stderr
    assert "torch@r explicit (cached: explicit -, fused 3ms)" in outcome.stdout
    assert "roof, best forward / float32 GEMM GFLOP/s: torch@r 10/50" in outcome.stdout
    assert "1.5s" in (tmp_path / "page.html").read_text()
