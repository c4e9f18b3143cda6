"""One fact, one place (issue 34): a catalogue key is declared by one row, its `Entry` in
shared/teaching/divergences.py, which carries the key's alternatives, the specs they are measured
on, its demonstration and its lesson. Checked on the source with `ast`, and each rule shown to fail
on a planted violation.

The modules checked are those that build the catalogue or read it (the rows' module, what it
imports and what imports it, in shared/teaching). In them a key's string is the first argument of
its `Entry` and appears nowhere outside that row, unless the same word is the spec's vocabulary (a
ModelSpec or TrainSpec field or one of its values, such as `pooling` or `gelu`): there it names
the field. The audit (audit.py, shared/your_model/spec_check.py) reads no row: it labels its
findings with a key, which must be one.
"""

from __future__ import annotations

import ast
import typing
from collections import Counter
from dataclasses import fields
from pathlib import Path

from shared.core.spec import ModelSpec
from shared.core.train_spec import TrainSpec
from shared.teaching.divergences import CATALOGUE, entry

ROOT = Path(__file__).resolve().parent.parent
TEACHING = ROOT / "shared" / "teaching"
ROWS = "shared.teaching.divergences"
TRANSFORMS = ("shared.teaching.transforms", "shared.teaching.family_transforms",
              "shared.teaching.position_transforms")
KEYS = frozenset(e.key for e in CATALOGUE)


def teaching_sources() -> dict[str, str]:
    return {f"shared.teaching.{p.stem}": p.read_text() for p in sorted(TEACHING.glob("*.py"))
            if p.stem != "__init__"}


def imports(text: str) -> set[str]:
    """The shared.teaching modules `text` imports, anywhere in the file."""
    out = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
            out |= {n for n in names if n.startswith("shared.teaching.")}
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("shared.teaching.")}
    return out


def catalogue_modules(sources: dict[str, str]) -> set[str]:
    """The rows' module, every module it imports, and every module that imports it (transitively)."""
    graph = {name: imports(text) & set(sources) for name, text in sources.items()}
    below, stack = set(), [ROWS]
    while stack:
        for name in graph.get(stack.pop(), ()):
            if name not in below:
                below.add(name)
                stack.append(name)
    above = {ROWS}
    while True:
        more = {name for name, deps in graph.items() if deps & above} - above
        if not more:
            break
        above |= more
    return below | above


def literal_words(hint: object) -> set[str]:
    if typing.get_origin(hint) is typing.Literal:
        return {a for a in typing.get_args(hint) if isinstance(a, str)}
    return {w for a in typing.get_args(hint) for w in literal_words(a)}


def spec_vocabulary() -> set[str]:
    out: set[str] = set()
    for record in (ModelSpec, TrainSpec):
        hints = typing.get_type_hints(record)
        for f in fields(record):
            out |= {f.name, *literal_words(hints[f.name])}
    return out


def misplaced(sources: dict[str, str], keys: frozenset[str], vocabulary: set[str]) -> list[str]:
    """Each way the catalogue modules of `sources` break one row per key."""
    found: list[str] = []
    declared: Counter[str] = Counter()
    for module in sorted(catalogue_modules(sources)):
        tree = ast.parse(sources[module])
        rows: set[int] = set()  # each Entry's first argument
        inside: set[int] = set()  # the key again inside its own row (code a lesson looks for, say)
        for row in ast.walk(tree):
            if isinstance(row, ast.Call) and isinstance(row.func, ast.Name) and row.func.id == "Entry" \
                    and row.args and isinstance(row.args[0], ast.Constant):
                rows.add(id(row.args[0]))
                inside |= {id(n) for n in ast.walk(row) if isinstance(n, ast.Constant)
                           and n.value == row.args[0].value}
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Constant) and node.value in keys):
                continue
            if id(node) in rows:
                declared[node.value] += 1
                if module != ROWS:
                    found.append(f"{module}:{node.lineno}: {node.value!r} declared outside {ROWS}")
            elif id(node) not in inside and node.value not in vocabulary:
                found.append(f"{module}:{node.lineno}: {node.value!r} outside its row")
    found += [f"{key!r} is declared {declared[key]} times" for key in sorted(keys) if declared[key] != 1]
    return found


def transforms_named(text: str) -> set[tuple[str, str]]:
    """(module, name) for each name of a transforms module that `text` uses: imported by name, or
    read from the module (`t.heads_merged`)."""
    tree = ast.parse(text)
    out: set[tuple[str, str]] = set()
    modules: dict[str, str] = {}  # local name -> transforms module
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        for alias in node.names:
            if node.module in TRANSFORMS:
                out.add((node.module, alias.name))
            elif f"{node.module}.{alias.name}" in TRANSFORMS:
                modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
            out.add((modules[node.value.id], node.attr))
    return out


