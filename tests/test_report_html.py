"""The HTML pages, rendered in headless Chromium: they load from disk with no console errors,
their tables and charts are present and not empty, sorting works without a server, and the
screenshot is not blank."""

from __future__ import annotations

import copy
import json
from html import escape as html_escape
from pathlib import Path

from tests.adversarial import refused, run_cli
from tests.browser import not_blank, render
from tests.results_docs import results_doc

ROOT = Path(__file__).resolve().parents[1]


def two_runs(folder: Path) -> list[str]:
    fast = results_doc()
    slow = copy.deepcopy(results_doc())
    slow["created"] = "2026-12-01T01:00:00Z"
    slow["runs"][0]["framework"] = "flax"
    slow["runs"][0]["phases"]["forward_eager"].update(median=0.004, q1=0.003, q3=0.005)
    names = []
    for name, doc in (("fast.json", fast), ("slow.json", slow)):
        (folder / name).write_text(json.dumps(doc))
        names.append(name)
    return names


def test_results_page_renders_with_tables_charts_and_sorting(tmp_path: Path) -> None:
    files = two_runs(tmp_path)
    outcome = run_cli("report", *files, "--html", "page.html", cwd=tmp_path)
    assert outcome.code == 0, outcome.stderr
    page = tmp_path / "page.html"
    text = page.read_text()
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "") and "https://" not in text
    # Click the "fwd eager" header twice (descending): the slower flax row must come first.
    probe = text.replace("</body>", """<script>
      var th = Array.prototype.filter.call(document.querySelectorAll("th"),
        function (h) { return h.textContent === "fwd eager"; })[0];
      th.querySelector("button").click(); th.querySelector("button").click();
      var table = th.closest("table");
      document.title = "order:" + table.tBodies[0].rows[0].cells[1].textContent;
    </script></body>""")
    (tmp_path / "probe.html").write_text(probe)
    shown = render(page)
    assert shown.console == []
    assert shown.dom.count("<table") >= 3 and "<svg" in shown.dom and "<td" in shown.dom
    assert "Roofline" in shown.dom and "20%" in shown.dom
    assert not_blank(shown.screenshot)
    assert "<title>order:flax@slow</title>" in render(tmp_path / "probe.html").dom


def test_report_html_bad_input(tmp_path: Path) -> None:
    files = two_runs(tmp_path)
    (tmp_path / "taken.html").write_text("mine")
    refused(tmp_path, "report", *files, "--html", "taken.html", expect="already exists")
    refused(tmp_path, "report", *files, "--html", "taken.html/page.html", expect="cannot be created")
    (tmp_path / "other.json").write_text(json.dumps({"schema": "something-else"}))
    refused(tmp_path, "report", "other.json", "--html", "x.html", expect="not a portbench results file")


def synthetic_trace() -> list[dict]:
    names = ["patch_embed", "pos_embed", "block0.norm1", "block0.attn", "logits"]

    def taps(errors: list[float]) -> list[dict]:
        return [{"name": n, "magnitude": 2.0, "error": e, "budget": 1e-5, "over": e > 1e-5, "note": ""}
                for n, e in zip(names, errors, strict=True)]

    return [{"framework": "torch", "error": None, "first_divergence": None,
             "taps": taps([1e-7, 2e-7, 3e-7, 4e-7, 5e-7])},
            {"framework": "keras", "error": None, "first_divergence": "block0.norm1",
             "taps": taps([1e-7, 2e-7, 6e-5, 8e-5, 1e-4])},
            {"framework": "flax", "error": "worker exited with status 1", "first_divergence": None,
             "taps": []}]


def test_trace_page_marks_the_first_divergence(tmp_path: Path) -> None:
    from shared.report.pages import trace_page

    page = tmp_path / "trace.html"
    page.write_text(trace_page("quadrant", synthetic_trace(), ["weights: seeded"]))
    shown = render(page)
    assert shown.console == [] and not_blank(shown.screenshot)
    assert "first tensor over its budget: block0.norm1" in shown.dom
    assert "first over budget" in shown.dom  # the ringed point in the chart
    assert "flax: could not run" in shown.dom and shown.dom.count("<tr") == 6


def test_lessons_page_shows_each_ports_code(tmp_path: Path) -> None:
    import ports

    outcome = run_cli("lessons", "gelu", "--no-measure", "--html", "lessons.html", cwd=tmp_path)
    assert outcome.code == 0, outcome.stderr
    shown = render(tmp_path / "lessons.html")
    assert shown.console == [] and not_blank(shown.screenshot)
    for framework in ports.NATIVE:
        assert f"ports/{framework}/model.py" in shown.dom
    assert "Rosetta: every spec field in every port" in shown.dom and "<pre" in shown.dom


def test_docs_lessons_page_shows_the_current_code() -> None:
    """docs/lessons.html is generated (`python compare.py lessons --html docs/lessons.html
    --force`); every excerpt it would show today, file, line and unit, the ports' and the installed
    libraries' (or the line saying a library is missing), must be in it."""
    from shared.teaching.lessons import LESSONS, build_view

    page = (ROOT / "docs" / "lessons.html").read_text()
    views = [build_view(item, measure=False).to_dict() for item in LESSONS]
    shown = [html_escape(e["missing"]) if e.get("missing") else f"{e['file']}:{e['start_line']} "
             f"{html_escape(e['unit'])}" for view in views for part in ("code", "library_code")
             for excerpts in view[part].values() for e in excerpts]
    stale = [where for where in shown if where not in page]
    assert not stale, f"docs/lessons.html is stale (first: {stale[0]}); regenerate it"


def test_report_html_refuses_no_files_and_a_page_too_large_to_read(tmp_path: Path) -> None:
    refused(tmp_path, "report", "--html", "x.html", expect="the following arguments are required")
    doc = results_doc()
    doc["runs"] = [{**copy.deepcopy(doc["runs"][0]), "framework": f"port{i}"} for i in range(2100)]
    (tmp_path / "big.json").write_text(json.dumps(doc))
    refused(tmp_path, "report", "big.json", "--html", "big.html", expect="over the page's bound of 2000")
