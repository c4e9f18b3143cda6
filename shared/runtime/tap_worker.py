"""Collect one port's named intermediates in this (fresh) process:
`python -m shared.runtime.tap_worker JOB.json` (used by `compare.py trace`; see shared/teaching/tracing.py).

Writes the taps as an .npz (read back with allow_pickle=False) and a JSON report beside the job;
a failure is one line in the report, never a traceback."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np


def run(job: dict) -> dict:
    from ports import load_port_module
    from shared.core.spec import ModelSpec
    from shared.core.weights import load_weights
    from shared.errors import PortbenchError

    try:
        module = load_port_module(job["framework"])
        spec = ModelSpec.from_json(job["spec"])
        port = module.Port(spec)
        port.load(load_weights(job["weights"], spec).tensors)
        taps = port.intermediates(np.load(job["input"], allow_pickle=False))
        with open(job["output"], "wb") as handle:
            np.savez(handle, **{name: np.asarray(t) for name, t in taps.items()})
        return {"error": None}
    except PortbenchError as exc:
        return {"error": str(exc)}
    except Exception as exc:  # a port bug: one line
        first = str(exc).splitlines()[0] if str(exc) else ""
        return {"error": f"{type(exc).__name__}: {first}"}


def main(argv: list[str]) -> int:
    job_file = Path(argv[0])
    report = run(json.loads(job_file.read_text()))
    job_file.with_suffix(".report.json").write_text(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
