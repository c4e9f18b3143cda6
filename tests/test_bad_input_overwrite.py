"""Class 5, no user file overwritten without --force, and no race: every writer publishes
atomically and exclusively (shared/core/files.py), so the existence check and the rename are one
step and two writers started together cannot both succeed."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from shared.core.files import write_output
from shared.errors import InputError
from tests import background
from tests.adversarial import refused, run_cli

ROOT = Path(__file__).resolve().parents[1]
Q = ["--spec", "quadrant"]


@pytest.mark.parametrize("name, argv", [
    ("w.safetensors", ["init", *Q, "--out", "w.safetensors"]),
    ("y.npy", ["logits", *Q, "--framework", "reference", "--out", "y.npy"]),
    ("t.json", ["trace", *Q, "--frameworks", "reference", "--json", "t.json"]),
    ("v.json", ["verify", *Q, "--frameworks", "torch", "--json", "v.json"]),
    ("d.json", ["divergences", "layer_norm_eps", "--json", "d.json"]),
])
def test_an_existing_output_is_kept_without_force(tmp_path: Path, name: str, argv: list[str]) -> None:
    (tmp_path / name).write_bytes(b"the user's own file")
    refused(tmp_path, *argv, expect="already exists; pass --force")


def test_force_replaces(tmp_path: Path) -> None:
    (tmp_path / "y.npy").write_bytes(b"old")
    outcome = run_cli("logits", *Q, "--framework", "reference", "--out", "y.npy", "--force", cwd=tmp_path)
    assert outcome.code == 0 and (tmp_path / "y.npy").read_bytes() != b"old"


def test_concurrent_writers_one_wins(tmp_path: Path) -> None:
    target, barrier, results = tmp_path / "out.bin", threading.Barrier(8), []

    def attempt(i: int) -> None:
        barrier.wait()
        try:
            write_output(target, bytes([i]) * 1000)
            results.append(i)
        except InputError:
            pass

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 1 and target.read_bytes() == bytes([results[0]]) * 1000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.bin"]  # no temporary file left


def test_two_init_processes_to_one_path(tmp_path: Path) -> None:
    command = [sys.executable, str(ROOT / "compare.py"), "init", *Q, "--out", "w.safetensors"]
    procs = [subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    codes = sorted(p.wait(timeout=120) for p in procs)
    assert codes == [0, 2], [p.stderr.read() for p in procs if p.stderr]


def test_train_keeps_checkpoints_and_outputs_without_resume_or_force(tmp_path: Path) -> None:
    from shared.core.presets import get_preset
    from shared.core.train_spec import get_recipe
    from shared.training.data import load_dataset
    from shared.training.trainloop import train_seed

    spec, recipe = get_preset("quadrant"), get_recipe("quick").replace(max_epochs=1)
    data = load_dataset("quadrant", spec, recipe.validation_fraction, 0)
    train_seed("torch", spec, recipe, data, 0, checkpoint_dir=tmp_path / "ck" / "seed0", log=lambda s: None)
    train = ["train", *Q, "--framework", "torch", "--epochs", "1", "--checkpoints", "ck"]
    refused(tmp_path, *train, expect="already holds a checkpoint for seed 0; pass --resume")
    (tmp_path / "t.json").write_text("{}")
    refused(tmp_path, *train, "--resume", "--json", "t.json", expect="already exists; pass --force")


# ---- exclusive at the moment of writing, for every output of a timing run ------------------------
FAST = ["--spec", "quadrant", "--modes", "eager", "--budget", "0.02", "--min-repeats", "3", "--max-repeats",
        "5", "--warmup", "1", "--eval-batches", "1", "--batch", "4", "--frameworks", "torch"]


def test_a_file_created_at_the_json_path_during_the_run_is_kept(tmp_path: Path, monkeypatch) -> None:
    """Without --force. The timing itself is canned (`canned_rows`): what is checked is the
    publishing, after it; `test_two_time_runs_given_the_same_json_one_wins` runs real ones."""
    from shared.cli import time as time_cli

    def user_writes_meanwhile(*args, **kwargs):
        (tmp_path / "r.json").write_text("the user's own file, made during the run")
        return canned_rows(*args, **kwargs)

    monkeypatch.setattr(time_cli, "time_spec", user_writes_meanwhile)
    outcome = run_cli("time", *FAST, "--frameworks", "torch", "--json", "r.json", cwd=tmp_path)
    assert outcome.code == 2 and "'r.json' already exists" in outcome.error, outcome.stderr
    assert (tmp_path / "r.json").read_text() == "the user's own file, made during the run"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]  # no CSV, chart or temporary


@background.task("two-time-runs", "test_bad_input_overwrite.py::test_two_time_runs")
def two_time_runs(start: background.Start) -> tuple[Path, list[tuple[int, str]]]:
    """Two `time` runs at once into one folder, in the background (tests/background.py)."""
    folder = Path(tempfile.mkdtemp(prefix="portbench-two-runs-"))
    command = [sys.executable, str(ROOT / "compare.py"), "time", *FAST, "--frameworks", "torch", "--json",
               "r.json"]
    procs = [start(subprocess.Popen(command, cwd=folder, env=background.ENVIRON, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)) for _ in range(2)]
    errors = [p.communicate(timeout=300)[1] for p in procs]
    return folder, [(p.returncode, err) for p, err in zip(procs, errors, strict=True)]


def test_two_time_runs_given_the_same_json_one_wins() -> None:
    folder, done = background.result("two-time-runs")
    assert sorted(code for code, _ in done) == [0, 2], done
    loser = next(err for code, err in done if code == 2)
    assert "already exists" in loser.strip().splitlines()[-1] and "Traceback" not in loser
    import json

    json.loads((folder / "r.json").read_text())  # whole, the winner's
    assert sorted(p.name for p in folder.iterdir()) == ["r.csv", "r.json", "r.png"]  # no temporary


# ---- --force replaces what was there before the work, never a file that appeared during it -------
def canned_rows(*args, **kwargs) -> list[dict]:
    """A timing run's rows without timing anything (tests/results_docs.py)."""
    from tests.results_docs import results_doc

    return results_doc()["runs"]


