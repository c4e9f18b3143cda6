"""What portbench prints on a terminal fits WIDTH columns: tables are built to fit, and every
free-text line (notes, lists of files, pairwise gaps) is wrapped here, continuations indented."""

from __future__ import annotations

import textwrap

WIDTH = 100


def wrap(text: str, width: int = WIDTH, indent: str = "    ", paths: bool = False) -> list[str]:
    """One line of text as lines of at most `width` columns. With `paths`, a word longer than
    that (a long file name) is kept whole, so that it can still be copied."""
    return textwrap.wrap(text, width, subsequent_indent=indent, break_on_hyphens=False,
                         break_long_words=not paths) or [""]


def wrapped(text: str, width: int = WIDTH, paths: bool = False) -> str:
    return "\n".join(wrap(text, width, paths=paths))
