"""End-to-end `compare.py time` / `report` runs on the tiny `quadrant` spec (and `packed-tiny`),
eager mode only (a cold torch.compile alone takes 15-60 s on a shared 2-core CPU). No test asserts
a speed."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from shared.measure import guard, schema
from shared.measure.contention import is_contended
from tests import background
from tests.timing_helpers import FAST, compare, finish, start_compare


@background.task("timing-runs", "test_timing_runs.py::")
def timing_runs(start: background.Start) -> dict[str, tuple[Path, object]]:
    """Three runs, started together, in the background (tests/background.py):
    - main: the bare job's one pass, on torch and flax;
    - isolation: flax crashes (SIGSEGV) and keras hangs on purpose; torch must still be timed
      (the 20 s timeout is about 3x a quadrant torch worker on a loaded 2-core CPU);
    - tampered: torch with a head bias 1e-3 off the reference's, on 2 threads;
    - packed: torch on packed-tiny, whose 4 sequences hold 12 images (a logits row each)."""
    root = Path(tempfile.mkdtemp(prefix="portbench-timing-"))
    iso, tampered, main = root / "run.json", root / "tampered.json", root / "main.json"
    packed = root / "packed.json"
    procs = {
        "main": (main, start(start_compare("main", *FAST, "--frameworks", "torch,flax", "--json",
                                           str(main)))),
        "isolated": (iso, start(start_compare("time", *FAST, "--frameworks", "flax,keras,torch", "--threads",
                                              "1", "--timeout", "20", "--json", str(iso),
                                              fault="flax:crash,keras:hang"))),
        "tampered": (tampered, start(start_compare("time", *FAST, "--frameworks", "torch", "--threads", "2",
                                                   "--json", str(tampered), fault="torch:tamper"))),
        "packed": (packed, start(start_compare("time", *FAST, "--spec", "packed-tiny", "--modes",
                                               "eager,train", "--frameworks", "torch", "--json",
                                               str(packed)))),
    }
    return {name: (path, finish(proc)) for name, (path, proc) in procs.items()}


@background.task("keras-logits", "test_timing_runs.py::test_tensorflow_start_up_lines")
def keras_logits(start: background.Start) -> tuple[Path, object]:
    """`logits` in Keras, whose TensorFlow start-up lines must stay out of its output: a task of its
    own, not a fifth process started with the timing runs, whose timeouts assume their four."""
    out = Path(tempfile.mkdtemp(prefix="portbench-keras-logits-")) / "k.npy"
    return out, finish(start(start_compare("logits", "--framework", "keras", "--spec", "quadrant", "--out",
                                           str(out))))


@pytest.fixture(scope="module")
def runs() -> dict[str, tuple[Path, object]]:
    return background.result("timing-runs")


@pytest.fixture(scope="module")
def isolated_run(runs) -> tuple[Path, object]:
    return runs["isolated"]


@pytest.fixture(scope="module")
def tampered_run(runs) -> tuple[Path, object]:
    return runs["tampered"]


def rows_by_framework(path: Path) -> dict[str, dict]:
    return {row["framework"]: row for row in schema.load(path)["runs"]}


def test_crash_and_hang_are_reported_and_the_rest_finish(isolated_run) -> None:
    path, result = isolated_run
    assert result.returncode == 1, result.stderr  # a failed worker is a failure of the run
    rows = rows_by_framework(path)
    assert rows["flax"]["status"] == "crashed"
    assert "SIGSEGV" in rows["flax"]["reason"]
    assert rows["keras"]["status"] == "timeout"
    assert "killed" in rows["keras"]["reason"]
    torch = rows["torch"]
    assert torch["status"] == "ok", torch.get("reason")
    for phase in ("import", "build_load", "first_call_eager", "prepare", "forward_eager", "eval_pass"):
        assert torch["phases"][phase]["status"] == "ok"
    forward = torch["phases"]["forward_eager"]
    assert forward["n"] == len(forward["samples"]) >= 3
    assert forward["q1"] <= forward["median"] <= forward["q3"]
    assert torch["phases"]["compile"] == {"status": "n/a", "reason": "compiled mode not requested (--modes)"}
    assert "CRASHED" in result.stdout and "TIMEOUT" in result.stdout
    assert path.with_suffix(".csv").read_text().count("\ntorch,") == 0  # source column comes first
    assert ",torch,ok," in path.with_suffix(".csv").read_text()
    assert path.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"


def test_thread_settings_are_applied_and_read_back(isolated_run, tampered_run) -> None:
    for (path, _), threads in ((isolated_run, 1), (tampered_run, 2)):
        torch = rows_by_framework(path)["torch"]
        applied = torch["threads_applied"]
        assert applied["framework"]["intra_op"] == threads  # read back from torch itself
        usable = len(schema.load(path)["environment"]["usable_cpus"])
        assert len(applied["affinity"]) == min(threads, usable)  # pinned before import
        assert torch["env"]["OMP_NUM_THREADS"] == str(threads)
        assert torch["env"]["TF_NUM_INTRAOP_THREADS"] == str(threads)
        assert torch["conditions"]["threads"] == threads
    single = rows_by_framework(isolated_run[0])["torch"]
    # Pinned to one CPU, the process cannot use more than one core's worth of time (5% slack
    # for clock granularity of process_time over a short loop).
    assert single["phases"]["forward_eager"]["cpu_util"] <= 1.05


def test_equivalence_gate_marks_a_tampered_port_invalid(tampered_run) -> None:
    path, result = tampered_run
    assert result.returncode == 1
    torch = rows_by_framework(path)["torch"]
    assert torch["status"] == "invalid"
    check = torch["equivalence"]["eager"]
    assert not check["passed"]
    # shared/core/tolerance.py: 5e-6 x max(1, max |reference logit|) for a small model; the 1e-3 shift
    # of every logit is far outside it, and is what the gate measured (plus fp32 rounding).
    assert 5e-6 <= check["atol"] < 1e-4 and check["max_abs_err"] == pytest.approx(1e-3, abs=check["atol"])
    assert "forward_eager" not in torch["phases"]  # an invalid port is not timed further
    assert "INVALID" in result.stdout and "equivalence gate failed" in result.stdout
    assert result.stdout.splitlines()[3].split()[0] == "-"  # not ranked


def test_report_merges_two_files_and_refuses_to_rank_them(isolated_run, tampered_run, tmp_path) -> None:
    merged = tmp_path / "merged.json"
    result = compare("report", str(isolated_run[0]), str(tampered_run[0]), "--json", str(merged),
                     "--csv", str(tmp_path / "m.csv"), "--chart", str(tmp_path / "m.png"))
    assert result.returncode == 0, result.stderr
    doc = schema.load(merged)
    assert sorted((r["source"], r["framework"]) for r in doc["runs"]) == [
        ("run", "flax"), ("run", "keras"), ("run", "torch"), ("tampered", "torch")]
    assert len(doc["merged_from"]) == 2
    # Only one valid row remains (the tampered one is INVALID), so it may be ranked alone, unless
    # its worker was contended (the three runs share the machine): then it says so instead.
    torch = next(r for r in doc["runs"] if r["source"] == "run" and r["framework"] == "torch")
    if is_contended(max(guard.worker_foreign(torch), key=lambda f: f or 0.0)):
        assert "torch@run: not comparable: contended: torch@run round 1" in result.stdout
    else:
        assert "ranked by fwd eager: torch@run\n" in result.stdout

    # The same file twice, once with its thread count edited: the guard names the field.
    other = json.loads(isolated_run[0].read_text())
    for row in other["runs"]:
        row["conditions"]["threads"] = 2
    copy_path = tmp_path / "two-threads.json"
    copy_path.write_text(json.dumps(other))
    result = compare("report", str(isolated_run[0]), str(copy_path))
    assert result.returncode == 0, result.stderr
    assert "not ranking these runs: threads differs (torch@run=1, torch@two-threads=2)" in result.stdout


def printed_ranking(doc: dict, out: str) -> None:
    """The table ranks exactly the rows the file's decision ranks (one "ranked by" line), names
    every other row "not comparable" with the recorded reason, and the decision is the rule's on
    the rows the file holds, whatever the machine's load was."""
    record = doc["ranking"][0]
    assert record == guard.ranking_record(doc["runs"])
    ranked = [r["framework"] for r in record["rows"] if r["rank"]]  # in the table's order
    assert out.count("ranked by") == (1 if ranked else 0)
    flat = " ".join(out.split())  # notes wrap at 100 columns
    if ranked:
        assert f"ranked by fwd eager: {', '.join(ranked)}" in flat
    for row in record["rows"]:
        if row["rank"] is None:
            assert f"{row['framework']}: not comparable: {row['why']}" in flat
    if ranked and all(r["rounds"] == 1 for r in record["rows"]):
        assert "ranks: one round, so the order was not checked across rounds" in flat


