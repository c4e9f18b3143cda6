"""The HTML building blocks: a page, a sortable table, a code block, a note. Everything a page
needs is inside it (one inline stylesheet, one inline script that sorts tables)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from shared.core.terminal import elide
from shared.errors import InputError

__all__ = ["escape"]

# Bounds that keep a page readable (and a browser responsive); a larger request is refused.
MAX_TABLE_ROWS = 2000
MAX_PAGE_BYTES = 8 * 2**20

STYLE = """
:root { --fg: #1b1b1b; --muted: #555; --line: #c8c8c8; --bg: #fff; --band: #f3f3f3;
        --bad: #a3001b; --good: #005a32; }
* { box-sizing: border-box; }
body { font: 16px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
       background: var(--bg); margin: 0 auto; padding: 1rem; max-width: 80rem; }
h1 { font-size: 1.6rem; margin: .2rem 0 .6rem; } h2 { font-size: 1.25rem; margin-top: 2rem; }
h3 { font-size: 1.05rem; }
p, li { max-width: 60rem; }
.muted { color: var(--muted); }
.scroll { overflow-x: auto; -webkit-overflow-scrolling: touch; margin: .5rem 0 1rem; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; min-width: 100%; }
th, td { border-bottom: 1px solid var(--line); padding: .3rem .55rem; text-align: left;
         vertical-align: top; white-space: nowrap; }
td.num, th.num { text-align: right; }
th { background: var(--band); position: sticky; top: 0; }
th button { all: unset; cursor: pointer; font-weight: 600; }
th button:focus-visible { outline: 2px solid #0072b2; }
th[aria-sort="ascending"] button::after { content: " \\25B2"; }
th[aria-sort="descending"] button::after { content: " \\25BC"; }
.status-fail { color: var(--bad); font-weight: 600; } .status-pass { color: var(--good); }
.warn { border-left: 4px solid #e69f00; background: #fff8e6; padding: .4rem .7rem; margin: .4rem 0; }
.refused { border-left: 4px solid #a3001b; background: #fdecee; padding: .4rem .7rem; margin: .4rem 0; }
figure { margin: 1rem 0; } figcaption { color: var(--muted); font-size: .9rem; }
svg { max-width: 100%; height: auto; }
.code-grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(16rem, 1fr)); gap: .8rem; }
.code-grid > div { min-width: 0; }
pre { background: #f7f7f7; border: 1px solid var(--line); padding: .5rem; white-space: pre-wrap;
      overflow-wrap: anywhere;
      font: 13px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
dl.kv { display: grid; grid-template-columns: max-content 1fr; gap: .15rem 1rem; }
dl.kv dt { font-weight: 600; } dl.kv dd { margin: 0; overflow-wrap: anywhere; }
@media (min-width: 120rem) { body { font-size: 20px; max-width: 110rem; } }
@media (max-width: 40rem) { body { padding: .5rem; font-size: 15px; } th, td { padding: .25rem .35rem; } }
"""

# Sorting without a server: click a header; numbers sort as numbers (data-v holds the raw value).
SCRIPT = """
document.querySelectorAll("table.sortable").forEach(function (table) {
  table.querySelectorAll("th").forEach(function (th, col) {
    var button = th.querySelector("button");
    if (!button) { return; }
    button.addEventListener("click", function () {
      var body = table.tBodies[0];
      var ascending = th.getAttribute("aria-sort") !== "ascending";
      table.querySelectorAll("th").forEach(function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
      var rows = Array.prototype.slice.call(body.rows);
      function key(row) {
        var cell = row.cells[col];
        var raw = cell ? (cell.getAttribute("data-v") || cell.textContent) : "";
        var n = parseFloat(raw);
        return isNaN(n) ? raw.toLowerCase() : n;
      }
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        if (typeof x !== typeof y) { x = String(x); y = String(y); }
        return (x < y ? -1 : x > y ? 1 : 0) * (ascending ? 1 : -1);
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
"""


def escape(text: str, quote: bool = True) -> str:
    """`text` as HTML, at most LINE_LIMIT characters of it: a results file's text is bounded on
    a page as on the terminal (shared/core/terminal.py `elide`: its start, end and a count)."""
    return html.escape(elide(text), quote)


def page(title: str, sections: Sequence[str], subtitle: str = "") -> str:
    body = "\n".join(sections)
    sub = f'<p class="muted">{escape(subtitle)}</p>' if subtitle else ""
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>{escape(title)}</title><style>{STYLE}</style></head>\n"
        f"<body><main><h1>{escape(title)}</h1>{sub}\n{body}\n</main>"
        f"<script>{SCRIPT}</script></body></html>\n"
    )


def section(heading: str, *parts: str, level: int = 2) -> str:
    anchor = "".join(c if c.isalnum() else "-" for c in heading.lower()).strip("-")
    inner = "\n".join(parts)
    return f'<section id="{anchor}"><h{level}>{escape(heading)}</h{level}>\n{inner}</section>'


def paragraph(text: str, css: str = "") -> str:
    cls = f' class="{css}"' if css else ""
    return f"<p{cls}>{escape(text)}</p>"


def note(text: str, kind: str = "warn") -> str:
    """A warning or refusal, marked by a word as well as a colour (never colour alone)."""
    word = {"warn": "Warning", "refused": "Not compared"}.get(kind, "Note")
    return f'<div class="{kind}" role="note"><strong>{word}:</strong> {escape(text)}</div>'


def key_values(pairs: Sequence[tuple[str, Any]]) -> str:
    items = "".join(f"<dt>{escape(str(k))}</dt><dd>{escape(_text(v))}</dd>" for k, v in pairs)
    return f'<dl class="kv">{items}</dl>'


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], caption: str = "",
          numeric: Sequence[bool] | None = None, sort_values: Sequence[Sequence[Any]] | None = None,
          row_class: Sequence[str] | None = None) -> str:
    """A sortable table. `sort_values` (same shape as rows) holds raw numbers behind formatted
    cells, so "1.2ms" sorts after "900us"."""
    if len(rows) > MAX_TABLE_ROWS:
        raise InputError(f"a table of {len(rows)} rows is over the page's bound of {MAX_TABLE_ROWS}")
    numeric = numeric or [False] * len(headers)
    head = "".join(f'<th scope="col"{" class=num" if numeric[i] else ""}><button type="button">'
                   f"{escape(h)}</button></th>" for i, h in enumerate(headers))
    body_rows = []
    for r, row in enumerate(rows):
        cells = []
        for c, value in enumerate(row):
            raw = sort_values[r][c] if sort_values else None
            data = f' data-v="{escape(str(raw))}"' if raw is not None else ""
            cls = " class=num" if numeric[c] else ""
            cells.append(f"<td{cls}{data}>{_cell(value)}</td>")
        css = f' class="{row_class[r]}"' if row_class and row_class[r] else ""
        body_rows.append(f"<tr{css}>{''.join(cells)}</tr>")
    cap = f"<caption class=muted>{escape(caption)}</caption>" if caption else ""
    return (f'<div class="scroll"><table class="sortable">{cap}<thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body_rows)}</tbody></table></div>")


class Raw(str):
    """Already-safe HTML for a table cell (e.g. a status with its own markup)."""


def status(passed: bool) -> Raw:
    word = "PASS" if passed else "FAIL"
    css = "status-pass" if passed else "status-fail"
    return Raw(f'<span class="{css}">{word}</span>')


def _cell(value: Any) -> str:
    return value if isinstance(value, Raw) else escape(_text(value))


def _text(value: Any) -> str:
    return "-" if value is None else str(value)


def check_size(document: str) -> str:
    size = len(document.encode())
    if size > MAX_PAGE_BYTES:
        raise InputError(f"the page would be {size / 2**20:.1f} MiB, over the bound of "
                         f"{MAX_PAGE_BYTES / 2**20:.0f} MiB")
    return document
