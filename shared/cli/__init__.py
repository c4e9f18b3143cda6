"""`compare.py` subcommands. Each module here defines `register(subparsers)` and is found by
name, so a new subcommand is a new module, not an edit to compare.py."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType


def command_modules() -> list[ModuleType]:
    names = sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))
    modules = [importlib.import_module(f"{__name__}.{name}") for name in names]
    return sorted(modules, key=lambda m: getattr(m, "ORDER", 100))
