"""Guards around a user's own code in the worker (`--model FILE.py:NAME`): whatever it does, the
outcome is a one-line error naming what went wrong, never a vanished worker or a wrong module.
`build` imports the user's file and calls its factory under them: sys.exit / os._exit are one-line
errors (`user_code`), and a file that imports a sibling named like a portbench package is refused
before it is imported (`check_own_names`)."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from shared import REPO_ROOT
from shared.core.spec import ModelSpec
from shared.errors import InputError, PortbenchError
from shared.runtime.worker import one_line, print_phase

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


def load_factory(reference: str) -> Any:
    """`FILE.py:NAME` or `package.module:NAME` -> the object NAME (import errors are one line)."""
    where, _, name = reference.rpartition(":")
    triton_before_tensorflow()
    sys.dont_write_bytecode = True  # nothing is written beside the user's file or package
    try:
        print_phase("user-import")
        if where.endswith(".py"):
            path = Path(where).resolve()
            check_own_names(path, reference)
            spec = importlib.util.spec_from_file_location(f"portbench_user_{path.stem}", path)
            module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
            sys.modules[spec.name] = module  # type: ignore[union-attr]
            sys.path.insert(0, str(path.parent))  # its own sibling imports
            with user_code(reference, "importing it"):
                spec.loader.exec_module(module)  # type: ignore[union-attr]
        else:
            sys.path.insert(0, os.getcwd())  # a package where the user is, as `python -m` finds it
            with user_code(reference, "importing it"):
                module = importlib.import_module(where)
    except SyntaxError as exc:
        raise InputError(f"--model {reference!r}: syntax error at line {exc.lineno}: {exc.msg}") from None
    except PortbenchError:
        raise
    except (Exception, KeyboardInterrupt) as exc:  # the user's module raised while importing
        raise InputError(f"--model {reference!r}: importing it raised {one_line(exc)}") from None
    if not hasattr(module, name):
        raise InputError(f"--model {reference!r}: the module has no {name!r}")
    return getattr(module, name)


def triton_before_tensorflow() -> None:
    """Nothing is hidden from a user's code (every framework may load), and torch's triton loaded
    after TensorFlow segfaults the process (Transformers' TF ViT imports tf_keras, then torch's
    compiler stack): triton, when installed, is loaded first (0.2 s)."""
    if "tensorflow" not in sys.modules and importlib.util.find_spec("triton") is not None:
        importlib.import_module("triton")


def build(reference: str, spec: ModelSpec | None) -> Any:
    """The user's model: `factory(spec)` when the factory takes an argument, else `factory()`.
    Without a spec (it is to be read from the model) a factory that needs one is refused in one
    line naming the way out."""
    factory = load_factory(reference)
    if not callable(factory):
        raise InputError(f"--model {reference!r}: {type(factory).__name__} is not callable")
    try:
        takes = [p.name for p in inspect.signature(factory).parameters.values()
                 if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        takes = []
    if takes and spec is None:
        raise InputError(f"--model {reference!r}: it takes the spec ({takes[0]!r}), so the spec cannot be "
                         "read from the model it builds: pass --spec, or a factory that takes no arguments")
    print_phase("user-build")
    try:
        with user_code(reference, "building the model"):
            return factory(spec) if takes else factory()
    except PortbenchError:
        raise
    except (Exception, KeyboardInterrupt) as exc:  # the worker gets no Ctrl-C: its own session
        raise InputError(f"--model {reference!r}: calling it raised {one_line(exc)}") from None
    finally:
        print_phase("user-run")
