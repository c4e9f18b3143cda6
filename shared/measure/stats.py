"""Repeated timing and robust summaries: warm-up first, then repeats until a time budget is
spent or a count is reached; report median, IQR and n, never a single run."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from shared.errors import SpecError

MIN_MEDIAN_CALLS = 3  # a median of fewer timed calls cannot set an outlier aside


@dataclass(frozen=True)
class Budget:
    """How long to measure one phase. `min_repeats` always run (a user's at least
    MIN_MEDIAN_CALLS, `check_repeats`); after that, stop when `seconds` have passed or `max_repeats`
    is reached."""

    warmup: int = 2  # torch.compile(reduce-overhead) and lazy initialisers need two calls
    min_repeats: int = 5
    max_repeats: int = 50
    seconds: float = 2.0


def check_repeats(option: str, value: int) -> None:
    """A one-line SpecError when a command is asked for fewer timed calls than a median needs."""
    if value < MIN_MEDIAN_CALLS:
        raise SpecError(f"{option} {value}: at least {MIN_MEDIAN_CALLS} (a median of fewer timed calls "
                        "cannot set an outlier aside)")


def summarise(samples: list[float]) -> dict[str, Any]:
    """Median, quartiles, IQR, min, mean and n of per-call times in seconds."""
    if not samples:
        raise ValueError("no samples to summarise")
    arr = np.asarray(samples, dtype=np.float64)
    q1, median, q3 = np.percentile(arr, [25, 50, 75])
    return {
        "n": int(arr.size),
        "median": float(median),
        "q1": float(q1),
        "q3": float(q3),
        "iqr": float(q3 - q1),
        "min": float(arr.min()),
        "mean": float(arr.mean()),
    }


def time_once(call: Callable[[], Any]) -> tuple[float, Any]:
    """Wall time of one synchronised call: `call` must block until its work is done."""
    start = time.perf_counter()
    result = call()
    return time.perf_counter() - start, result


def synced(port: Any, call: Callable[[], Any]) -> Callable[[], Any]:
    """`call`, then the port's own wait for its result (`port.sync`): a call that may be timed."""

    def run() -> Any:
        result = call()
        port.sync(result)
        return result

    return run


def repeat(call: Callable[[], Any], budget: Budget) -> list[float]:
    """Warm-up calls (not recorded), then timed calls until the budget says stop."""
    for _ in range(budget.warmup):
        call()
    samples: list[float] = []
    started = time.perf_counter()
    while len(samples) < budget.max_repeats:
        elapsed, _ = time_once(call)
        samples.append(elapsed)
        if len(samples) >= budget.min_repeats and time.perf_counter() - started >= budget.seconds:
            break
    return samples