def test_main_job_verifies_in_its_one_timing_pass(runs) -> None:
    path, result = runs["main"]
    assert result.returncode == 0, result.stderr
    for framework in ("torch", "flax"):  # one worker each: no separate verification pass
        assert result.stderr.count(f"{framework}: fresh worker process") == 1, result.stderr
    assert "running torch" not in result.stderr  # `compare.py verify`'s own progress line
    out = result.stdout
    verdict, timing = out.index("framework | device | params"), out.index("rank  port")
    assert verdict < timing  # the gate's verdict table first, in verify's format
    assert out.lstrip().startswith("spec 'quadrant'")
    assert "pairwise max abs: torch~flax" in out
    assert "3 passed, 0 failed (the timing run's equivalence gate)" in out
    # Everything it prints fits 100 columns: the verdict, the pairwise line, the table, its
    # notes (one "ranked by" line per forward mode), the list of files it wrote, the progress.
    too_wide = [line for line in [*out.splitlines(), *result.stderr.splitlines()] if len(line) > 100]
    assert not too_wide, too_wide
    printed_ranking(schema.load(path), out)
    rows = rows_by_framework(path)
    assert set(rows) == {"torch", "flax"} and all(r["equivalence"]["eager"]["passed"] for r in rows.values())
    assert rows["torch"]["roofline"]["gemm"]["status"] == "ok"


def test_a_packed_batch_is_gated_and_trained_per_image(runs) -> None:
    """The gate reads the logits of the first sequences' images (3 rows a sequence), and the
    training step draws a label per image: the sequence count gave a shape error in both before."""
    path, result = runs["packed"]
    assert result.returncode == 0, result.stderr
    torch = rows_by_framework(path)["torch"]
    gate = torch["equivalence"]["eager"]
    assert torch["status"] == "ok" and gate["passed"] and gate["images"] == 12, gate
    assert torch["phases"]["train_step"]["status"] == "ok", torch["phases"]["train_step"]


def test_tensorflow_start_up_lines_stay_out_of_an_in_process_command() -> None:
    out, result = background.result("keras-logits")
    assert result.returncode == 0 and out.exists(), result.stderr
    for noise in ("absl::InitializeLog", "oneDNN custom operations", "cpu_feature_guard"):
        assert noise not in result.stderr + result.stdout
    assert result.stdout.startswith("wrote ")
