"""`compare.py` subcommands. Each module here is one command, named as the module, with
`ORDER` (its place in `--help`), `HELP` (its line there) and `register(subparsers)`; a new
subcommand is a new module, not an edit to compare.py.

Commands load lazily: `command_index` reads each module's `ORDER` and `HELP` from its source
text (two literal assignments, never executed), so `compare.py --help` lists every command and a
command's own parser is built only when its name is on the command line. `--help`, and a
refused argument of a command whose module imports its tools inside `run`, import no framework.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from shared.core.literals import module_literals


@dataclass(frozen=True)
class Command:
    """One subcommand as `--help` lists it; `load()` imports its module."""

    name: str
    module: str
    help: str
    order: int

    def load(self) -> ModuleType:
        return importlib.import_module(self.module)


def command_index() -> list[Command]:
    """The commands here (the modules not starting with `_`), in `--help` order."""
    folder = Path(__path__[0])
    names = [m.name for m in pkgutil.iter_modules([str(folder)]) if not m.name.startswith("_")]
    commands = [command_at(name, f"{__name__}.{name}", folder / f"{name}.py") for name in names]
    return sorted(commands, key=lambda c: (c.order, c.name))


def command_at(name: str, module: str, path: Path) -> Command:
    """The command `name` that `module` (whose source is `path`) registers, read from its
    literal `ORDER` and `HELP` without importing it."""
    facts = module_literals(path, ("ORDER", "HELP"))
    if "HELP" not in facts:
        raise LookupError(f"{path}: a command module states its --help line as HELP = '...'")
    return Command(name, module, str(facts["HELP"]), int(facts.get("ORDER", 100)))  # type: ignore[call-overload]
