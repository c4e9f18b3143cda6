"""Guards around a user's own code in the worker (`--model FILE.py:NAME`): whatever it does, the
outcome is a one-line error naming what went wrong, never a vanished worker or a wrong module."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from pathlib import Path

from shared import REPO_ROOT
from shared.errors import InputError

OWN_PACKAGES = ("shared", "ports")  # portbench's top-level packages, imported in every worker


class UserExit(BaseException):
    """os._exit called by the user's code, turned into an exception while it runs."""

    def __init__(self, code: object) -> None:
        super().__init__(code)
        self.code = code


@contextlib.contextmanager
def user_code(reference: str, doing: str) -> Iterator[None]:
    """Run the user's code for `doing`: sys.exit / os._exit become one-line InputErrors."""
    real_exit = os._exit

    def refuse_exit(code: int = 0) -> None:
        raise UserExit(code)

    os._exit = refuse_exit  # type: ignore[assignment]
    try:
        yield
    except (SystemExit, UserExit) as exc:
        call = "os._exit" if isinstance(exc, UserExit) else "sys.exit"
        raise InputError(f"--model {reference!r}: your code called {call}({exc.code!r}) while {doing}; "
                         "a model's code must return or raise") from None
    finally:
        os._exit = real_exit


def check_own_names(path: Path, reference: str) -> None:
    """Refuse a file that imports a sibling named like a portbench package (`shared`, `ports`):
    those names are portbench's in this process, so the import would find the wrong module."""
    if path.parent == REPO_ROOT:
        return
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return
    for name in OWN_PACKAGES:
        sibling = next((p for p in (path.parent / name, path.parent / f"{name}.py") if p.exists()), None)
        if sibling is not None and re.search(rf"^\s*(from|import)\s+{name}\b", text, re.M):
            shown = sibling.name + ("/" if sibling.is_dir() else "")
            raise InputError(f"--model {reference!r}: it imports {name!r}, and its folder holds {shown!r}, "
                             f"but {name!r} is also portbench's own package, which Python would give it "
                             "instead; rename yours")
