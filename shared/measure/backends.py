"""Per-backend facts the worker records: which backend a registry entry runs on, the device's
name, and memory. Frameworks are imported inside functions only (this is `shared/`), and only
in the worker process, after its framework has been imported anyway."""

from __future__ import annotations

import os
import resource
import sys
from typing import Any

from shared.measure.environment import cpu_model

KERAS_BACKENDS = {"tensorflow": "tensorflow", "jax": "jax", "torch": "torch"}


def backend_of(framework: str, entry_env: dict[str, str]) -> str | None:
    """The numerical runtime under a registry entry: torch, tensorflow, jax, onnxruntime or None.
    Keras entries are resolved through their KERAS_BACKEND, so `keras-jax` reports JAX's memory."""
    if "KERAS_BACKEND" in entry_env or framework.startswith("keras"):
        return KERAS_BACKENDS.get(entry_env.get("KERAS_BACKEND", os.environ.get("KERAS_BACKEND", "")))
    if framework.startswith("torch"):
        return "torch"
    if framework.startswith("flax") or framework.startswith("jax"):
        return "jax"
    if framework.startswith("onnx"):
        return "onnxruntime"
    return None


def device_name(backend: str | None, device_class: str) -> str:
    if device_class == "cpu":
        return cpu_model()
    try:
        if backend == "torch" and device_class == "cuda":
            import torch

            return torch.cuda.get_device_name(0)
        if backend == "jax":
            import jax

            return str(jax.devices()[0].device_kind)
        if backend == "tensorflow":
            import tensorflow as tf

            gpus = tf.config.list_physical_devices("GPU")
            if gpus:
                details = tf.config.experimental.get_device_details(gpus[0])
                return str(details.get("device_name", gpus[0].name))
    except Exception:  # a name is nice to have; never fail a run over it
        pass
    return {"cuda": "CUDA GPU", "metal": "Apple GPU (Metal)"}.get(device_class, device_class)


def compile_note(backend: str | None) -> str:
    return {
        "torch": "torch.compile (inductor), cold cache: a fresh TORCHINDUCTOR_CACHE_DIR per run",
        "tensorflow": "the port's tf.function: trace (+ XLA compile where it sets jit_compile)",
        "jax": "jax.jit: trace + XLA compile; persistent compilation cache off",
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


def allocator_peak(backend: str | None, device_class: str) -> tuple[int | None, str]:
    """(bytes, source) from the framework's own allocator, or (None, why not). Never estimated."""
    try:
        if backend == "torch":
            import torch

            if device_class == "cuda":
                return int(torch.cuda.max_memory_allocated()), "torch.cuda.max_memory_allocated"
            if device_class == "metal":
                return (int(torch.mps.driver_allocated_memory()),
                        "torch.mps.driver_allocated_memory at the end (MPS has no peak counter)")
            return None, "torch keeps no allocator statistics on CPU"
        if backend == "tensorflow":
            import tensorflow as tf

            name = "GPU:0" if device_class == "cuda" else "CPU:0"
            info = tf.config.experimental.get_memory_info(name)
            return int(info["peak"]), f"tf.config.experimental.get_memory_info({name!r})['peak']"
        if backend == "jax":
            import jax

            stats = jax.devices()[0].memory_stats()
            if stats and "peak_bytes_in_use" in stats:
                return int(stats["peak_bytes_in_use"]), "jax Device.memory_stats()['peak_bytes_in_use']"
            return None, "jax Device.memory_stats() gives no peak on this device"
    except Exception as exc:
        return None, f"allocator query failed: {type(exc).__name__}"
    return None, "no allocator statistics for this backend"


def memory(backend: str | None, device_class: str) -> dict[str, Any]:
    peak, source = allocator_peak(backend, device_class)
    return {"peak_rss_bytes": peak_rss(), "allocator_peak_bytes": peak, "allocator_source": source}
