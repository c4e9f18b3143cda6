"""The ports' own source, read with `ast` when a command runs: the functions, classes and methods
of ports/<fw>/{model,transfer,port}.py (`port_units`), a selector that finds the same place in
every port (`Select`), and the lines that read each spec field (`field_excerpts`).

Nothing here is copied text, so what the lessons and docs/rosetta.md show cannot drift from the
ports. The ports are parallel texts (same file, class and function names), which is what lets one
selector find the same place in every port.
"""

from __future__ import annotations

import ast
import dataclasses
import textwrap
from dataclasses import dataclass
from functools import cache
from typing import ClassVar

from shared import REPO_ROOT
from shared.core.data_record import DataRecord, stored_as
from shared.core.spec import Derived, ModelSpec

ROOT = REPO_ROOT
PORT_FILES = ("model.py", "transfer.py", "port.py")
CALL_METHODS = ("forward", "call", "__call__")  # torch / Keras / Flax spelling of "run the layer"


@dataclass(frozen=True)
class Unit:
    """A function, class or method of one port file."""

    framework: str
    file: str
    qualname: str  # "layer_norm", "Attention", "Attention.forward"
    start: int
    end: int
    lines: tuple[str, ...]  # the source lines start..end


@dataclass(frozen=True)
class Excerpt(DataRecord):
    """Lines of one port file's unit, as a lesson shows them (`lessons --json`: its `code`)."""

    KIND: ClassVar[str] = "excerpt"

    path: str = stored_as("file")  # from the repository's root: "ports/torch/model.py"
    qualname: str = stored_as("unit")
    start: int = stored_as("start_line")
    lines: tuple[str, ...]

    @classmethod
    def of(cls, framework: str, file: str, qualname: str, start: int, lines: tuple[str, ...]) -> Excerpt:
        return cls(f"ports/{framework}/{file}", qualname, start, lines)

    @property
    def file(self) -> str:
        """The file's name in its port folder: "model.py"."""
        return self.path.split("/", 2)[2]

    @property
    def heading(self) -> str:
        return f"{self.path}:{self.start} {self.qualname}"


def file_units(text: str) -> list[tuple[str, int, int, tuple[str, ...]]]:
    """(qualname, first line, last line, source lines) of a Python file's top-level functions and
    classes and their methods, decorators included: the units a lesson shows, from a port or from an
    installed library (shared/teaching/library_source.py)."""
    source = text.splitlines()
    out = []

    def add(node: ast.AST, qualname: str) -> None:
        start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        end = node.end_lineno or node.lineno
        out.append((qualname, start, end, tuple(source[start - 1:end])))

    defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    for node in ast.parse(text).body:
        if isinstance(node, defs):
            add(node, node.name)
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, defs):
                    add(item, f"{node.name}.{item.name}")
    return out


@cache
def port_units(framework: str) -> tuple[Unit, ...]:
    units: list[Unit] = []
    for name in PORT_FILES:
        path = ROOT / "ports" / framework / name
        if path.is_file():
            units += [Unit(framework, name, *unit) for unit in file_units(path.read_text())]
    return tuple(units)


def find_unit(framework: str, qualname: str) -> Unit | None:
    """`Class.call` matches the framework's own spelling (forward / call / __call__)."""
    names = [qualname]
    if qualname.endswith(".call"):
        cls = qualname.rsplit(".", 1)[0]
        names = [f"{cls}.{m}" for m in CALL_METHODS]
    for unit in port_units(framework):
        if unit.qualname in names:
            return unit
    return None


def _excerpt(unit: Unit, keep: list[int] | None = None) -> Excerpt:
    if keep is None:
        return Excerpt.of(unit.framework, unit.file, unit.qualname, unit.start, unit.lines)
    lines = tuple(unit.lines[i - unit.start] for i in keep)
    return Excerpt.of(unit.framework, unit.file, unit.qualname, keep[0], lines)


def _innermost(framework: str, file: str, line: int) -> Unit | None:
    inside = [u for u in port_units(framework) if u.file == file and u.start <= line <= u.end]
    return min(inside, key=lambda u: u.end - u.start, default=None)


