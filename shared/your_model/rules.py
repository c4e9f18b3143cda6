"""The user's `--map rules.toml` file (`verify --model ... --map`), read and checked in the
parent before any worker starts, as the rename rows `binding.bind` takes (table text in the
`shared.core.mapping` syntax): every mistake in the file is one line naming the row."""

from __future__ import annotations

from shared.core import mapping
from shared.core.documents import decode_toml
from shared.core.files import read_text
from shared.core.mapping import Table
from shared.core.spec import ModelSpec
from shared.errors import SpecError, WeightsError


def read_rules(path: str, spec: ModelSpec | None = None) -> str:
    """`--map rules.toml`: a [map] table of "your-name-pattern" = "canonical-pattern" or
    ["canonical-pattern", "layout"], patterns in the mapping tables' `{i}` syntax -> table rows.
    Anything else in the file is refused by name: another top-level key, a row of another shape
    (a number, a nested table, a list of three), an unknown layout and, given `spec`, a
    canonical pattern that names none of its tensors (a row that silently bound nothing would
    leave the binding to the conventions, and the verdict would not be about the user's rows)."""
    where = f"map file {path!r}"
    data = decode_toml(read_text(path, where, SpecError), where)
    rows = data.get("map")
    if not isinstance(rows, dict) or not rows:
        raise WeightsError(f"{where}: expected a [map] table of \"your-name\" = \"canonical-name\" rows")
    extra = [key for key in data if key != "map"]
    if extra:
        raise WeightsError(f"{where}: top-level key {extra[0]!r} is not part of the format; expected only "
                           "a [map] table of \"your-name\" = \"canonical-name\" rows")
    return "\n".join(_rule_line(where, native, target, spec) for native, target in rows.items())


def _rule_line(where: str, native: str, target: object, spec: ModelSpec | None) -> str:
    """One `--map` row as a table line "canonical native layout", checked."""
    parts = [target] if isinstance(target, str) else target if isinstance(target, list) else []
    canonical, lay = (*parts, "same")[:2] if 1 <= len(parts) <= 2 else ("", "")
    if not all(isinstance(t, str) and t and "#" not in t and not any(c.isspace() for c in t)
               for t in (native, canonical, lay)):
        raise WeightsError(f"{where}: row {native!r} = {target!r:.80} must be \"canonical-name\" or "
                           "[\"canonical-name\", \"layout\"] (names without spaces or #)")
    if lay not in mapping.LAYOUTS:
        raise WeightsError(f"{where}: row {native!r} = {target!r:.80}: layout {lay!r} is unknown; expected "
                           f"one of: {', '.join(mapping.LAYOUTS)}")
    row = Table(f"{canonical} {native} {lay}", where).rows[0]
    if spec is not None and not any(row.pattern.fullmatch(c) for c in spec.derived.tensor_shapes):
        raise WeightsError(f"{where}: row {native!r} = {canonical!r} names no tensor of spec {spec.name!r} "
                           f"(its tensors are e.g. {', '.join(list(spec.derived.tensor_shapes)[:3])})")
    return f"{canonical} {native} {lay}"
