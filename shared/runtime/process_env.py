"""The environment and the CPUs a framework process starts with (the one launcher,
shared/runtime/launch.py, hands them to every process it starts), set before it imports anything:
- the registry entry's environment (`ports.PORTS[name].env`, e.g. KERAS_BACKEND, fixed at import);
- `USE_TF` / `USE_FLAX` / `USE_TORCH` set to the entry's own runtimes: Transformers 4.x imports
  every installed framework otherwise, and torch's triton loaded after TensorFlow segfaults;
- with `threads`, every library's thread variable; with `pin`, a CPU affinity of that many CPUs,
  inherited from the launching thread at fork (affinity is the only cap JAX's CPU runtime obeys);
- PYTHONPATH = the repository root (portbench's packages are found through it, never through the
  working directory), after a caller's own PYTHONPATH entries (Transformers 4.x's side directory,
  `transformers4_env`), TF_CPP_MIN_LOG_LEVEL, PYTHONUNBUFFERED;
- `PORTBENCH_PARENT_PID`: the worker kills its own process group when this process is gone
  (shared/runtime/worker.py), so a SIGKILL of portbench leaves no worker running.
"""

from __future__ import annotations

import os
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from shared import REPO_ROOT
from shared.runtime.worker import PARENT_ENV

# Transformers 4.x beside 5: its TensorFlow and Flax classes exist in 4.x only, which is pure Python.
# `make` installs it, with the huggingface_hub and tokenizers it needs, into this side directory of the
# environment (`pip install --no-deps --target`, the versions pinned in constraints/ci.txt); only a
# process that needs those classes gets it, first on its PYTHONPATH (`transformers4_env`).
TRANSFORMERS4 = Path(sys.prefix) / "transformers4"
TRANSFORMERS4_NEEDED = ("transformers<5 (Transformers' TensorFlow and Flax classes are 4.x's): install it, "
                        f"or let `make` put 4.x beside 5 in {TRANSFORMERS4}")


# ---- threads and CPUs -----------------------------------------------------------------------
def thread_env(threads: int) -> dict[str, str]:
    """Every library's own thread variable, set to N. XLA's flags only mean something for one
    thread (there is no 'N threads' flag); they are set for completeness and recorded."""
    env = {
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
        "OPENBLAS_NUM_THREADS": str(threads),
        "TF_NUM_INTRAOP_THREADS": str(threads),
        "TF_NUM_INTEROP_THREADS": str(threads),
    }
    if threads == 1:
        existing = os.environ.get("XLA_FLAGS", "")
        single = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
        env["XLA_FLAGS"] = f"{existing} {single}".strip() if single not in existing else existing
    return env


def pin_cpus(threads: int) -> None:
    """Restrict the calling thread (and the processes it starts) to the first N usable CPUs."""
    if hasattr(os, "sched_setaffinity"):
        usable = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, usable[: max(1, threads)])


def cpu_record(threads: int) -> dict[str, Any]:
    """The affinity this process runs with, read back, and a note when it is not N CPUs."""
    if not hasattr(os, "sched_getaffinity"):
        return {"affinity": None, "affinity_note": "no CPU affinity API on this OS; not pinned"}
    affinity = sorted(os.sched_getaffinity(0))
    note = None
    if threads > len(affinity):
        note = f"{threads} threads requested but only {len(affinity)} CPUs usable: oversubscribed"
    return {"affinity": affinity, "affinity_note": note}


# ---- the environment --------------------------------------------------------------------------
def transformers4_env() -> dict[str, str] | None:
    """What a process that needs Transformers 4.x's classes adds to its environment: nothing where
    the installed Transformers is 4.x, the side directory first on PYTHONPATH where it is 5 and the
    side directory is there, None where neither (TRANSFORMERS4_NEEDED says what to do)."""
    try:
        major = int(metadata.version("transformers").split(".")[0])
    except metadata.PackageNotFoundError:
        major = 5  # none installed: only the side directory can give those classes
    if major < 5:
        return {}
    return {"PYTHONPATH": str(TRANSFORMERS4)} if (TRANSFORMERS4 / "transformers").is_dir() else None



def framework_env(framework: str | None, threads: int | None = None,
                  extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a process for registry entry `framework` starts with (None: no port)."""
    from ports import PORTS

    env = dict(os.environ)
    if threads is not None:
        env.update(thread_env(threads))
    if framework is not None:
        entry = PORTS[framework]
        env.update(entry.env)
        uses = set(entry.requires)
        env.update({"USE_TF": "1" if "tensorflow" in uses else "0",
                    "USE_FLAX": "1" if "jax" in uses else "0",
                    "USE_TORCH": "1" if "torch" in uses else "0"})
    extra = dict(extra or {})
    first = extra.pop("PYTHONPATH", None)  # a caller's directories come before the repository's
    env["PYTHONPATH"] = os.pathsep.join(p for p in (first, str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    env["PYTHONUNBUFFERED"] = "1"
    env[PARENT_ENV] = str(os.getpid())
    env.update(extra)
    return env
