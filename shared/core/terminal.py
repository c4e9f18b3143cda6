"""What portbench prints on a terminal: user-supplied text made safe to print, and every line
fitting WIDTH columns.

Escaping: a spec name, a framework field of a results file, a model's error message or a file's
contents may hold control characters: an escape sequence would recolour, move or clear the
terminal, a carriage return or a newline would forge a line of portbench's own, and a
bidirectional override would show the text in another order than it is. Each such character is
printed as its Python escape (`\\x1b`, `\\n`, `\\u202e`), so the line says exactly what was given
and stays one line. Every `error:` line, table cell and results-file field goes through
`printable`.

Length: user text is bounded where it is made printable. A text longer than LINE_LIMIT
characters (a table cell: CELL_LIMIT) keeps its start and its end around a count of the
characters left out (`elide`), so a results file's 10 MB framework name prints as one line of a
thousand characters, not 10 million of them, and still says where it begins, ends and how long it
is. Escaping comes after: an escape shows one character as up to six.

Width: tables are built to fit; every free-text line (notes, lists of files, pairwise gaps) is
wrapped by `wrap`, continuations indented.
"""

from __future__ import annotations

import re
import textwrap

WIDTH = 100
# C0 controls (newline and tab included: one cell, one line), DEL, C1 controls (0x9b is a CSI on
# its own), and the bidirectional embedding / override / isolate marks
UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


LINE_LIMIT = 10 * WIDTH  # the most characters of one text a printed line holds
CELL_LIMIT = WIDTH - 20  # the most one table cell holds, so that a row keeps its other columns


def printable(text: object, limit: int = LINE_LIMIT) -> str:
    """`str(text)`, at most `limit` characters of it (`elide`), with every control character
    written as its escape."""
    return UNSAFE.sub(_escape, elide(str(text), limit))


def elide(text: str, limit: int = LINE_LIMIT) -> str:
    """`text` if it has at most `limit` characters; else its start and end around a count of
    the characters between them, `limit` characters in all."""
    if len(text) <= limit:
        return text
    kept = max(limit - len(_left_out(len(text))), 2)  # the count is at most the text's length
    head, tail = text[:(kept + 1) // 2], text[len(text) - kept // 2:]
    return head + _left_out(len(text) - len(head) - len(tail)) + tail


def _left_out(count: int) -> str:
    return f" [... {count:,} characters left out ...] "


def has_control(text: str) -> bool:
    return UNSAFE.search(text) is not None


def _escape(match: re.Match[str]) -> str:
    return repr(match[0])[1:-1]  # Python's own escape: \n, \r, \t, \x1b, \x9b, \u202e


def wrap(text: str, width: int = WIDTH, paths: bool = False) -> list[str]:
    """One line of text, escaped, as lines of at most `width` columns. With `paths`, a word longer
    than that (a long file name) is kept whole, so that it can still be copied."""
    return textwrap.wrap(printable(text), width, subsequent_indent="    ", break_on_hyphens=False,
                         break_long_words=not paths) or [""]


def wrapped(text: str, width: int = WIDTH, paths: bool = False) -> str:
    return "\n".join(wrap(text, width, paths=paths))


def format_table(headers: list[str], rows: list[list[str]]) -> str:
    """Aligned columns; every cell `printable` (a name from a user's file or model cannot move
    the terminal or split a row)."""
    headers = [printable(h) for h in headers]
    rows = [[printable(c) for c in r] for r in rows]
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(h)
              for i, h in enumerate(headers)]
    line = " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    out = [line, "-+-".join("-" * w for w in widths)]
    out += [" | ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(out)
