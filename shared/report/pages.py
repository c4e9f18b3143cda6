"""The pages: timing results (one or several runs), a trace, the lessons. Each function takes
the documents the other tools already write and returns one self-contained HTML string."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shared.measure.guard import FORWARD, IncomparableRunsError, label, rank
from shared.measure.output import SHORT, fmt_bytes, fmt_seconds, row_notes
from shared.measure.schema import PHASES
from shared.report import html, svg

TIMED = ("prepare", "forward_eager", "forward_compiled", "train_step", "eval_pass")
SINGLE = ("import", "build_load", "first_call_eager", "compile")


def results_page(rows: list[dict[str, Any]], sources: list[dict[str, Any]], title: str) -> str:
    """Every run's rows: verification, timing with spread, charts, conditions, warnings beside
    the rows they concern, and what was refused as not comparable and why."""
    parts = [
        html.section("Verification: each port against the float64 reference", verification_table(rows)),
        html.section("Timing", *timing_parts(rows)),
        html.section("Charts", *charts(rows)),
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


def timing_parts(rows: list[dict[str, Any]]) -> list[str]:
    ranks: dict[int, int] = {}
    out: list[str] = []
    try:
        ranks = {id(row): position for position, row, _v, _p in rank(rows, FORWARD)}
    except IncomparableRunsError as exc:
        out.append(html.note(str(exc), "refused"))
    headers = ["rank", "port", "spec", "status", "device", *[SHORT[p] for p, _ in PHASES], "peak RSS"]
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
        body.append([ranks.get(id(row), "-"), label(row), cond.get("spec_name"), row.get("status"),
                     cond.get("device_class"), *cells, fmt_bytes(peak)])
        raw.append([ranks.get(id(row)), None, None, None, None, *values, peak])
        css.append("" if row.get("status") == "ok" else "status-fail")
    numeric = [True, False, False, False, False, *[True] * len(PHASES), True]
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


def conditions(source: dict[str, Any]) -> str:
    env, cond = source.get("environment") or {}, source.get("conditions") or {}
    keep = ("cpu_model", "cpu_count", "usable_cpus", "load_average", "platform", "python", "numpy",
            "git_revision", "git_dirty", "hostname")
    shown = [(k, env.get(k)) for k in keep if k in env]
    shown += [(k, v) for k, v in cond.items() if k not in ("spec", "budget")]
    return html.section(f"{source.get('source', 'run')} ({source.get('created', '?')})",
                        html.key_values(shown), level=3)


def _sources_line(sources: Sequence[dict[str, Any]]) -> str:
    return "; ".join(f"{s.get('source')}: {s.get('file')}" for s in sources)


def _sci(value: Any) -> str:
    return "-" if value is None else f"{value:.2e}"
