"""The precision ladder's worker runs (tests/test_ports_precision.py), started in the background
as soon as pytest has collected those tests, one framework at a time at low CPU priority.

Why: every preset in every port at every low rung is about 330 s of CPU, mostly Flax's per-op
compilations and MLX's reference BLAS, while the rest of the suite keeps about one of CI's two
cores busy. Run in the background, the ladder uses the idle core; `conftest.py` also moves the
ladder's tests to the end of the session, so they find the results ready. Nothing in the suite
asserts a time, so sharing the machine changes no result.
"""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path
from typing import Any

from ports_cache import case

import ports
from shared.core.inputs import probe_batch
from shared.core.precision import LOW_RUNGS, Precision
from shared.core.presets import PRESETS
from shared.core.reference import forward
from shared.core.weights import init_weights
from shared.runtime.verify import Case, collect_logits, fill_reference, start_logits
from shared.teaching.precision_demos import stream_spec

MODULE = "test_ports_precision.py"
PRESET_KEYS = [*sorted(PRESETS), "no-positions"]
NICE = 10  # below the in-process tests: the ladder takes what they leave idle
TIMEOUT_S = 900.0


def ladder_cases() -> list[tuple[str, Case]]:
    """(preset key, case) for every preset, plus quadrant without positions, at every low rung."""
    cases = []
    for preset in PRESET_KEYS:
        if preset == "no-positions":
            # No float32 position table enters the stream, so torch autocast and Flax would leave it
            # in bfloat16 by promotion alone: the ports' cast of the patch embedding keeps the contract.
            spec = stream_spec("quadrant")
            tensors, images = init_weights(spec, 0), probe_batch(spec, 1)
            ref = forward(spec, tensors, images)
        else:
            spec, tensors, images, ref = case(preset)
        # ViT-S/B share every code path with the smaller presets: their tensors' dtypes are read
        # there (an eager forward with taps of ViT-B costs seconds in each port).
        small = spec.derived.params < 10_000_000
        cases += [(preset, Case(spec, tensors, images, precision=Precision.from_rung(r), reference=ref,
                                read_dtypes=small)) for r in LOW_RUNGS]
    return cases


class Ladder:
    """The background run: `result()` waits for it and returns (cases, framework -> reports)."""

    def __init__(self) -> None:
        self.cases = ladder_cases()
        self.reports: dict[str, list[dict[str, Any]]] = {}
        self.error: BaseException | None = None
        self.current: Any = None  # the worker running now, so `stop` can kill it
        self.stopped = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        workdir = Path(tempfile.mkdtemp(prefix="portbench-ladder-"))
        try:
            for framework in ports.NATIVE:
                if self.stopped:
                    return
                # One thread, unpinned: the worker shares the cores with the in-process tests.
                self.current = start_logits(framework, [c for _, c in self.cases], workdir, "cpu",
                                            threads=1, pin=False)
                os.setpriority(os.PRIO_PROCESS, self.current.process.popen.pid, NICE)
                # Each case's emulated rounding gap (the bound's scale), while the first worker runs.
                fill_reference([c for _, c in self.cases])
                self.reports[framework] = collect_logits(self.current, TIMEOUT_S)
        except BaseException as exc:  # reported by result(), in the test that needs it
            self.error = exc

    def result(self) -> tuple[list[tuple[str, Case]], dict[str, list[dict[str, Any]]]]:
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self.cases, self.reports

    def stop(self) -> None:
        """At the end of the session (an -x stop, Ctrl-C): no orphaned worker."""
        self.stopped = True
        if self.thread.is_alive() and self.current is not None:
            self.current.process.kill()


_STARTED: list[Ladder] = []


def start() -> None:
    """Called by conftest.py when the ladder's tests are collected."""
    if not _STARTED:
        _STARTED.append(Ladder())


def stop() -> None:
    for ladder in _STARTED:
        ladder.stop()


def result() -> tuple[list[tuple[str, Case]], dict[str, list[dict[str, Any]]]]:
    """The ladder's (cases, framework -> reports), waiting for the background run."""
    start()  # a session that collected the tests some other way still gets them
    return _STARTED[0].result()
