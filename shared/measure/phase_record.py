"""How a timing worker records its phases into the results row: one cold measurement, repeats
under a budget (with the CPU other processes used on this worker's CPUs meanwhile, and a note
when that was contention), or n/a with the reason."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from shared.measure.contention import ForeignCpu, is_contended
from shared.measure.stats import Budget, repeat, summarise
from shared.runtime.launch import print_progress


class Phases:
    """Records phases into `row["phases"]`: single-shot, repeated under a budget, or n/a."""

    def __init__(self, framework: str, row: dict[str, Any], budget: Budget) -> None:
        self.framework, self.row, self.budget = framework, row, budget
        self.phases: dict[str, Any] = row["phases"]

    def progress(self, message: str) -> None:
        print_progress(self.framework, message)

    def single(self, name: str, seconds: float, note: str | None = None) -> None:
        self.phases[name] = {"status": "ok", "samples": [seconds], **summarise([seconds]), "note": note}

    def repeated(self, name: str, call: Callable[[], Any], budget: Budget | None = None,
                 note: str | None = None) -> None:
        self.progress(f"timing {name}")
        cpu0, wall0 = time.process_time(), time.perf_counter()
        with ForeignCpu(self.row["threads_applied"]["affinity"]) as foreign:
            samples = repeat(call, budget or self.budget)
        wall = time.perf_counter() - wall0
        util = (time.process_time() - cpu0) / wall if wall > 0 else None
        self.phases[name] = {"status": "ok", "samples": samples, **summarise(samples),
                             "cpu_util": util, "foreign_cpu": foreign.value, "note": note}
        if is_contended(foreign.value):
            self.row["notes"].append(f"{name}: other processes used {foreign.value:.2f} CPUs on this "
                                     "worker's CPUs while it was timed (contended)")

    def unavailable(self, name: str, reason: str) -> None:
        self.phases[name] = {"status": "n/a", "reason": reason}
