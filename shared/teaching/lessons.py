"""Lessons: the four ports' own source (torch, Keras, Flax, MLX), side by side, for each place the
frameworks differ, with the catalogue's measured gap and pin; where the libraries people port
from disagree (issue 23's positions), each library's own code beside them.

The code shown is extracted when the command runs, from ports/<fw>/*.py
(`shared.teaching.port_source`) and from the installed libraries' files
(`shared.teaching.library_source`), so a lesson cannot drift from either. Each lesson says which
code to extract, in its entry's row (`shared.teaching.divergences`).
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from shared.core.data_record import DataRecord, derived
from shared.core.equivalence import Gap
from shared.teaching.divergences import CATALOGUE, entry
from shared.teaching.framework_defaults import FRAMEWORKS
from shared.teaching.library_source import LibraryExcerpt, library_label
from shared.teaching.port_source import Excerpt
from shared.teaching.row import Lesson

# Each entry's lesson, in reading order (the numbered places, then the rest in catalogue order).
LESSONS: tuple[Lesson, ...] = tuple(sorted((e.lesson for e in CATALOGUE if e.lesson is not None),
                                           key=lambda item: (item.place == 0, item.place)))


@dataclass(frozen=True, kw_only=True)
class LessonView(DataRecord):
    """A lesson as a command shows it: the ports' code and the libraries', the catalogue's title
    and pin, and the demonstration's gap when it was measured (`lessons --json`: one per lesson)."""

    KIND: ClassVar[str] = "lesson"

    name: str
    entry: str = derived()  # the catalogue entry it teaches: a lesson is named by its entry's key
    title: str
    point: str
    pin: str
    gap: Gap | None = None  # the demonstration's headline, when it was measured
    measurements: tuple[str, ...] = ()
    code: dict[str, list[Excerpt]] = field(default_factory=dict)  # by framework
    library_code: dict[str, list[LibraryExcerpt]] = field(default_factory=dict)  # by library, in order

    def derived_values(self) -> dict[str, Any]:
        return {"entry": self.name}


def lesson(name: str) -> Lesson:
    for item in LESSONS:
        if item.name == name:
            return item
    raise KeyError(name)


def build_view(item: Lesson, measure: bool = True) -> LessonView:
    catalogue = entry(item.name)
    code = {fw: [e for s in item.selects for e in s.extract(fw)] for fw in FRAMEWORKS}
    library_code: dict[str, list[LibraryExcerpt]] = {}
    for select in item.library:
        library_code.setdefault(select.library, []).append(select.extract())
    demo = catalogue.run_demo() if measure else None
    return LessonView(name=item.name, title=catalogue.title, point=item.point, pin=catalogue.pin,
                      gap=demo.gap if demo else None, measurements=tuple(demo.lines) if demo else (),
                      code=code, library_code=library_code)


def library_columns(view: LessonView) -> dict[str, list[LibraryExcerpt]]:
    """The libraries' excerpts keyed by their column heading: name and installed version."""
    return {library_label(lib, ex[0].version): ex for lib, ex in view.library_code.items()}


def side_by_side(code: Mapping[str, Sequence[Excerpt | LibraryExcerpt]], width: int = 180) -> list[str]:
    """One column per framework (or library); long lines wrap inside their column."""
    column = max(30, (width - 2 * 3) // len(code))
    blocks: dict[str, list[str]] = {}
    for fw, excerpts in code.items():
        lines: list[str] = [f"{fw}"]
        for ex in excerpts:
            lines += textwrap.wrap(f"# {ex.heading}", column, subsequent_indent="#   ")
            body = textwrap.dedent("\n".join(ex.lines)).splitlines()
            for text in body:
                lines += textwrap.wrap(text, column, subsequent_indent="    ", drop_whitespace=False) or [""]
        if not excerpts:
            lines.append("(nothing found: the ports are no longer parallel here)")
        blocks[fw] = lines
    rows = max(len(b) for b in blocks.values())
    out = []
    for i in range(rows):
        cells = [(blocks[fw][i] if i < len(blocks[fw]) else "").ljust(column)[:column] for fw in blocks]
        out.append(" | ".join(cells).rstrip())
    return out
