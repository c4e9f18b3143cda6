"""Class 10, outputs stay where the user put them: every writer's path goes through one check
(shared/core/paths.py `output_path`), names built from content (a spec's name) through
`name_part`, so no spec, file or option content can place an output outside the folder the user
named; two outputs of one run never name the same file; --force replaces only a regular file."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest

from shared.cli._outputs import output_paths
from shared.core.paths import inside, name_part
from tests.adversarial import refused, run_cli, snapshot

Q = ["--spec", "quadrant"]
HOSTILE = ["../x", "../../../../tmp/escape", "/etc/passwd", "a/../../b", "..", ".", "", "~root",
           "x\x00y", "new\nline", "\x1b[31mred", "C:\\windows", "." * 300, "sp ace", "results/../.."]


@pytest.mark.parametrize("name", HOSTILE)
def test_a_name_from_content_stays_in_its_folder(tmp_path: Path, name: str) -> None:
    part = name_part(name)
    assert "/" not in part and "\\" not in part and part not in ("", ".", "..") and not part.startswith(".")
    path = inside(tmp_path / "results", f"time-{name}-1.json")
    assert path.parent == tmp_path / "results"
    assert os.path.realpath(path).startswith(os.path.realpath(tmp_path / "results") + os.sep)


def _args(**given) -> argparse.Namespace:
    base = {"json": None, "csv": None, "chart": None, "no_chart": False, "html": None,
            "html_index": True, "force": False}
    return argparse.Namespace(**{**base, **given})


@pytest.mark.parametrize("name", HOSTILE[:6])
def test_the_default_results_of_a_spec_named_to_escape_stay_in_results(tmp_path: Path, name: str,
                                                                       monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    paths = output_paths(_args(), name)
    for path in paths.values():
        assert path is not None and path.resolve().parent == (tmp_path / "results").resolve(), path


def test_train_checkpoints_of_a_spec_named_to_escape_stay_in_runs(tmp_path: Path) -> None:
    spec = json.loads(run_cli("spec", "quadrant", "--json").stdout)["spec"]
    spec["name"] = "../../escaped"
    (tmp_path / "work").mkdir()
    outcome = run_cli("train", "--spec", json.dumps(spec), "--framework", "torch", "--epochs", "1",
                      "--quiet", "--data", "quadrant", "--recipe", "quick", cwd=tmp_path / "work")
    assert outcome.code == 0, outcome.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["work"]  # nothing beside or above it
    assert [p.name for p in (tmp_path / "work" / "runs").iterdir()] == ["_.._.._escaped-torch"]


def test_the_main_job_page_goes_beside_its_json(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    paths = output_paths(_args(json="sub/r.json"), "quadrant")
    assert paths["main_page"] == Path("sub/index.html")
    assert not (tmp_path / "results").exists()


def test_a_user_index_html_is_kept_and_the_main_jobs_own_is_replaced(tmp_path: Path) -> None:
    (tmp_path / "index.html").write_text("<html>my own page</html>")
    refused(tmp_path, "main", "--frameworks", "torch", "--json", "r.json",
            expect="exists and was not written by the main job")
    from shared.cli._outputs import MAIN_PAGE_MARK, check_main_page

    (tmp_path / "index.html").write_text(f"<!doctype html><html><head>{MAIN_PAGE_MARK}</head></html>")
    check_main_page(tmp_path / "index.html", force=False)  # its own page: accepted for replacement


@pytest.mark.parametrize("argv, expect", [
    (["init", *Q, "--out", "newdir/"], "ends with '/': it names a folder"),
    (["logits", *Q, "--framework", "reference", "--out", "y/"], "ends with '/'"),
    (["init", *Q, "--out", "."], "does not end in a file or folder name"),
    (["init", *Q, "--out", ".."], "does not end in a file or folder name"),
    (["time", *Q, "--frameworks", "torch", "--json", "r.json", "--csv", "r.json"],
     "--json and --csv both name 'r.json'"),
    (["time", *Q, "--frameworks", "torch", "--json", "r.json", "--chart", "./r.json"],
     "--json and --chart both name"),
    (["time", *Q, "--frameworks", "torch", "--json", "r.png"], "--json and --chart both name"),
    (["time", *Q, "--frameworks", "torch", "--csv", "c.csv", "--html", "c.csv", "--json", "r.json"],
     "--csv and --html both name"),
    (["main", "--frameworks", "torch", "--json", "index.html"], "--json and the main job's page both name"),
    (["train", *Q, "--framework", "torch", "--json", "t.png"], "--json and --png both name 't.png'"),
    (["report", "r1.json", "--json", "m.json", "--html", "m.json"], "--json and --html both name"),
    (["trace", *Q, "--frameworks", "torch", "--json", "x.json", "--html", "x.json"],
     "--json and --html both name 'x.json'"),  # was refused only after the whole trace
    (["lessons", "--no-measure", "--json", "x.html", "--html", "x.html"], "--json and --html both name"),
    (["logits", *Q, "--framework", "reference", "--out", "y.json"], "--out 'y.json': expected a .npy file"),
    (["init", *Q, "--out", "w.npy"], "--out 'w.npy': expected a .safetensors file"),
])
def test_an_unsafe_or_colliding_output_is_refused_before_any_work(tmp_path: Path, argv: list[str],
                                                                 expect: str) -> None:
    (tmp_path / "r1.json").write_text("{}")
    refused(tmp_path, *argv, expect=expect)
    assert not (tmp_path / "newdir").exists()


@pytest.mark.parametrize("argv, given", [
    (["logits", *Q, "--framework", "torch", "--weights", "w.safetensors", "--out", "w.safetensors"],
     "--weights"),
    (["logits", *Q, "--framework", "reference", "--input", "x.npy", "--out", "x.npy"], "--input"),
    (["diagnose", *Q, "--logits", "x.npy", "--json", "x.npy"], "--logits"),
    (["convert", "--from", "timm", "--in", "m.safetensors", "--out", "m.safetensors"], "--in"),
    (["verify", "--spec", "s.json", "--frameworks", "torch", "--json", "s.json"], "--spec"),
    # the timing commands and train checked their outputs against each other only, and replaced
    # the spec (or recipe) they read with their results under --force
    (["time", "--spec", "s.json", "--frameworks", "torch", "--json", "s.json"], "--spec"),
    (["time", "--factorial", "archive-torch", "s.json", "--frameworks", "torch,flax", "--csv", "s.json"],
     "--factorial SPEC_B"),
    (["main", "--spec", "s.json", "--frameworks", "torch", "--chart", "s.json"], "--spec"),
    (["sweep", "--spec", "s.json", "--frameworks", "torch", "--batch", "1,2", "--json", "s.json"], "--spec"),
    (["peers", "--spec", "s.json", "--json", "s.json"], "--spec"),
    (["train", *Q, "--recipe", "r.json", "--checkpoints", "ck", "--png", "r.json"], "--recipe"),
])
def test_an_output_never_replaces_the_runs_own_input(tmp_path: Path, argv: list[str], given: str) -> None:
    """With --force, `logits --weights w --out w` replaced the checkpoint with its logits: the
    output naming a file the run reads is refused before the run, and that file is kept."""
    from shared.core.presets import get_preset
    from shared.core.train_spec import get_recipe

    for name in ("w.safetensors", "x.npy", "m.safetensors"):
        (tmp_path / name).write_bytes(b"the user's file")
    (tmp_path / "s.json").write_text(get_preset("quadrant").replace(name="mine").to_json())
    (tmp_path / "r.json").write_text(get_recipe("quick").to_json())
    before = snapshot(tmp_path)
    line = refused(tmp_path, *argv, "--force", expect=f"the {given} file this run reads")
    assert "an output never replaces the run's own input" in line
    assert snapshot(tmp_path) == before


def _special(tmp_path: Path, kind: str, name: str) -> Path:
    target = tmp_path / name
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "symlink to stdout":
        target.symlink_to("/dev/stdout")
    elif kind == "symlink to a file":
        (tmp_path / "real.npy").write_bytes(b"the user's file")
        target.symlink_to(tmp_path / "real.npy")
    elif kind == "directory":
        target.mkdir()
        (target / "inside").write_text("kept")
    return target


@pytest.mark.parametrize("kind", ["fifo", "symlink to stdout", "symlink to a file", "directory"])
@pytest.mark.parametrize("command", ["logits", "init"])
def test_force_replaces_only_a_regular_file(tmp_path: Path, kind: str, command: str) -> None:
    target = _special(tmp_path, kind, "out.safetensors" if command == "init" else "out.npy")
    argv = {"logits": ["logits", *Q, "--framework", "reference", "--out", target.name],
            "init": ["init", *Q, "--out", target.name]}[command]
    before_kind = os.lstat(target).st_mode
    refused(tmp_path, *argv, "--force", expect="--force replaces only a regular file"
            if kind != "directory" else "is a directory")
    assert os.lstat(target).st_mode == before_kind  # the FIFO, link or folder itself is untouched


def test_force_refuses_a_device(tmp_path: Path) -> None:
    before = os.lstat("/dev/null")
    line = refused(tmp_path, "logits", *Q, "--framework", "reference", "--out", "/dev/null", "--force")
    assert "/dev/null" in line
    after = os.lstat("/dev/null")
    assert (after.st_mode, after.st_ino, after.st_rdev) == (before.st_mode, before.st_ino, before.st_rdev)


def test_force_still_replaces_a_regular_file(tmp_path: Path) -> None:
    (tmp_path / "y.npy").write_bytes(b"old")
    outcome = run_cli("logits", *Q, "--framework", "reference", "--out", "y.npy", "--force", cwd=tmp_path)
    assert outcome.code == 0 and (tmp_path / "y.npy").read_bytes()[:6] == b"\x93NUMPY"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["y.npy"]  # no backup or temporary left


def test_a_converted_hf_folder_is_new_and_never_replaced(tmp_path: Path) -> None:
    assert run_cli("init", *Q, "--out", "w.safetensors", cwd=tmp_path).code == 0
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "config.json").write_text("mine")
    refused(tmp_path, "convert", "--to", "hf", "--in", "w.safetensors", "--out", "hf", "--force",
            expect="a folder output is never replaced")
    before = snapshot(tmp_path)
    outcome = run_cli("convert", "--to", "hf", "--in", "w.safetensors", "--out", "hf2/", cwd=tmp_path)
    assert outcome.code == 0, outcome.stderr
    assert sorted(p.name for p in (tmp_path / "hf2").iterdir()) == ["config.json", "model.safetensors"]
    assert {k: v for k, v in snapshot(tmp_path).items() if not k.startswith("hf2/")} == before


def test_a_spec_given_as_a_json_document_is_not_asked_about_as_a_file(tmp_path: Path) -> None:
    """`--spec "$(compare.py spec NAME --json)"` is longer than a file name may be: asking whether
    it names a file raised "File name too long" in place of the output check's own refusal."""
    from shared.core.presets import get_preset

    (tmp_path / "r.json").write_text("{}")
    document = json.dumps({"spec": get_preset("archive-torch").to_dict()}, indent=2)
    assert len(document) > os.pathconf(tmp_path, "PC_NAME_MAX")
    refused(tmp_path, "verify", "--spec", document, "--frameworks", "torch", "--json", "r.json",
            expect="output 'r.json' already exists")
