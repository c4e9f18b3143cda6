"""What a results file records about the machine and the run (framework-neutral: framework
versions and device names are added by each worker, which is the only place they are imported)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from shared import REPO_ROOT
from shared.measure.contention import pinned_cpus

# Environment variables that change speed or numerics; recorded verbatim when set.
RECORDED_ENV = (
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TF_NUM_INTRAOP_THREADS",
    "TF_NUM_INTEROP_THREADS", "XLA_FLAGS", "TF_ENABLE_ONEDNN_OPTS", "KERAS_BACKEND",
    "TORCHINDUCTOR_CACHE_DIR", "TORCHINDUCTOR_COMPILE_THREADS", "JAX_COMPILATION_CACHE_DIR", "JAX_ENABLE_X64",
    "JAX_DEFAULT_MATMUL_PRECISION", "XLA_PYTHON_CLIENT_PREALLOCATE", "CUDA_VISIBLE_DEVICES",
)


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def cpu_model() -> str:
    """The CPU's marketing name (Linux /proc/cpuinfo, macOS sysctl), else platform's guess."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    if sys.platform == "darwin":
        try:
            out = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True,
                                 text=True, timeout=5)
            if out.returncode == 0 and out.stdout.strip():
                return out.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return platform.processor() or platform.machine() or "unknown"


# CPU features that run bfloat16 / float16 arithmetic natively (Linux /proc/cpuinfo flags; on
# arm64 Macs, sysctl's FEAT_BF16 / FEAT_FP16). Without them a framework converts to float32 and
# back around every op, so a low-precision row on such a CPU is slower, not faster, than float32.
LOW_PRECISION_FLAGS = {
    "bfloat16": ("amx_bf16", "avx512_bf16", "bf16"),  # bf16: arm64 Linux
    "float16": ("amx_fp16", "avx512_fp16", "fphp"),  # f16c only converts, it does not compute
}
MAC_FEATURES = {"bfloat16": "hw.optional.arm.FEAT_BF16", "float16": "hw.optional.arm.FEAT_FP16"}


def low_precision_support() -> dict[str, Any]:
    """{"flags": [...], "bfloat16": flag or None, "float16": flag or None}: which of the CPU's
    features compute in each low dtype, or None where the CPU emulates it."""
    flags: set[str] = set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                flags |= set(line.split(":", 1)[1].split())
    except OSError:
        pass
    if sys.platform == "darwin":
        for name in MAC_FEATURES.values():
            out = subprocess.run(["sysctl", "-n", name], capture_output=True, text=True, timeout=5)
            if out.stdout.strip() == "1":
                flags.add(name)
    known = {*MAC_FEATURES.values(), *(f for names in LOW_PRECISION_FLAGS.values() for f in names)}
    record: dict[str, Any] = {"flags": sorted(flags & known)}
    for dtype, names in LOW_PRECISION_FLAGS.items():
        found = [f for f in (*names, MAC_FEATURES[dtype]) if f in flags]
        record[dtype] = found[0] if found else None
    return record


def emulation_note(dtype: str) -> str | None:
    """A row's note when the CPU has no native arithmetic for `dtype` (None when it has)."""
    if dtype == "float32" or low_precision_support().get(dtype):
        return None
    names = "/".join(LOW_PRECISION_FLAGS[dtype][:2])
    return (f"this CPU has no native {dtype} arithmetic (no {names}): frameworks convert to float32 "
            "and back around each op, so this rung is expected to be slower than float32 here")


def usable_cpus() -> list[int]:
    """CPUs this process may run on (its affinity mask where the OS has one)."""
    return pinned_cpus() or list(range(os.cpu_count() or 1))


def git_state() -> dict[str, Any]:
    """Revision and dirty flag of the checkout, or None values outside a git checkout."""
    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True,
                                 timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    revision = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no") if revision else None
    return {"git_revision": revision, "git_dirty": None if status is None else bool(status)}


def host_record() -> dict[str, Any]:
    """The part of the environment every worker shares: machine, OS, Python, NumPy, git."""
    return {
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "numpy": np.__version__,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "hostname": platform.node(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpu_low_precision": low_precision_support(),
        "usable_cpus": usable_cpus(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        **git_state(),
        "time": utc_now(),
    }


def recorded_env() -> dict[str, str]:
    return {key: os.environ[key] for key in RECORDED_ENV if key in os.environ}
