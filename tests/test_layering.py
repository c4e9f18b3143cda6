"""The layering `shared/__init__.py` states, checked on the source with `ast` (nothing imported):

(a) no module in `shared/` outside `shared/checkpoints/` imports a framework, anywhere in the
    file (inside functions too): framework code lives in `ports/<fw>/`;
(b) imports run one way: `cli` -> the tools (`training`, `teaching`, `measure`, `checkpoints`,
    `report`) ->
    `runtime` -> `core`;
(c) modules stay under ~300 lines and functions under ~60 statements, with the few current
    exceptions listed below, each with its reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT / "shared"
FRAMEWORKS = ("torch", "tensorflow", "keras", "jax", "flax", "optax", "onnx", "onnxruntime")
TOOLS = ("shared.training", "shared.teaching", "shared.measure", "shared.checkpoints", "shared.report")
# package -> the imports it must never make (module prefixes)
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "shared.core": ("shared.runtime", *TOOLS, "shared.cli", "ports"),
    "shared.runtime": (*TOOLS, "shared.cli"),
    **{tool: ("shared.cli",) for tool in TOOLS},
}
MAX_LINES = 300
MAX_STATEMENTS = 60
# Current exceptions to (c): module path -> why it is one piece.
LONG_MODULES: dict[str, str] = {}  # "path" -> why it may exceed MAX_LINES
LONG_FUNCTIONS: dict[str, str] = {}  # "path::function" -> why


def python_files(*roots: Path) -> list[Path]:
    return sorted(p for root in roots for p in root.rglob("*.py"))


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path) -> list[tuple[int, str]]:
    return imports_in(path.read_text(), module_name(path), path.name == "__init__.py")


def imports_in(text: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, module) for every import in `text`, at any depth, and every
    `importlib.import_module("...")` / `__import__("...")` of a literal name."""
    out = []
    package = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against this module's package
                anchor = package[: len(package) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            out.append((node.lineno, base))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            func = ast.unparse(node.func)
            if func in ("importlib.import_module", "import_module", "__import__"):
                out.append((node.lineno, node.args[0].value))
    return out


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def test_import_walker_sees_every_kind_of_import() -> None:
    text = "\n".join([
        "import numpy as np",
        "def f():",
        "    from torch import nn",
        "    import jax.numpy",
        "    return importlib.import_module('keras')",
        "from . import sibling",
        "from ..core import spec",
    ])
    assert imports_in(text, "shared.teaching.demo", is_package=False) == [
        (1, "numpy"), (6, "shared.teaching"), (7, "shared.core"), (3, "torch"), (4, "jax.numpy"),
        (5, "keras")]


def test_no_framework_import_in_shared_outside_checkpoints() -> None:
    found = []
    for path in python_files(SHARED):
        if path.is_relative_to(SHARED / "checkpoints"):
            continue
        for line, name in imported(path):
            if any(_under(name, fw) for fw in FRAMEWORKS):
                found.append(f"{path.relative_to(ROOT)}:{line}: imports {name}")
    assert not found, "framework code belongs in ports/<fw>/:\n" + "\n".join(found)


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_run_one_way(package: str) -> None:
    found = []
    for path in python_files(ROOT / Path(*package.split("."))):
        for line, name in imported(path):
            bad = [p for p in FORBIDDEN[package] if _under(name, p)]
            if bad:
                found.append(f"{path.relative_to(ROOT)}:{line}: imports {name}")
    assert not found, f"{package} must not import {', '.join(FORBIDDEN[package])}:\n" + "\n".join(found)


def test_modules_stay_short() -> None:
    too_long = []
    for path in python_files(SHARED, ROOT / "ports"):
        rel = path.relative_to(ROOT).as_posix()
        lines = len(path.read_text().splitlines())
        if lines > MAX_LINES and rel not in LONG_MODULES:
            too_long.append(f"{rel}: {lines} lines")
        if rel in LONG_MODULES:
            assert lines > MAX_LINES, f"{rel} is {lines} lines now: take it off LONG_MODULES"
    assert not too_long, f"over {MAX_LINES} lines: split by concern (or list with a reason):\n" + \
        "\n".join(too_long)


def statements(node: ast.AST) -> int:
    return sum(isinstance(n, ast.stmt) for n in ast.walk(node)) - 1  # not the def itself


def test_functions_stay_short() -> None:
    too_long = []
    listed = set()
    for path in python_files(SHARED, ROOT / "ports"):
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            is_function = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            if is_function and statements(node) > MAX_STATEMENTS:
                key = f"{rel}::{node.name}"
                listed.add(key)
                if key not in LONG_FUNCTIONS:
                    too_long.append(f"{key}: {statements(node)} statements")
    assert set(LONG_FUNCTIONS) <= listed, f"no longer long: {sorted(set(LONG_FUNCTIONS) - listed)}"
    assert not too_long, f"over {MAX_STATEMENTS} statements:\n" + "\n".join(too_long)
