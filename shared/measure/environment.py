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

# Environment variables that change speed or numerics; recorded verbatim when set.
RECORDED_ENV = (
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TF_NUM_INTRAOP_THREADS",
    "TF_NUM_INTEROP_THREADS", "XLA_FLAGS", "TF_ENABLE_ONEDNN_OPTS", "KERAS_BACKEND",
    "TORCHINDUCTOR_CACHE_DIR", "JAX_COMPILATION_CACHE_DIR", "JAX_ENABLE_X64", "JAX_DEFAULT_MATMUL_PRECISION",
    "XLA_PYTHON_CLIENT_PREALLOCATE", "CUDA_VISIBLE_DEVICES",
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


def usable_cpus() -> list[int]:
    """CPUs this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


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
        "usable_cpus": usable_cpus(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        **git_state(),
        "time": utc_now(),
    }


def recorded_env() -> dict[str, str]:
    return {key: os.environ[key] for key in RECORDED_ENV if key in os.environ}
