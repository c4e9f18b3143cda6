"""`compare.py devices [--frameworks ...] [--json FILE]`: which device classes (cpu, cuda, metal)
each installed port can use on this machine, and for each one it cannot, why, in one line.

Each framework runs in its own fresh process (`probe_here`, started by `launch_probe`), which
really tries every device class: it builds the port on a tiny spec there and computes its logits.
A device counts as usable only when that works and the port's own `available_devices()` lists it
(Keras on TensorFlow, for one, would silently place a "gpu:0" model on the CPU).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from shared import REPO_ROOT
from shared.core.summary import format_table
from shared.core.weights import atomic_write_bytes

ORDER = 45
SCHEMA = "portbench.devices/1"
DEVICE_CLASSES = ("cpu", "cuda", "metal")
PROBE_SPEC = "quadrant"  # 8x8 images, 2 blocks: builds and runs in well under a second
# What provides a CUDA build, per numerical runtime (see shared.measure.backends.backend_of).
CUDA_PACKAGES = {"torch": "a CUDA wheel of torch", "tensorflow": "tensorflow[and-cuda]",
                 "jax": "jax[cuda12]", "mlx": "mlx[cuda]", "onnxruntime": "onnxruntime-gpu"}
NO_FLOAT64 = {("torch", "metal"): "MPS has no float64", ("mlx", "metal"): "Metal has no float64",
              ("jax", "metal"): "jax-metal has no float64"}


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("devices", help="which devices each installed port can use here, and why not")
    parser.add_argument("--frameworks", help="comma-separated (default: every installed port)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per framework")
    parser.add_argument("--json", help="write the table here")
    parser.set_defaults(run=run)


# ---- in the framework's own process ------------------------------------------------------------
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


def try_device(module: Any, device: str) -> str | None:
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
        return f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"[:200]
    return None


def probe_here(framework: str) -> list[dict[str, Any]]:
    """Every device class for `framework`, tried in this process."""
    from ports import PORTS, load_port_module
    from shared.errors import PortbenchError
    from shared.measure.backends import backend_of

    try:
        module = load_port_module(framework)
    except PortbenchError as exc:
        return [{"framework": framework, "device": d, "usable": False, "reason": str(exc)}
                for d in DEVICE_CLASSES]
    backend = backend_of(framework, PORTS[framework].env) or framework  # mlx: its own runtime
    listed = list(module.available_devices())
    rows = []
    for device in DEVICE_CLASSES:
        error = try_device(module, device)
        usable = error is None and device in listed
        row = {"framework": framework, "device": device, "usable": usable, "backend": backend,
               "reason": None if usable else why_not(backend, device), "detail": error}
        if usable and (backend, device) in NO_FLOAT64:
            row["note"] = NO_FLOAT64[(backend, device)]
        if error is None and device not in listed:
            row["detail"] = "ran, but the port does not list this device (it may have run on the CPU)"
        rows.append(row)
    return rows


# ---- in compare.py's process: launch and print only --------------------------------------------
def launch_probe(framework: str, timeout: float) -> list[dict[str, Any]]:
    """One fresh process for `framework` with its registry environment (the launcher to move
    into shared.runtime with the others)."""
    from ports import PORTS

    with tempfile.TemporaryDirectory(prefix="portbench-devices-") as tmp:
        out = Path(tmp) / "devices.json"
        env = {**os.environ, **PORTS[framework].env, "TF_CPP_MIN_LOG_LEVEL": "3"}
        try:
            proc = subprocess.run([sys.executable, "-m", "shared.cli.devices", framework, str(out)],
                                  cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                                  timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            proc = None
        if proc is not None and proc.returncode == 0 and out.exists():
            return json.loads(out.read_text())
    why = f"timed out after {timeout:.0f} s" if proc is None else (
        f"probe exited with status {proc.returncode}: "
        + (proc.stderr.strip().splitlines() or ["no output"])[-1])
    return [{"framework": framework, "device": d, "usable": False, "reason": why} for d in DEVICE_CLASSES]


def run(args: argparse.Namespace) -> int:
    from ports import installed, parse_frameworks

    available = installed()
    default = tuple(name for name, why in available.items() if why is None)
    rows: list[dict[str, Any]] = []
    for framework in [f for f in parse_frameworks(args.frameworks, default) if f != "reference"]:
        if available[framework]:
            rows += [{"framework": framework, "device": d, "usable": False, "reason": available[framework]}
                     for d in DEVICE_CLASSES]
            continue
        print(f"  probing {framework} ...", file=sys.stderr, flush=True)
        rows += launch_probe(framework, args.timeout)
    print(f"devices on this machine ({platform.system()} {platform.machine()}):")
    table = [[r["framework"], r["device"], "yes" if r["usable"] else "no",
              r.get("note") or "" if r["usable"] else f"{r['framework']}: {r['reason']}"] for r in rows]
    print(format_table(["framework", "device", "usable", "why not / note"], table))
    if args.json:
        document = {"schema": SCHEMA, "platform": platform.platform(), "entries": rows}
        atomic_write_bytes(args.json, (json.dumps(document, indent=2) + "\n").encode())
    return 0


if __name__ == "__main__":  # the probe process: python -m shared.cli.devices FRAMEWORK OUT.json
    Path(sys.argv[2]).write_text(json.dumps(probe_here(sys.argv[1])))
