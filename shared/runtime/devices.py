"""The worker's `devices` job kind: which device classes (cpu, cuda, metal) one port can use on
this machine, and for each one it cannot, why, in one line. Run in the framework's own process
(the one launcher, `shared.runtime.launch.run_worker`); `compare.py devices` prints the rows and
every timing row records them (`device_rows`, without building a port).

A device counts as usable only when the port builds and computes logits there (`probe`) and the
port's own `available_devices()` lists it (Keras on TensorFlow, for one, would silently place a
"gpu:0" model on the CPU). Ports are reached only through the registry (`ports`).
"""

from __future__ import annotations

import importlib.util
import platform
from pathlib import Path
from typing import Any

import ports
from shared.errors import PortbenchError, first_line
from shared.runtime.contract import PortModule
from shared.runtime.job_kinds import JobKind, Output

DEVICE_CLASSES = ("cpu", "cuda", "metal")
PROBE_SPEC = "quadrant"  # 8x8 images, 2 blocks: builds and runs in well under a second
# What provides a CUDA build, per numerical runtime (shared.measure.backends.backend_of's names).
CUDA_PACKAGES = {"torch": "a CUDA wheel of torch", "tensorflow": "tensorflow[and-cuda]",
                 "jax": "jax[cuda12]", "mlx": "mlx[cuda]", "onnxruntime": "onnxruntime-gpu"}
NO_FLOAT64 = {("torch", "metal"): "MPS has no float64", ("mlx", "metal"): "Metal has no float64",
              ("mlx", "cuda"): "MLX's GPU has no float64", ("jax", "metal"): "jax-metal has no float64"}


def why_not(backend: str | None, device: str) -> str:
    """One line: why `backend` cannot use `device` here (the framework is already imported)."""
    system = platform.system()
    if device == "metal":
        if system != "Darwin":
            return {"torch": f"MPS is not available on {system}",
                    "tensorflow": "tensorflow-metal not installed (it exists only for macOS)",
                    "jax": "no JAX plugin for Metal on this machine; JAX runs on the CPU",
                    "mlx": f"Metal is not available on {system}; this MLX build runs on the CPU",
                    }.get(backend or "", f"Metal exists only on macOS; this is {system}")
        if backend == "tensorflow" and importlib.util.find_spec("tensorflow_metal") is None:
            return "tensorflow-metal not installed"
        if backend == "jax" and importlib.util.find_spec("jax_plugins") is None:
            return "no JAX plugin for Metal (jax-metal) installed; JAX runs on the CPU"
        return "no Metal device visible to this framework"
    if device == "cuda":
        if not Path("/proc/driver/nvidia/version").exists():
            return "no NVIDIA driver on this machine (no CUDA device)"
        needs = CUDA_PACKAGES.get(backend or "", "a CUDA build")
        return f"no CUDA device visible to this build (needs {needs})"
    return "the CPU could not run the port"


def try_device(module: PortModule, device: str) -> str | None:
    """None when the port builds and computes logits on `device`, else the error in one line."""
    from shared.core.inputs import probe_batch
    from shared.core.presets import get_preset
    from shared.core.weights import init_weights

    spec = get_preset(PROBE_SPEC)
    try:
        port = module.Port(spec, device=device)
        port.load(init_weights(spec, 0))
        port.logits(probe_batch(spec, 1))
    except Exception as exc:  # any failure means "not usable"; its first line is kept as detail
        return first_line(exc, typed=True)[:200]
    return None


def device_rows(framework: str, module: PortModule, backend: str | None, tried: bool) -> list[dict[str, Any]]:
    """One row per device class; `tried`: build and run the port on each (else only the port's
    own list, as the timing job records it without disturbing its memory figures)."""
    listed = list(module.available_devices())
    rows = []
    for device in DEVICE_CLASSES:
        error = try_device(module, device) if tried else None
        usable = error is None and device in listed
        row = {"framework": framework, "device": device, "usable": usable, "backend": backend,
               "reason": None if usable else why_not(backend, device), "detail": error, "tried": tried}
        if usable and (backend, device) in NO_FLOAT64:
            row["note"] = NO_FLOAT64[(backend, device)]
        if tried and error is None and device not in listed:
            row["detail"] = "ran, but the port does not list this device (it may have run on the CPU)"
        rows.append(row)
    return rows


def probe(framework: str, job: dict[str, Any], out: Output) -> None:
    """{"backend"} -> report["rows"]: every device class tried in this process."""
    backend = job.get("backend") or framework
    try:
        module = ports.load_port_module(framework)
    except PortbenchError as exc:
        out.report["rows"] = [{"framework": framework, "device": d, "usable": False, "backend": backend,
                               "reason": str(exc)} for d in DEVICE_CLASSES]
        return
    out.report["rows"] = device_rows(framework, module, backend, tried=True)


DEVICES = JobKind("devices", probe)
