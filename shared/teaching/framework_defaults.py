"""Each framework's default for every catalogue entry, read from the installed framework by that
port's `ports/<fw>/defaults.py` (one reader per entry, named by the entry's key), and the way to
its demonstrations' framework calls (`ports/<fw>/demos.py`).

Nothing here imports a framework: the per-framework code is reached through the port registry
(`ports.load_port_part`), and a missing framework is reported, not raised.
"""

from __future__ import annotations

import contextlib
from types import ModuleType

from ports import NATIVE, load_port_part
from shared.errors import FrameworkUnavailable, first_line

FRAMEWORKS = NATIVE


def defaults_module(framework: str) -> ModuleType:
    """`ports.<fw>.defaults`, or a one-line FrameworkUnavailable."""
    return load_port_part(framework, "defaults")


def demos_module(framework: str) -> ModuleType:
    """`ports.<fw>.demos` (the demonstrations' framework calls), or a one-line FrameworkUnavailable."""
    return load_port_part(framework, "demos")


def read_default(entry: str, framework: str) -> str:
    """The installed framework's default for `entry`, or a line saying why it cannot be read."""
    try:
        reader = getattr(defaults_module(framework), entry)
        return reader()
    except FrameworkUnavailable as exc:
        return f"not installed ({first_line(exc)})"
    except (LookupError, AttributeError, TypeError) as exc:  # an API moved: say so, don't crash
        return f"unreadable in this version ({first_line(exc, typed=True)})"


# Numeric defaults other modules rely on (shared.teaching.divergences.EPSILON_SOURCES, the demonstrations):
# read here so a test can check the documented values against the installed frameworks.
def layer_norm_eps_defaults() -> dict[str, float]:
    """framework API -> its default LayerNorm epsilon ("torch", "keras", "keras.ops", "flax"),
    merged over every installed framework."""
    return _numeric_defaults("layer_norm_eps_values")


def rms_norm_eps_defaults() -> dict[str, float]:
    """framework API -> its default RMSNorm epsilon (torch's machine epsilon in float32)."""
    return _numeric_defaults("rms_norm_eps_values")


def _numeric_defaults(reader: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for framework in FRAMEWORKS:
        with contextlib.suppress(FrameworkUnavailable):
            out.update(getattr(defaults_module(framework), reader)())
    return out
