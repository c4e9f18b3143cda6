"""The libraries' own source for a lesson (timm, Transformers, scipy, big_vision): the whole function,
class or method, read from the installed module file with `ast` when a command runs, with its file,
line and the installed version.

The file is found and parsed, never imported: importing Transformers' models pulls in TensorFlow,
and importing torch's triton after TensorFlow kills the process. A library that is not installed
is one line saying so (`LibraryExcerpt.missing`), never stored or invented code.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import ClassVar

from shared.core.data_record import DataRecord, stored_as
from shared.teaching.port_source import file_units


@dataclass(frozen=True)
class LibrarySelect:
    """One unit of an installed library: `module` ("timm.layers.pos_embed") and `unit`, a top-level
    function or class, or "Class.method"; `calls` says, when the library is missing, what it runs."""

    library: str  # the distribution and top-level package: "timm", "transformers", "big_vision"
    module: str
    unit: str
    calls: str = ""

    def extract(self) -> LibraryExcerpt:
        version = installed_version(self.library)
        located = module_file(self.module)
        if located is None:
            also = f"; it calls {self.calls}" if self.calls else ""
            return LibraryExcerpt(self.library, version, self.module, "", self.unit, 0, (),
                                  f"{self.library} is not installed: {self.module}.{self.unit} is not "
                                  f"shown{also}")
        path, shown = located
        found = _units(str(path)).get(self.unit)
        if found is None:
            return LibraryExcerpt(self.library, version, self.module, shown,
                                  self.unit, 0, (), f"{self.library} {version}: {self.unit} is not in "
                                  f"{self.module} (this version moved or renamed it)")
        start, lines = found
        return LibraryExcerpt(self.library, version, self.module, shown, self.unit, start, lines)


@dataclass(frozen=True)
class LibraryExcerpt(DataRecord):
    """One unit of an installed library's source, as a lesson shows it (`lessons --json`: its
    `library_code`), or one line saying why it cannot be shown."""

    KIND: ClassVar[str] = "library excerpt"

    library: str
    version: str | None
    module: str
    file: str  # relative to the folder the package is installed in: "timm/layers/pos_embed.py"
    qualname: str = stored_as("unit")
    start: int = stored_as("start_line")
    lines: tuple[str, ...]
    missing: str | None = None  # one line when nothing could be shown, saying why

    @property
    def heading(self) -> str:
        return self.missing or f"{self.file}:{self.start} {self.qualname}"


def library_label(library: str, version: str | None) -> str:
    """A library's column heading: its name and the installed version."""
    return f"{library} {version}" if version else f"{library} (not installed)"


def installed_version(library: str) -> str | None:
    try:
        return importlib.metadata.version(library)
    except importlib.metadata.PackageNotFoundError:
        return None


def module_file(module: str) -> tuple[Path, str] | None:
    """The module's source file, and its path from the folder the package is installed in
    ("timm/layers/pos_embed.py"), found without importing anything."""
    top, *rest = module.split(".")
    try:
        spec = importlib.util.find_spec(top)  # a top-level spec executes nothing
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        base = Path(folder).joinpath(*rest)
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate, candidate.relative_to(Path(folder).parent).as_posix()
    return None


@cache
def _units(path: str) -> dict[str, tuple[int, tuple[str, ...]]]:
    """qualname -> (first line, source lines), as port_source reads a port's file."""
    out: dict[str, tuple[int, tuple[str, ...]]] = {}
    for qualname, start, _, lines in file_units(Path(path).read_text()):
        out.setdefault(qualname, (start, lines))
    return out
