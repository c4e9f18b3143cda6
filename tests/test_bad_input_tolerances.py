"""Class 9, reports: a `compare.py tolerances --json` file read back with `--from` is checked on
load like a results file, through its typed record (shared/runtime/ladder.LadderFile): a field of
the wrong type or value is one line naming it, with or without `--markdown`; and the outputs of a
run are checked before any work (two options naming one file, an input named as an output)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from shared.runtime.ladder import Measured
from tests.adversarial import refused, run_cli

PAIR = {"spec": "quadrant", "rung": "bfloat16-pure", "a": "torch", "b": "flax", "max_abs_diff": 0.5,
        "passed": True, "gap": 0.02}


def ladder_doc(path: str = "native (avx512_bf16)") -> dict[str, Any]:
    entries = [Measured("quadrant", "small", "bfloat16-pure", "torch", 1.5e-2, "PASS", None, 1e-2),
               Measured("quadrant", "small", "bfloat16-pure", "flax", 1e-2, "PASS", None, 1e-2)]
    return {"schema": "portbench.tolerances/2", "date": "2026-12-01", "path": path,
            "entries": [m.to_dict() for m in entries], "pairwise": [dict(PAIR)]}


def write(folder: Path, doc: dict[str, Any], name: str = "t.json") -> str:
    (folder / name).write_text(json.dumps(doc))
    return name


def entry(field: str, value: Any) -> dict[str, Any]:
    doc = ladder_doc()
    doc["entries"][0][field] = value
    return doc


def pair(field: str, value: Any) -> dict[str, Any]:
    doc = ladder_doc()
    doc["pairwise"][0][field] = value
    return doc


BAD_FILES = [
    (entry("rung", "bogus"), "entries[0].rung is 'bogus', expected one of float32, tf32, bfloat16-pure, "
                             "bfloat16-mixed, float16-pure, float16-mixed"),
    ({**ladder_doc(), "pairwise": "abc"}, "pairwise is 'abc', expected a list"),
    (entry("status", "x"), "entries[0].status is 'x', expected one of PASS, FAIL, UNAVAILABLE"),
    (entry("ratio", -1), "entries[0].ratio is -1, expected a non-negative number or null"),
    (entry("gap", 1e308), "entries[0].gap is 1e+308, expected a gap whose ratio to the emulated gap 0.01 is "
                          "finite"),
    (entry("gap", -0.5), "entries[0].gap is -0.5, expected a non-negative number or null"),
    (entry("framework", ""), "entries[0].framework is '', expected one of torch, keras, flax, mlx"),
    (entry("spec", "nope"), "entries[0].spec is 'nope', expected a preset name (compare.py tolerances "
                            "--presets)"),
    (entry("size", None), "entries[0].size is None, expected one of small, large"),
    (entry("extra", 1), "entries[0] has the unknown field 'extra'; expected some of: spec, size, rung, "
                        "framework, gap, status, reason, emulated, ratio"),
    ({**ladder_doc(), "entries": {"torch": 1}}, "entries is {'torch': 1}, expected a list"),
    ({**ladder_doc(), "path": 7}, "path is 7, expected a string"),
    (pair("passed", "no"), "pairwise[0].passed is 'no', expected a boolean"),
    (pair("gap", "0.1"), "pairwise[0].gap is '0.1', expected a non-negative number"),
    (pair("a", "bogus"), "pairwise[0].a is 'bogus', expected one of torch, keras, flax, mlx"),
    (pair("rung", None), "pairwise[0].rung is None, expected one of float32, tf32, bfloat16-pure, "
                         "bfloat16-mixed, float16-pure, float16-mixed"),
]


@pytest.mark.parametrize("markdown", [True, False])
@pytest.mark.parametrize("doc, expect", BAD_FILES)
def test_a_field_of_a_tolerances_file_is_checked_on_load(tmp_path: Path, doc: dict[str, Any], expect: str,
                                                         markdown: bool) -> None:
    """Before: `KeyError: 'bogus'` or a TypeError with --markdown (internal errors), and without it
    exit 0 with the value printed as if measured."""
    name = write(tmp_path, doc)
    page = ("--markdown", "m.md") if markdown else ()
    assert refused(tmp_path, "tolerances", "--from", name, *page) == f"error: --from 't.json': {expect}"


@pytest.mark.parametrize("doc, expect", [
    ({k: v for k, v in ladder_doc().items() if k != "entries"}, "(it lacks the field 'entries')"),
    ({**ladder_doc(), "extra": 1}, "(it has the unknown field 'extra'; expected some of: schema, date, path, "
                                   "entries, pairwise)"),
])
def test_a_tolerances_file_missing_or_adding_a_field_is_not_one(tmp_path: Path, doc: dict[str, Any],
                                                                expect: str) -> None:
    name = write(tmp_path, doc)
    assert refused(tmp_path, "tolerances", "--from", name, "--markdown", "m.md") == (
        f"error: --from 't.json': not a `compare.py tolerances --json` file {expect}")


def test_a_valid_tolerances_file_still_reads_and_a_nan_pair_gap_is_shown(tmp_path: Path) -> None:
    """A pair whose gap could not be computed is NaN (verify.pairwise_gaps): shown as such, not as 0."""
    doc = ladder_doc()
    doc["pairwise"].append({**PAIR, "b": "mlx", "max_abs_diff": float("nan"), "gap": float("nan"),
                            "passed": False})
    name = write(tmp_path, doc)
    outcome = run_cli("tolerances", "--from", name, "--markdown", "m.md", cwd=tmp_path)
    assert outcome.code == 0, outcome.stderr
    assert "quadrant                 bfloat16-pure   torch   1.50e-02   1.50  PASS" in outcome.stdout
    assert "| bfloat16-pure | nan |" in (tmp_path / "m.md").read_text()


def test_two_files_of_one_path_are_refused(tmp_path: Path) -> None:
    """Before, the second silently replaced the first on the page."""
    write(tmp_path, ladder_doc(), "a.json")
    write(tmp_path, ladder_doc(), "b.json")
    assert refused(tmp_path, "tolerances", "--from", "a.json", "--from", "b.json", "--markdown", "m.md") == (
        "error: --from 'b.json' measured the path 'native (avx512_bf16)' as 'a.json' did: give one file "
        "per arithmetic path")


def test_two_outputs_naming_one_file_are_refused_before_any_work(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, the whole ladder was measured, one output written, then the other refused."""
    from shared.runtime import ladder

    def measure(*_: Any, **__: Any) -> Any:
        raise AssertionError("measured before the outputs were checked")

    monkeypatch.setattr(ladder, "measure", measure)
    assert refused(tmp_path, "tolerances", "--presets", "quadrant", "--frameworks", "torch", "--rungs",
                   "bfloat16-pure", "--markdown", "x.md", "--json", "x.md") == (
        "error: --markdown and --json both name 'x.md': one output of a run would replace another; give "
        "each its own file")


def test_an_input_named_as_an_output_is_refused_even_with_force(tmp_path: Path) -> None:
    name = write(tmp_path, ladder_doc())
    assert refused(tmp_path, "tolerances", "--from", name, "--markdown", name, "--force") == (
        "error: --markdown names 't.json', the --from file this run reads: an output never replaces the "
        "run's own input; give it another name")


def test_json_with_from_is_refused_not_ignored(tmp_path: Path) -> None:
    """With --from nothing is measured: before, --json was checked, then silently not written."""
    name = write(tmp_path, ladder_doc())
    assert refused(tmp_path, "tolerances", "--from", name, "--json", "j.json") == (
        "error: --json 'j.json' keeps a measured run, and with --from nothing is measured: drop --json "
        "(or --from)")