def transforms_used_elsewhere(sources: dict[str, str]) -> list[str]:
    """The transforms the rows name, named by another module than the rows and their own."""
    shared_types = {"Variant", "Case", "Transform"}
    by_rows = {pair for pair in transforms_named(sources[ROWS]) if pair[1] not in shared_types}
    found = []
    for module, text in sorted(sources.items()):
        if module == ROWS or module in TRANSFORMS:
            continue
        found += [f"{module} names {source}.{name}, which the rows name"
                  for source, name in sorted(transforms_named(text) & by_rows)]
    return found


def test_each_catalogue_key_is_declared_once_as_an_entry_row() -> None:
    found = misplaced(teaching_sources(), KEYS, spec_vocabulary())
    assert not found, "a catalogue key is one row, its Entry in divergences.py:\n" + "\n".join(found)


def test_the_rows_are_read_where_they_are_used() -> None:
    """What used to be a second row is read from the Entry: the alternatives' entry, the lessons
    and the specs the rung table measures on."""
    from shared.teaching import detectability
    from shared.teaching.lessons import LESSONS
    from shared.teaching.variants import all_variants

    assert {v.entry for v in all_variants()} <= KEYS
    assert all(v.entry == e.key for e in CATALOGUE for v in e.alternatives)
    assert {x.name for x in LESSONS} == {e.key for e in CATALOGUE if e.lesson is not None}
    remainder = entry("remainder")
    assert detectability.measure("remainder", "remainder=pad").label == remainder.cases[0].label


def test_each_transform_is_named_by_its_row_only() -> None:
    found = transforms_used_elsewhere(teaching_sources())
    assert not found, "a transform is referenced from its entry's row only:\n" + "\n".join(found)


def test_the_audit_labels_findings_with_catalogue_keys() -> None:
    from shared.teaching.audit import CALL_RULES

    assert {rule.entry for rule in CALL_RULES} <= KEYS


def test_a_planted_second_row_fails() -> None:
    vocabulary = spec_vocabulary()
    keys = frozenset({"head_width", "pooling"})
    rows = ('from shared.teaching.row import Entry\n'
            'CATALOGUE = (Entry("head_width", "t", lesson=Lesson("p", Select("head_width"))),\n'
            '             Entry("pooling", "t", more=spec_field("pooling")))\n')
    assert misplaced({ROWS: rows}, keys, vocabulary) == []
    lessons = ('from shared.teaching.divergences import CATALOGUE\n'
               'LESSONS = (Lesson("head_width", "point"),)\n'
               'PLACES = {"pooling": 1}\n')  # vocabulary, though: `pooling` is a spec field
    found = misplaced({ROWS: rows, "shared.teaching.lessons": lessons}, keys, vocabulary)
    assert found == ["shared.teaching.lessons:2: 'head_width' outside its row"]
    across = rows.replace('Select("head_width")', 'Select("swiglu")')  # another row's key, in this one
    assert misplaced({ROWS: across}, keys | {"swiglu"}, vocabulary)[0] == \
        "shared.teaching.divergences:2: 'swiglu' outside its row"
    twice = rows.replace('Entry("pooling"', 'Entry("head_width"')
    assert misplaced({ROWS: twice}, keys, vocabulary) == ["'head_width' is declared 2 times",
                                                          "'pooling' is declared 0 times"]
    elsewhere = {ROWS: "CATALOGUE = ()\n", "shared.teaching.variants":
                 'from shared.teaching import divergences\nEntry("pooling", "t")\nEntry("head_width", "t")\n'}
    assert len(misplaced(elsewhere, keys, vocabulary)) == 2
    unrelated = {ROWS: rows, "shared.teaching.audit": 'RULES = (Rule("head_width"),)\n'}
    assert misplaced(unrelated, keys, vocabulary) == []  # neither builds nor reads the catalogue


def test_a_planted_transform_named_outside_its_row_fails() -> None:
    rows = ("from shared.teaching import transforms as t\n"
            "from shared.teaching.transforms import Variant\n"
            "CATALOGUE = (Entry('k', alternatives=(Variant('v', 'c', t.heads_merged),)),)\n")
    demo = "from shared.teaching.transforms import Case, heads_merged\n"
    clean = "from shared.teaching.transforms import Case\n"
    assert transforms_used_elsewhere({ROWS: rows, "shared.teaching.demo": clean}) == []
    assert transforms_used_elsewhere({ROWS: rows, "shared.teaching.demo": demo}) == [
        "shared.teaching.demo names shared.teaching.transforms.heads_merged, which the rows name"]
