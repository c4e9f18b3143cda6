"""One error family for everything a user can get wrong.

Every message is a single line that names the field, tensor or file, the value found and what
was expected; `compare.py` prints it as ``error: <message>`` and exits 2, never with a traceback.
"""

from __future__ import annotations


class PortbenchError(Exception):
    """Base class: a problem the user can act on (bad spec, weights, input, missing framework)."""


class SpecError(PortbenchError):
    """A ModelSpec (or TrainSpec) field has a value that cannot describe a model."""


class WeightsError(PortbenchError):
    """A weight file is unreadable, incomplete, misshapen, non-finite or for another spec."""


class InputError(PortbenchError):
    """An input batch, label array or results file has the wrong shape, dtype or content."""


class FrameworkUnavailable(PortbenchError):
    """A requested framework (or backend) is not installed in this environment."""


def first_line(exc: BaseException, typed: bool = False) -> str:
    """An exception's text as one line for a message that quotes it: the first non-empty line of
    its message (Transformers' ImportErrors start with a newline), else its type's name; with
    `typed`, "Type: line". Every message that quotes an exception quotes it through here."""
    line = next((s.strip() for s in str(exc).splitlines() if s.strip()), "")
    if not line:
        return type(exc).__name__
    return f"{type(exc).__name__}: {line}" if typed else line
