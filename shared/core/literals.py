"""A module's literal facts read from its source text without importing it: the command index
(`shared/cli/__init__.py`: each command's `ORDER` and `HELP`) and the checkpoint plug-ins
(`shared/checkpoints/__init__.py`: each library's `ORDER` and `FORMATS`) are listed so, and only
what is used is imported."""

from __future__ import annotations

import ast
from pathlib import Path


def module_literals(path: Path, names: tuple[str, ...]) -> dict[str, object]:
    """The module-level `NAME = <literal>` (or `NAME: type = <literal>`) assignments of a source
    file, for the names asked."""
    found: dict[str, object] = {}
    for node in ast.parse(path.read_text(encoding="utf-8"), str(path)).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id in names:
            found[target.id] = ast.literal_eval(value)
    return found
