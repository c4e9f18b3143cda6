"""How much CPU other processes used on this process's CPUs while it was being timed.

On a shared machine a co-tenant on one of two cores was measured to halve throughput and make a
framework look 3x slower. `cpu_util` alone cannot tell that apart from a slow framework,
so each repeated phase also records `foreign_cpu`: busy CPU-seconds on the pinned CPUs
(/proc/stat) minus this process's own, per wall second. Linux only; None elsewhere. The same
probe covers a worker's whole timed span and its GEMM-rate measurement, which is what
shared/measure/rounds.py judges a worker (and a roofline's ceiling) by."""

from __future__ import annotations

import os
import time
from pathlib import Path

CONTENDED = 0.15  # cores' worth of foreign work above which a phase is flagged
# /proc/stat counts whole clock ticks (10 ms): over a shorter window than this a single tick of
# rounding would pass for 5% of a core, and a 13-microsecond phase was once "contended by 9 CPUs".
MIN_WALL_S = 0.2


def _busy_seconds(cpus: list[int]) -> float | None:
    try:
        lines = Path("/proc/stat").read_text().splitlines()
    except OSError:
        return None
    wanted = {f"cpu{c}" for c in cpus}
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    busy = 0
    for line in lines:
        parts = line.split()
        if parts and parts[0] in wanted:
            values = [int(v) for v in parts[1:]]
            idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
            busy += sum(values[:8]) - idle  # guest time is already inside user
    return busy / tick


class ForeignCpu:
    """Context: `with ForeignCpu(cpus) as probe: ...`, then `probe.value` (cores, or None)."""

    def __init__(self, cpus: list[int] | None) -> None:
        self.cpus = cpus or []
        self.value: float | None = None

    def __enter__(self) -> ForeignCpu:
        self._busy = _busy_seconds(self.cpus) if self.cpus else None
        self._own = time.process_time()
        self._wall = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._busy is None:
            return
        busy = _busy_seconds(self.cpus)
        wall = time.perf_counter() - self._wall
        if busy is None or wall < MIN_WALL_S:  # too short a window to tell: not measured (None)
            return
        own = time.process_time() - self._own
        # at most every pinned CPU busy: tick rounding cannot claim more
        self.value = min(float(len(self.cpus)), max(0.0, (busy - self._busy - own) / wall))


def pinned_cpus() -> list[int]:
    """The CPUs this process may run on (a worker is pinned before import): what ForeignCpu
    watches. Empty where the OS has no affinity API (ForeignCpu then measures nothing)."""
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


def is_contended(foreign: float | None) -> bool:
    """Whether a measured span had more than CONTENDED cores of other processes' work on its
    CPUs (None, not measured, is not a claim of contention)."""
    return foreign is not None and foreign > CONTENDED
