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

from shared.teaching.divergences import CATALOGUE, entry
from shared.teaching.framework_defaults import FRAMEWORKS
from shared.teaching.library_source import LibraryExcerpt, library_label
from shared.teaching.port_source import Excerpt
from shared.teaching.row import Lesson

# Each entry's lesson, in reading order (the numbered places, then the rest in catalogue order).
LESSONS: tuple[Lesson, ...] = tuple(sorted((e.lesson for e in CATALOGUE if e.lesson is not None),
                                           key=lambda item: (item.place == 0, item.place)))


@dataclass
class LessonView:
    lesson: Lesson
    code: dict[str, list[Excerpt]]
    library_code: dict[str, list[LibraryExcerpt]]  # by library, in the lesson's order
    title: str
    pin: str
    gap: float | None = None
    measurements: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {"name": self.lesson.name, "entry": self.lesson.name, "title": self.title,
                "point": self.lesson.point, "pin": self.pin, "gap": self.gap,
                "measurements": self.measurements,
                "code": {fw: [e.to_dict() for e in ex] for fw, ex in self.code.items()},
                "library_code": {lib: [e.to_dict() for e in ex] for lib, ex in self.library_code.items()}}


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
    view = LessonView(item, code, library_code, catalogue.title, catalogue.pin)
    if measure:
        demo = catalogue.run_demo()
        view.gap, view.measurements = demo.gap, demo.lines
    return view


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