def report_input(folder: Path) -> str:
    import json

    from tests.results_docs import results_doc

    (folder / "in.json").write_text(json.dumps(results_doc()))
    return "in.json"


# command -> (argv, the module attribute it calls during its work, the output made meanwhile);
# `time`'s step is replaced, not wrapped: `canned_rows` stands in for the timing itself
DURING = {
    "init": (["init", *Q, "--out", "o.safetensors"], "shared.cli.init.init_weights", "o.safetensors"),
    "logits": (["logits", *Q, "--framework", "reference", "--out", "o.npy"],
               "shared.cli.logits.resolve_model", "o.npy"),
    "report": (["report", "in.json", "--json", "o.json", "--html", "o.html"], "shared.cli.report.merge",
               "o.html"),
    "time": (["time", *FAST, "--json", "o.json"], "shared.cli.time.time_spec", "o.csv"),
    "train": (["train", *Q, "--framework", "torch", "--epochs", "1", "--quiet", "--checkpoints", "ck",
               "--json", "o.json"], "shared.cli.train.train_seeds", "o.png"),
}


@pytest.mark.parametrize("command", list(DURING))
@pytest.mark.parametrize("before", [None, b"the user's file, there when the run started"])
def test_a_file_made_at_an_output_during_a_forced_run_is_kept(tmp_path: Path, monkeypatch, command: str,
                                                                 before: bytes | None) -> None:
    """--force means "replace what is there now": a file that appears at an output while the run
    works (or replaces the one that was there) is someone else's. The step the command calls
    mid-run makes it; the run then ends in one line, keeps it, and publishes none of its outputs."""
    import importlib

    argv, where, name = DURING[command]
    if command == "report":
        report_input(tmp_path)
    if before is not None:
        (tmp_path / name).write_bytes(before)
    module_name, attribute = where.rsplit(".", 1)
    module = importlib.import_module(module_name)
    real = canned_rows if command == "time" else getattr(module, attribute)
    made = b"another writer's file, made while the run worked"

    def another_writer_meanwhile(*args, **kwargs):
        replacement = tmp_path / f"{name}.new"
        replacement.write_bytes(made)
        replacement.replace(tmp_path / name)  # a new file at that name, as an editor saves one
        return real(*args, **kwargs)

    monkeypatch.setattr(module, attribute, another_writer_meanwhile)
    outcome = run_cli(*argv, "--force", cwd=tmp_path)
    happened = "was created" if before is None else "was replaced or changed"
    assert outcome.code == 2, outcome.stderr
    assert f"output {name!r} {happened} while the run worked; it is kept" in outcome.error
    assert (tmp_path / name).read_bytes() == made
    outputs = {p.name for p in tmp_path.iterdir() if p.name.startswith("o.")}
    assert outputs == {name}, outputs  # none of the run's own outputs published, no temporary
    assert not [p for p in tmp_path.rglob("*.tmp")]


def test_force_replaces_the_file_that_was_there_when_the_run_started(tmp_path: Path) -> None:
    report_input(tmp_path)
    (tmp_path / "o.json").write_text("the old merged results")
    outcome = run_cli("report", "in.json", "--json", "o.json", "--force", cwd=tmp_path)
    assert outcome.code == 0, outcome.stderr
    assert '"runs"' in (tmp_path / "o.json").read_text()


def test_a_commands_json_and_page_are_published_together(tmp_path: Path) -> None:
    """trace and lessons wrote --json, then --html: a page file made meanwhile refused the second
    and left the first published, half the run's outputs."""
    import argparse

    from shared.cli._common import write_json_and_page
    from shared.errors import PortbenchError

    page = tmp_path / "t.html"
    page.write_text("made during the run")
    args = argparse.Namespace(json=str(tmp_path / "t.json"), html=str(page), force=False)
    with pytest.raises(PortbenchError, match="already exists"):
        write_json_and_page(args, [{"tap": 1}], lambda: "<html></html>")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.html"]
    assert page.read_text() == "made during the run"
    page.unlink()
    write_json_and_page(args, [{"tap": 1}], lambda: "<html></html>")
    assert json.loads((tmp_path / "t.json").read_text()) == [{"tap": 1}]
    assert page.read_text() == "<html></html>"
