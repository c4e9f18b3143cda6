"""What portbench prints on a terminal fits WIDTH columns: tables are built to fit, and every
free-text line (notes, lists of files, pairwise gaps) is wrapped here, continuations indented."""

from __future__ import annotations

import textwrap

WIDTH = 100


def wrap(text: str, width: int = WIDTH, indent: str = "    ") -> list[str]:
    """One line of text as lines of at most `width` columns (a single word longer than that, such
    as a long path, is kept whole rather than broken)."""
    return textwrap.wrap(text, width, subsequent_indent=indent, break_on_hyphens=False,
                         break_long_words=False) or [""]


def wrapped(text: str, width: int = WIDTH) -> str:
    return "\n".join(wrap(text, width))
