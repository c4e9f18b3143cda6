"""The port registry: which frameworks are installed, and a way to load one without failing on
import when another is missing.

Each entry is a framework name as users type it (`--frameworks torch,keras,flax`). An entry may
set environment variables that must hold before its framework is imported (Keras' backend), so
in-process use is limited to one Keras backend per process; `compare.py` runs each entry in its
own subprocess with its `env`.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, cast

from shared.errors import FrameworkUnavailable, first_line

if TYPE_CHECKING:
    from shared.runtime.contract import PortInterface, PortModule


@dataclass(frozen=True)
class PortEntry:
    name: str
    module: str  # the package holding model.py, transfer.py and port.py
    requires: tuple[str, ...]  # importable modules this entry needs
    install_hint: str
    env: dict[str, str] = field(default_factory=dict)
    # the rungs this entry does not offer: "mixed" (every mixed rung) or "float32-only" (every
    # rung but float32), each with why; `rung_refusal` reads it
    refuses: dict[str, str] = field(default_factory=dict)


PORTS: dict[str, PortEntry] = {
    "torch": PortEntry("torch", "ports.torch", ("torch",), "pip install -e '.[torch]'"),
    "keras": PortEntry("keras", "ports.keras", ("keras", "tensorflow"), "pip install -e '.[keras]'",
                       env={"KERAS_BACKEND": "tensorflow"}),
    "flax": PortEntry("flax", "ports.flax", ("flax", "jax", "optax"), "pip install -e '.[flax]'"),
    "keras-jax": PortEntry("keras-jax", "ports.keras", ("keras", "jax"), "pip install -e '.[keras,flax]'",
                           env={"KERAS_BACKEND": "jax"}),
    "keras-torch": PortEntry("keras-torch", "ports.keras", ("keras", "torch"),
                             "pip install -e '.[keras,torch]'", env={"KERAS_BACKEND": "torch"}),
    "onnx": PortEntry("onnx", "ports.onnx", ("torch", "onnx", "onnxruntime"),
                      "pip install -e '.[torch,onnx]'",
                      refuses={"float32-only": "the extra ONNX backend exports the float32 torch port only"}),
    # MLX_ENABLE_TF32=0 before import: MLX's default 1 runs fp32 matmuls in TF32 on CUDA.
    "mlx": PortEntry("mlx", "ports.mlx", ("mlx",), "pip install -e '.[mlx]'",
                     env={"MLX_ENABLE_TF32": "0"},
                     refuses={"mixed": "MLX has no mixed precision (no autocast, no dtype policy, no "
                                       "per-layer compute dtype); pass --precision pure"}),
}
NATIVE = ("torch", "keras", "flax", "mlx")  # the four parallel texts


def missing_requirement(name: str) -> str | None:
    """None when the entry can run here, else a one-line reason."""
    if name not in PORTS:
        return unknown_framework(name)
    entry = PORTS[name]
    for module in entry.requires:
        if importlib.util.find_spec(module) is None:
            return f"framework {name!r} needs {module!r}, which is not installed ({entry.install_hint})"
    return None


def installed() -> dict[str, str | None]:
    """Every registered entry -> None if usable, else why not. Never imports a framework."""
    return {name: missing_requirement(name) for name in PORTS}


# The libraries portbench reads checkpoints and live models of, besides the ports' own frameworks.
REFERENCE_LIBRARIES = ("transformers", "timm", "keras_hub", "numpy")


def library_versions() -> dict[str, str | None]:
    """Every module a registered entry needs, and the reference libraries -> the installed
    distribution's version (None: not installed). Read from the installed metadata: nothing is
    imported, so `compare.py --version` costs no framework start."""
    from importlib import metadata

    needed = [module for entry in PORTS.values() for module in entry.requires]
    modules = dict.fromkeys([*needed, *REFERENCE_LIBRARIES])
    distributions = metadata.packages_distributions()
    out: dict[str, str | None] = {}
    for module in modules:
        names = distributions.get(module, [])
        out[module] = metadata.version(names[0]) if names else None
    return out


def unknown_framework(name: str) -> str:
    """The one line every command refuses a framework name it has never heard of with."""
    return f"unknown framework {name!r}; expected one of: {', '.join(PORTS)}"


NOTHING_INSTALLED = "no framework is installed; install one of the extras, e.g. pip install -e '.[torch]'"


def load_port_module(name: str) -> PortModule:
    """Import `ports.<fw>.port` in this process, or raise a one-line FrameworkUnavailable."""
    return cast("PortModule", load_port_part(name, "port"))


def load_port_part(name: str, part: str) -> ModuleType:
    """Import `ports.<fw>.<part>` (`port`, `defaults`, ...) in this process, or raise a one-line
    FrameworkUnavailable."""
    reason = missing_requirement(name)
    if reason:
        raise FrameworkUnavailable(reason)
    entry = PORTS[name]
    for key, value in entry.env.items():
        current = os.environ.setdefault(key, value)
        if current != value and "keras" in sys.modules:
            raise FrameworkUnavailable(
                f"framework {name!r} needs {key}={value}, but this process already runs {current}; "
                "run it in its own process (compare.py does)"
            )
        os.environ[key] = value
    try:
        return importlib.import_module(f"{entry.module}.{part}")
    except ImportError as exc:
        raise FrameworkUnavailable(f"framework {name!r} failed to import: {first_line(exc)}") from None


def resolve_device(name: str, module: PortModule, requested: str) -> str:
    """The device class a port will run on. An explicit device that this framework cannot use
    here is an error (never a silent CPU run); only `auto` falls back, to the framework's first
    available device, and the caller says what it chose."""
    available = list(module.available_devices())
    if requested == "auto":
        return available[0]
    if requested not in available:
        raise FrameworkUnavailable(f"framework {name!r} cannot use device {requested!r} on this machine "
                                   f"(available: {', '.join(available)}); pass --device auto or cpu")
    return requested


def rung_refusal(name: str, precision, device: str) -> str | None:
    """Why entry `name` cannot compute at `precision` on `device` (None: it can, or, for
    `device` "auto", it cannot be known before the framework says which device it chose). The
    one decision every command takes: `create_port` in a worker, and `time` and `verify` before
    starting any worker, so a rung that is not offered is the same refusal everywhere."""
    entry = PORTS[name]
    if precision.tf32 and device not in ("cuda", "auto"):
        return (f"{name}: TF32 is a CUDA tensor-core mode; on {device} float32 matmuls stay float32, so a "
                "TF32 run here would be float32 by another name")
    why = entry.refuses.get("mixed") if precision.mode == "mixed" else None
    if precision.rung != "float32":
        why = why or entry.refuses.get("float32-only")
    return f"{name}: rung {precision.rung} is not offered: {why}" if why else None


def resample_refusal(name: str, spec) -> str | None:
    """Why entry `name` cannot resample `spec`'s learned position table (None: it can, or the spec
    resamples nothing). Each native port's model.py states the operation of its own framework that
    computes each method (RESAMPLE_OPS) and why it has none for the rest (RESAMPLE_MISSING): a method
    is computed by that operation or refused, never by a substitute."""
    method = spec.pos_resample
    if method == "none":
        return None
    if PORTS[name].module not in {PORTS[native].module for native in NATIVE}:
        return (f"{name}: pos_resample={method!r} is not offered: this extra backend's export of a resampled "
                "position table is not verified against the reference")
    why = load_port_part(name, "model").RESAMPLE_MISSING.get(method)
    return f"{name}: pos_resample={method!r} is not offered: {why}" if why else None


def create_port(name: str, spec, device: str = "cpu", precision=None) -> PortInterface:
    """A port of `spec` on `device` at a precision rung (`shared.core.precision`; float32 when
    None). A rung the framework cannot run here raises a one-line FrameworkUnavailable."""
    from shared.core.precision import FLOAT32

    module = load_port_module(name)
    resolved = resolve_device(name, module, device)
    refusal = resample_refusal(name, spec) or rung_refusal(name, precision or FLOAT32, resolved)
    if refusal:
        raise FrameworkUnavailable(refusal)
    return module.Port(spec, device=resolved, precision=precision or FLOAT32)
