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
