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
