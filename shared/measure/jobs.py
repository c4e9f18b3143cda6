"""The worker's job kind for one framework's timing run, `timing` (phases.py's `run`). The parent
imports this module to name the job (runner.py: `TIMING.job(...)`); the handler imports the timing
harness as it runs, in the worker, so naming the job loads none of it (the phases, the modes, the
training recipe, the devices' rows)."""

from __future__ import annotations

from typing import Any

from shared.runtime.job_kinds import JobKind, Output


def timing(framework: str, job: dict[str, Any], out: Output) -> None:
    """Build the port, gate it against the reference, then time its phases (phases.py)."""
    from shared.measure.phases import run

    run(framework, job, out)


TIMING = JobKind("timing", timing)
