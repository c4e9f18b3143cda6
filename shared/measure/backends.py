"""Per-backend facts the timing worker records: which backend a registry entry runs on, the
device's name, and memory. Framework-neutral: what only a framework can tell (an accelerator's
name, its allocator's peak) is asked of the port module (`device_name`, `allocator_peak` in
every ports/<fw>/port.py), which the worker has imported anyway."""

from __future__ import annotations

import os
import resource
import sys
from typing import Any

from shared.measure.environment import cpu_model
from shared.runtime.contract import PortModule

KERAS_BACKENDS = {"tensorflow": "tensorflow", "jax": "jax", "torch": "torch"}


def backend_of(framework: str, entry_env: dict[str, str]) -> str | None:
    """The numerical runtime under a registry entry: torch, tensorflow, jax, onnxruntime, mlx or None.
    Keras entries are resolved through their KERAS_BACKEND, so `keras-jax` reports JAX's memory."""
    if "KERAS_BACKEND" in entry_env or framework.startswith("keras"):
        return KERAS_BACKENDS.get(entry_env.get("KERAS_BACKEND", os.environ.get("KERAS_BACKEND", "")))
    if framework.startswith("torch"):
        return "torch"
    if framework.startswith("flax") or framework.startswith("jax"):
        return "jax"
    if framework.startswith("onnx"):
        return "onnxruntime"
    if framework.startswith("mlx"):
        return "mlx"
    return None


def versions(module: PortModule) -> dict[str, str]:
    """The library versions a timing row records (and a mode choice is cached by): NumPy's and
    the port module's own."""
    import numpy as np

    return {"numpy": np.__version__, **module.version_info()}


def device_name(module: PortModule, device_class: str) -> str:
    """The device's name: the CPU model from the OS, an accelerator's from the port module's
    `device_name` (Keras asks its active backend)."""
    if device_class == "cpu":
        return cpu_model()
    try:
        name = module.device_name(device_class)
    except Exception:  # a name is nice to have; never fail a run over it
        name = None
    return name or {"cuda": "CUDA GPU", "metal": "Apple GPU (Metal)"}.get(device_class, device_class)


def compile_note(backend: str | None, cache: str = "cold") -> str:
    inductor = ("torch.compile (inductor), cold cache: every graph compiled in this run"
                if cache == "cold" else
                "torch.compile (inductor), warm cache: compiled graphs reused from an earlier run")
    return {
        "torch": inductor,
        "tensorflow": "the port's tf.function: trace (+ XLA compile where it sets jit_compile)",
        "jax": ("jax.jit: trace + XLA compile; persistent compilation cache off" if cache == "cold" else
                "jax.jit: trace, XLA executable from the persistent compilation cache"),
    }.get(backend or "", "the port's compiled_forward(), first call")


def current_rss() -> int | None:
    try:
        import psutil

        return int(psutil.Process().memory_info().rss)
    except Exception:
        return None


def peak_rss() -> int:
    """Process high-water mark: ru_maxrss is KiB on Linux and bytes on macOS."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def memory(module: PortModule, backend: str | None, device_class: str) -> dict[str, Any]:
    """The process's peak RSS, and the peak the port module's `allocator_peak` reads from the
    framework's own allocator (or why there is none). Never estimated."""
    try:
        peak, source = module.allocator_peak(device_class)
    except Exception as exc:
        peak, source = None, f"allocator query failed on {backend or 'this backend'}: {type(exc).__name__}"
    return {"peak_rss_bytes": peak_rss(), "allocator_peak_bytes": peak, "allocator_source": source}
