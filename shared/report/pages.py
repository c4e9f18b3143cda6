"""The pages: timing results (one or several runs), a trace, the lessons. Each function takes
the documents the other tools already write and returns one self-contained HTML string."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shared.measure.guard import FORWARD, IncomparableRunsError, decided_ranks, label, metric_value
from shared.measure.output import SHORT, fmt_bytes, fmt_seconds, row_notes
from shared.measure.timing_row import PHASES
from shared.report import html, svg

TIMED = ("prepare", "forward_eager", "forward_compiled", "train_step", "eval_pass")
SINGLE = ("import", "build_load", "first_call_eager", "compile")


def results_page(rows: list[dict[str, Any]], sources: list[dict[str, Any]], title: str,
                 metric: str = FORWARD, allow_mixed: bool = False) -> str:
    """Every run's rows: verification, timing with spread (ranked by `metric`, as the command's
    table ranked them), charts, conditions, warnings beside the rows they concern, and what was
    refused as not comparable and why."""
    if len(sources) <= 1:  # one run: a row's source file says nothing, so rows are named by port
        rows = [{k: v for k, v in row.items() if k != "source"} for row in rows]
    parts = [
        html.section("Verification: each port against the float64 reference", verification_table(rows)),
        html.section("Timing", *timing_parts(rows, metric, allow_mixed)),
        html.section("Charts", *charts(rows)),
        *roofline(rows),
        *scaling(rows, sources),
        html.section("Conditions and environment", *[conditions(s) for s in sources]),
    ]
    return html.check_size(html.page(title, parts, subtitle=_sources_line(sources)))


def verification_table(rows: list[dict[str, Any]]) -> str:
    body, raw = [], []
    for row in rows:
        for mode, check in (row.get("equivalence") or {}).items():
            err, atol = check.get("max_abs_err"), check.get("atol")
            body.append([label(row), mode, _sci(err), _sci(atol), html.status(bool(check.get("passed")))])
            raw.append([None, None, err, atol, None])
    if not body:
        return html.paragraph("No row reached the equivalence gate.", "muted")
    return html.table(["port", "mode", "max abs vs float64", "tolerance", "verdict"], body,
                      caption="the timing gate: eager and compiled logits on the same weights and batch",
                      numeric=[False, False, True, True, False], sort_values=raw)


def timing_parts(rows: list[dict[str, Any]], metric: str = FORWARD, allow_mixed: bool = False) -> list[str]:
    ranks: dict[int, int] = {}
    out: list[str] = [] if metric == FORWARD else [html.note(f"ranked by {metric}", "muted")]
    try:  # the text table's rule (shared/measure/rounds.py)
        for decided in decided_ranks(rows, metric, allow_mixed):
            if decided["rank"] is None:
                out.append(html.note(f"{label(decided['row'])}: not comparable: {decided['why']}", "refused"))
            else:
                ranks[id(decided["row"])] = decided["rank"]
    except IncomparableRunsError as exc:
        out.append(html.note(str(exc), "refused"))
    headers = ["rank", "port", "spec", "rung", "status", "device", *[SHORT[p] for p, _ in PHASES], "peak RSS"]
    body, raw, css = [], [], []
    for row in rows:
        phases = row.get("phases", {})
        cells, values = [], []
        for name, _ in PHASES:
            phase = phases.get(name) or {}
            ok = phase.get("status") == "ok"
            spread = f" ±{fmt_seconds(phase['iqr'] / 2)}" if ok and phase.get("n", 1) > 1 else ""
            cells.append(fmt_seconds(phase.get("median")) + spread if ok else "n/a")
            values.append(phase.get("median") if ok else None)
        peak = (row.get("memory") or {}).get("peak_rss_bytes")
        cond = row.get("conditions") or {}
        body.append([ranks.get(id(row), "-"), label(row), cond.get("spec_name"),
                     cond.get("precision", "float32"), row.get("status"), cond.get("device_class"), *cells,
                     fmt_bytes(peak)])
        raw.append([ranks.get(id(row)), None, None, None, None, None, *values, peak])
        css.append("" if row.get("status") == "ok" else "status-fail")
    numeric = [True, False, False, False, False, False, *[True] * len(PHASES), True]
    out.append(html.table(headers, body, numeric=numeric, sort_values=raw, row_class=css,
                          caption="median ± IQR/2 of n repeats; single values: one cold measurement per "
                                  "fresh process; click a header to sort"))
    for row in rows:
        out += [html.note(text) for text in row_notes(row)]
    return out


def charts(rows: list[dict[str, Any]]) -> list[str]:
    figures = []
    for group, caption in ((TIMED, "warm phases"), (SINGLE, "cold, single-shot phases")):
        labels, values, spread = [], [], []
        for row in rows:
            for name in group:
                phase = (row.get("phases") or {}).get(name) or {}
                if phase.get("status") == "ok":
                    labels.append(f"{label(row)} · {SHORT[name]}")
                    values.append(phase["median"])
                    spread.append((phase.get("q1", phase["median"]), phase.get("q3", phase["median"])))
        if labels:
            chart = svg.Chart(f"{caption}: median seconds (log scale; line = interquartile range)", "",
                              "seconds", log_y=True)
            figures.append(f"<figure>{svg.bar_chart(chart, labels, values, spread)}"
                           f"<figcaption>{caption}; the same numbers are in the table above"
                           "</figcaption></figure>")
    return figures or [html.paragraph("No phase was measured.", "muted")]


def roofline(rows: list[dict[str, Any]]) -> list[str]:
    """How close each forward came to the framework's own GEMM rate in the run's dtype (where measured)."""
    body, raw, labels, shares = [], [], [], []
    for row in rows:
        roof = row.get("roofline") or {}
        gemm = (roof.get("gemm") or {}).get("gflops")
        for phase, numbers in (roof.get("phases") or {}).items():
            share = numbers.get("fraction")
            body.append([label(row), SHORT[phase], _fixed(numbers.get("gflops")), _fixed(gemm),
                         "-" if share is None else f"{100 * share:.0f}%"])
            raw.append([None, None, numbers.get("gflops"), gemm, share])
            if share:
                labels.append(f"{label(row)} · {SHORT[phase]}")
                shares.append(100 * share)
    if not body:
        return []
    chart = svg.Chart("share of the framework's own GEMM rate in the run's dtype (%)", "", "percent")
    figure = f"<figure>{svg.bar_chart(chart, labels, shares)}</figure>" if shares else ""
    return [html.section("Roofline: achieved GFLOP/s against the framework's GEMM rate",
                         html.table(["port", "forward", "GFLOP/s", "GEMM GFLOP/s", "share"], body,
                                    numeric=[False, False, True, True, True], sort_values=raw),
                         figure)]


def scaling(rows: list[dict[str, Any]], sources: list[dict[str, Any]]) -> list[str]:
    """`compare.py sweep` runs: the best forward against batch, one line per port, and the fits."""
    points: dict[str, list[tuple[float, float]]] = {}
    for row in rows:
        point = row.get("sweep_point")
        value = metric_value(row, FORWARD)
        if point and value:
            points.setdefault(label(row), []).append((point["batch"] * point["tokens"], value[0]))
    if not points:
        return []
    series = [svg.Series(name, [x for x, _ in sorted(p)], [y for _, y in sorted(p)])
              for name, p in points.items()]
    chart = svg.Chart("best forward time against the work (log-log)", "images x tokens per batch",
                      "seconds", log_y=True, log_x=True)
    parts = [f"<figure>{svg.line_chart(chart, series)}</figure>"]
    for source in sources:
        fits = (source.get("sweep") or {}).get("fits") or {}
        body = [[fw, f.get("points"), _fixed((f.get("time") or {}).get("batch")),
                 _fixed((f.get("time") or {}).get("tokens")), _fixed((f.get("memory") or {}).get("batch"))]
                for fw, f in fits.items()]
        if body:
            parts.append(html.table(["port", "points", "time slope vs batch", "time slope vs tokens",
                                     "memory slope vs batch"], body, numeric=[False, True, True, True, True],
                                    caption="least-squares slopes of log values: ~1 grows with the work, "
                                            "well below 1 a fixed cost per call dominates"))
    return [html.section("Scaling", *parts)]


def _fixed(value: Any) -> str:
    return "-" if value is None else f"{value:.3g}"


def conditions(source: dict[str, Any]) -> str:
    env, cond = source.get("environment") or {}, source.get("conditions") or {}
    keep = ("cpu_model", "cpu_count", "usable_cpus", "cpu_low_precision", "load_average", "platform",
            "python", "numpy", "git_revision", "git_dirty", "hostname")
    shown = [(k, env.get(k)) for k in keep if k in env]
    shown += [(k, v) for k, v in cond.items() if k not in ("spec", "budget")]
    return html.section(f"{source.get('source', 'run')} ({source.get('created', '?')})",
                        html.key_values(shown), level=3)


def _sources_line(sources: Sequence[dict[str, Any]]) -> str:
    return "; ".join(f"{s.get('source')}: {s.get('file')}" for s in sources)


def _sci(value: Any) -> str:
    return "-" if value is None else f"{value:.2e}"


def trace_page(spec_name: str, traces: list[dict[str, Any]], notes: Sequence[str] = ()) -> str:
    """The error of every named tensor against the float64 reference, per port, along the depth
    of the network, with the budget and the first divergent tensor marked."""
    ran = [t for t in traces if not t.get("error")]
    names = [tap["name"] for tap in ran[0]["taps"]] if ran else []
    series = []
    for t in ran:
        errors = {tap["name"]: tap["error"] for tap in t["taps"]}
        first = t.get("first_divergence")
        series.append(svg.Series(t["framework"], list(range(len(names))), [errors.get(n) for n in names],
                                 marked=[names.index(first)] if first in names else []))
    if ran:
        budget = {tap["name"]: tap["budget"] for tap in ran[0]["taps"]}
        series.append(svg.Series("budget", list(range(len(names))), [budget[n] for n in names]))
    chart = svg.Chart(f"{spec_name}: max |port - float64 reference| per tensor",
                      "tensor, in computation order", "max abs error (log scale)", log_y=True,
                      x_ticks=list(enumerate(names)), width=max(760, 26 * len(names) + 240))
    parts = [html.paragraph(n) for n in notes]
    parts += [html.note(f"{t['framework']}: could not run ({t['error']})", "refused") for t in traces
              if t.get("error")]
    for t in ran:
        first = t.get("first_divergence")
        parts.append(html.note(f"{t['framework']}: first tensor over its budget: {first}") if first else
                     html.paragraph(f"{t['framework']}: every tensor within its budget."))
    parts.append(f"<figure>{svg.line_chart(chart, series)}<figcaption>Budgets scale with each "
                 "tensor's magnitude (tolerance × max(1, |reference|)); a ringed point is the first "
                 "tensor over it.</figcaption></figure>" if ran else "")
    headers = ["tensor", "max |reference|", "budget", *[f"{t['framework']} error" for t in ran]]
    body, raw = [], []
    for i, name in enumerate(names):
        taps = [t["taps"][i] for t in ran]
        body.append([name, _sci(taps[0]["magnitude"]), _sci(taps[0]["budget"]),
                     *[_tap_cell(tap) for tap in taps]])
        raw.append([i, taps[0]["magnitude"], taps[0]["budget"], *[tap["error"] for tap in taps]])
    parts.append(html.table(headers, body, numeric=[False, *[True] * (len(headers) - 1)], sort_values=raw,
                            caption="every named tensor; FAIL marks a tensor over its budget"))
    return html.check_size(html.page(f"portbench trace: {spec_name}", [html.section("Trace", *parts)]))


def _tap_cell(tap: dict[str, Any]) -> html.Raw:
    mark = str(html.status(False)) if tap["over"] else ""
    return html.Raw(f"{html.escape(_sci(tap['error']))} {mark}")


def lessons_page(lessons: list[dict[str, Any]], rosetta_markdown: str | None = None) -> str:
    """Each lesson: the ports' own code side by side (highlighted), extracted from the source when
    the command ran, then the libraries' own where the lesson names them, with the measured gap
    and the pin; then the rosetta table."""
    from shared.teaching.library_source import library_label

    parts = []
    for item in lessons:
        gap = item.get("gap")
        head = [html.paragraph(item["point"]),
                html.key_values([("pinned by", item["pin"]),
                                 ("measured gap without the pin", "not measured" if gap is None
                                  else f"{gap:.3g}")])]
        head += [html.paragraph(m, "muted") for m in item.get("measurements", [])]
        columns = [_code_column(framework, excerpts) for framework, excerpts in item["code"].items()]
        libraries = [_code_column(library_label(library, excerpts[0]["version"]), excerpts)
                     for library, excerpts in item.get("library_code", {}).items()]
        if libraries:
            libraries = [html.paragraph("The libraries' own code, read from the installed files:"),
                         f'<div class="code-grid">{"".join(libraries)}</div>']
        parts.append(html.section(f"{item['name']}: {item['title']}", *head,
                                  f'<div class="code-grid">{"".join(columns)}</div>', *libraries, level=2))
    if rosetta_markdown:
        parts.append(html.section("Rosetta: every spec field in every port", rosetta_html(rosetta_markdown)))
    return html.check_size(html.page("portbench lessons: where frameworks silently differ", parts))


def _code_column(heading: str, excerpts: list[dict[str, Any]]) -> str:
    """One port's or library's excerpts (`Excerpt.to_dict`, `LibraryExcerpt.to_dict`) under its
    heading: each with its file, line and unit, or the line saying why it is missing."""
    blocks = "".join(html.paragraph(e["missing"], "muted") if e.get("missing") else
                     f"<p class=muted>{html.escape(e['file'])}:{e['start_line']} "
                     f"{html.escape(e['unit'])}</p>{highlight(e['lines'])}" for e in excerpts)
    return f"<div><h4>{html.escape(heading)}</h4>{blocks or html.paragraph('(nothing found)', 'muted')}</div>"


def highlight(lines: Sequence[str]) -> str:
    """Python source as highlighted HTML with inline styles (no stylesheet to ship)."""
    import textwrap

    from pygments import highlight as render
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    code = textwrap.dedent("\n".join(lines))
    return render(code, PythonLexer(), HtmlFormatter(noclasses=True, nobackground=True, style="default"))


def rosetta_html(text: str) -> str:
    """docs/rosetta.md (as `compare.py rosetta` writes it: `## field`, a paragraph, then one
    `**framework**` label and one python block per port) as sections with the ports side by side."""
    sections = []
    for chunk in text.split("\n## ")[1:]:
        title, _, body = chunk.partition("\n")
        prose, columns, label, code, fenced = [], [], None, [], False
        for line in body.splitlines():
            if line.startswith("```"):
                if fenced:
                    columns.append(f"<div><h4>{html.escape(label or '')}</h4>{highlight(code)}</div>")
                    code = []
                fenced = not fenced
            elif fenced:
                code.append(line)
            elif line.startswith("**") and line.endswith("**"):
                label = line.strip("*")
            elif line.strip():
                prose.append(html.paragraph(line.replace("`", "")))
        sections.append(html.section(title.replace("`", ""), *prose,
                                     f'<div class="code-grid">{"".join(columns)}</div>', level=3))
    return "\n".join(sections)
