"""User-supplied text made safe to print: the one escaping every line that reaches a terminal
goes through (`error:` lines, table cells, a results file's fields in `report`).

A spec name, a framework field of a results file, a model's error message or a file's contents
may hold control characters: an escape sequence would recolour, move or clear the terminal, a
carriage return or a newline would forge a line of portbench's own, and a bidirectional override
would show the text in another order than it is. Each such character is printed as its Python
escape (`\\x1b`, `\\n`, `\\u202e`), so the line says exactly what was given and stays one line.
"""

from __future__ import annotations

import re

# C0 controls (newline and tab included: one cell, one line), DEL, C1 controls (0x9b is a CSI on
# its own), and the bidirectional embedding / override / isolate marks
UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: object) -> str:
    """`str(text)` with every control character written as its escape."""
    return UNSAFE.sub(_escape, str(text))


def has_control(text: str) -> bool:
    return UNSAFE.search(text) is not None


def _escape(match: re.Match[str]) -> str:
    return repr(match[0])[1:-1]  # Python's own escape: \n, \r, \t, \x1b, \x9b, \u202e
