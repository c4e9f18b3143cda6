"""The HTML pages, rendered in headless Chromium: they load from disk with no console errors,
their tables and charts are present and not empty, sorting works without a server, and the
screenshot is not blank."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from tests.adversarial import refused, run_cli
from tests.browser import not_blank, render
from tests.results_docs import results_doc


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
    assert shown.dom.count("<table") >= 2 and "<svg" in shown.dom and "<td" in shown.dom
    assert not_blank(shown.screenshot)
    assert "<title>order:flax@slow</title>" in render(tmp_path / "probe.html").dom


def test_report_html_bad_input(tmp_path: Path) -> None:
    files = two_runs(tmp_path)
    (tmp_path / "taken.html").write_text("mine")
    refused(tmp_path, "report", *files, "--html", "taken.html", expect="already exists")
    refused(tmp_path, "report", *files, "--html", "taken.html/page.html", expect="cannot be created")
    (tmp_path / "other.json").write_text(json.dumps({"schema": "something-else"}))
    refused(tmp_path, "report", "other.json", "--html", "x.html", expect="not a portbench results file")
