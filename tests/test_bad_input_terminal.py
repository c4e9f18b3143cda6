"""Control characters and terminal escape sequences in what a user hands over (a spec name, a
results file's fields, a file name, a model's own error message, an argument) never reach the
terminal raw: they are escaped (`\\x1b`) in error lines and table cells, and refused in a spec's
text fields. Nothing printed holds a control character but the line breaks portbench writes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.adversarial import run_cli
from tests.refusals import refused_promptly
from tests.results_docs import results_doc

RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")  # all but "\n"
CLEAR, RED, CSI, OVERRIDE = "\x1b[2J", "\x1b[31m", "\x9b", "\u202e"


def assert_nothing_raw(*texts: str) -> None:
    for text in texts:
        found = RAW.search(text)
        assert found is None, f"raw {found[0]!r} printed in {text!r}"


@pytest.mark.parametrize("name", [f"q{CLEAR}", f"q{RED}x", "line\nforged", "tab\there", f"c1{CSI}2J",
                                  f"abc{OVERRIDE}cba"])
def test_a_spec_name_with_a_control_character_is_refused_escaped(tmp_path: Path, name: str) -> None:
    doc = json.dumps({"name": name})
    line = refused_promptly(tmp_path, "spec", doc, expect="expected text without control characters")
    assert "spec field 'name' = " in line
    assert_nothing_raw(line)


def test_a_spec_file_name_field_with_an_escape_is_refused(tmp_path: Path) -> None:
    (tmp_path / "s.toml").write_text('name = "q\\u001b[2J"\n')
    line = refused_promptly(tmp_path, "spec", "s.toml", expect="'q\\x1b[2J': expected text without control")
    assert_nothing_raw(line)


@pytest.mark.parametrize("argv, expect", [
    (("spec", f"quad{RED}rant"), "--spec 'quad\\x1b[31mrant' is neither a preset"),
    (("report", f"r{CLEAR}.json"), "results file 'r\\x1b[2J.json' does not exist"),
    (("spec", "quadrant", f"--bogus={CLEAR}"), "unrecognized arguments: --bogus=\\x1b[2J"),
    (("logits", "--spec", "quadrant", "--framework", f"torch{CSI}", "--out", "y.npy"), "torch\\x9b"),
])
def test_an_argument_with_an_escape_is_printed_escaped(tmp_path: Path, argv: tuple[str, ...],
                                                       expect: str) -> None:
    outcome = run_cli(*argv, cwd=tmp_path)
    assert outcome.code == 2 and expect in outcome.error, outcome.stderr
    assert_nothing_raw(outcome.stdout, outcome.stderr)


@pytest.mark.parametrize("field, value, shown", [
    (("framework",), f"torch{CLEAR}", "torch\\x1b[2J"),
    (("threads_applied", "affinity_note"), f"pinned\r{RED}FORGED", "pinned\\r\\x1b[31mFORGED"),
    (("conditions", "spec_name"), f"quadrant{CSI}31m", None),
])
def test_a_results_files_text_is_printed_escaped_in_the_table(tmp_path: Path, field: tuple[str, ...],
                                                               value: str, shown: str | None) -> None:
    doc = results_doc()
    target = doc["runs"][0]
    for key in field[:-1]:
        target = target[key]
    target[field[-1]] = value
    doc["environment"]["cpu_model"] = f"EPYC{OVERRIDE}"
    (tmp_path / "r.json").write_text(json.dumps(doc))
    outcome = run_cli("report", "r.json", cwd=tmp_path)
    assert outcome.code == 0, outcome.stderr
    assert_nothing_raw(outcome.stdout, outcome.stderr)
    assert "EPYC\\u202e" in outcome.stdout
    if shown:
        assert shown in outcome.stdout


def test_a_map_file_row_with_an_escape_is_refused_escaped(tmp_path: Path) -> None:
    (tmp_path / "mine.py").write_text("def build():\n    raise RuntimeError('never built')\n")
    (tmp_path / "rules.toml").write_text('[map]\n"cls\\u001b[2J" = "cls_tokn"\n')
    line = refused_promptly(tmp_path, "verify", "--spec", "quadrant", "--model", "mine.py:build", "--map",
                            "rules.toml", expect="row 'cls\\x1b[2J' = 'cls_tokn' names no tensor")
    assert_nothing_raw(line)


def test_a_models_own_error_message_is_printed_escaped(tmp_path: Path) -> None:
    """The message comes back from the worker that imported the file: one line, escaped."""
    (tmp_path / "mine.py").write_text(f"raise RuntimeError({CLEAR + 'gone' + chr(10) + 'error: forged'!r})\n")
    outcome = run_cli("verify", "--spec", "quadrant", "--model", "mine.py:build", cwd=tmp_path)
    assert outcome.code == 2, outcome.stderr
    assert "RuntimeError: \\x1b[2Jgone" in outcome.error
    assert_nothing_raw(outcome.stdout, outcome.stderr)


# ---- every line bounded ---------------------------------------------------------------------------
def test_a_ten_megabyte_name_in_a_results_file_prints_bounded_lines(tmp_path: Path) -> None:
    """The name reaches the table's cell, the notes, the chart's labels and the page: each shows
    its start, its end and how much was left out (shared/core/terminal.py `elide`)."""
    from shared.core.terminal import CELL_LIMIT, LINE_LIMIT

    doc = results_doc()
    doc["runs"][0]["framework"] = "torch" + "x" * 10_000_000 + f"END{CLEAR}"
    (tmp_path / "r.json").write_text(json.dumps(doc))
    outcome = run_cli("report", "r.json", "--html", "r.html", cwd=tmp_path)
    assert outcome.code == 0, outcome.stderr[:2000]
    printed = outcome.stdout + outcome.stderr
    assert len(printed) < 20_000  # was 41 million characters
    assert max(len(line) for line in printed.splitlines()) <= LINE_LIMIT
    cell = next(line for line in outcome.stdout.splitlines() if line.startswith("1 "))
    assert "torchxxx" in cell and "xxxEND\\x1b[2J" in cell and " characters left out ...] " in cell
    assert len(cell) < CELL_LIMIT + 80  # the row keeps its other columns beside the bounded cell
    assert_nothing_raw(printed)
    page = (tmp_path / "r.html").read_text()
    assert len(page) < 200_000 and "characters left out" in page


def test_an_error_line_holding_a_huge_value_is_bounded(tmp_path: Path) -> None:
    """A megabyte argument named in an error is elided in the middle; the line keeps what the
    message expected, at its end."""
    from shared.core.terminal import LINE_LIMIT

    line = refused_promptly(tmp_path, "logits", "--spec", "quadrant", "--framework", "t" * 1_000_000 + "END",
                            "--out", "y.npy", expect="unknown framework 'tttt")
    assert len(line) <= len("error: ") + LINE_LIMIT
    assert " characters left out ...] " in line and "tttEND'; expected one of: reference, torch" in line


def test_elide_keeps_the_start_the_end_and_the_count() -> None:
    from shared.core.terminal import elide

    text = "start" + "m" * 5000 + "end"
    short = elide(text, 100)
    assert len(short) <= 100 and short.startswith("start") and short.endswith("end")
    kept = len(short) - len(" [... 4,939 characters left out ...] ")
    assert f" [... {len(text) - kept:,} characters left out ...] " in short
    assert elide("short", 100) == "short"