# ---- selectors ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Select:
    """Which code a lesson shows: a unit by name, optionally only its lines containing one of
    `contains` (plain text), and/or lines in `file` reading one of the spec `fields`."""

    unit: str | None = None
    contains: tuple[str, ...] = ()
    file: str | None = None
    fields: tuple[str, ...] = ()
    docstring: bool = False  # only the unit's docstring

    def extract(self, framework: str) -> list[Excerpt]:
        if self.docstring and self.unit:
            unit = find_unit(framework, self.unit)
            return [] if unit is None else [_docstring_excerpt(unit)]
        if self.fields:
            return field_excerpts(framework, self.fields, only_file=self.file)
        if self.unit is None:
            if self.file is None or not self.contains:
                return []
            return _text_excerpts(framework, self.file, self.contains)
        unit = find_unit(framework, self.unit)
        if unit is None:
            return []
        if not self.contains:
            return [_excerpt(unit)]
        keep = [unit.start + i for i, line in enumerate(unit.lines) if any(c in line for c in self.contains)]
        return [_excerpt(unit, keep)] if keep else []


def _docstring_excerpt(unit: Unit) -> Excerpt:
    tree = ast.parse(textwrap.dedent("\n".join(unit.lines)))
    node = tree.body[0]
    first = node.body[0] if node.body else None
    if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)):
        return Excerpt.of(unit.framework, unit.file, unit.qualname, unit.start, unit.lines[:1])
    start, end = first.lineno - 1, first.end_lineno or first.lineno
    return Excerpt.of(unit.framework, unit.file, unit.qualname, unit.start + start, unit.lines[start:end])


def _text_excerpts(framework: str, file: str, needles: tuple[str, ...]) -> list[Excerpt]:
    path = ROOT / "ports" / framework / file
    out: dict[str, list[int]] = {}
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if any(n in line for n in needles):
            unit = _innermost(framework, file, number)
            out.setdefault(unit.qualname if unit else "<module>", []).append(number)
    result = []
    for qualname, numbers in out.items():
        unit = next(u for u in port_units(framework) if u.qualname == qualname and u.file == file)
        result.append(_excerpt(unit, numbers))
    return result


# ---- spec fields in the ports' source ---------------------------------------------------------
SPEC_FIELDS = tuple(f.name for f in dataclasses.fields(ModelSpec) if f.name != "name")
DERIVED_FIELDS = tuple(f.name for f in dataclasses.fields(Derived))
SPEC_BASES = ("spec", "s", "self.spec", "model.spec")


@cache
def _reads(framework: str, file: str) -> tuple[tuple[int, str], ...]:
    """(line, name) for every read of a spec field (spec.x, s.x, self.spec.x) or a derived
    quantity (d.x, spec.derived.x) in one port file."""
    path = ROOT / "ports" / framework / file
    if not path.is_file():
        return ()
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Attribute):
            continue
        base = ast.unparse(node.value)
        if node.attr in SPEC_FIELDS and (base in SPEC_BASES or base.endswith(".spec")):
            out.append((node.lineno, node.attr))
        elif node.attr in DERIVED_FIELDS and (base == "d" or base.endswith("derived")):
            out.append((node.lineno, "derived." + node.attr))
    return tuple(sorted(set(out)))


def field_excerpts(framework: str, names: tuple[str, ...], only_file: str | None = None) -> list[Excerpt]:
    """The lines of each port file that read any of `names` (spec fields or `derived.x`),
    grouped by the innermost function or class around them."""
    out: list[Excerpt] = []
    for file in PORT_FILES:
        if only_file and file != only_file:
            continue
        hits = sorted({line for line, name in _reads(framework, file) if name in names})
        grouped: dict[tuple[str, int], list[int]] = {}
        for line in hits:
            unit = _innermost(framework, file, line)
            key = (unit.qualname, unit.start) if unit else ("<module>", 0)
            grouped.setdefault(key, []).append(line)
        source = (ROOT / "ports" / framework / file).read_text().splitlines()
        for (qualname, _), lines in grouped.items():
            out.append(Excerpt.of(framework, file, qualname, lines[0], tuple(source[i - 1] for i in lines)))
    return out
