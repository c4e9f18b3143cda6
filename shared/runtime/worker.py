"""Run one port on a list of jobs in this (fresh) process: `python -m shared.runtime.worker JOBS.json`.

`compare.py verify` starts one worker per framework, with the registry entry's environment
(e.g. KERAS_BACKEND) set before the framework is imported, so Keras can run on three backends and
no two frameworks share thread pools. Each job names a spec, a canonical weight file, an input
`.npy` and where to write the logits; the worker writes a JSON report beside them. A failure in
one job is reported in that job's entry; the worker never needs a traceback to explain itself.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np


def run_jobs(framework: str, jobs: list[dict], device: str) -> list[dict]:
    from ports import load_port_module
    from shared.core.spec import ModelSpec
    from shared.core.weights import load_weights
    from shared.errors import PortbenchError

    started = time.perf_counter()
    try:
        module = load_port_module(framework)
    except PortbenchError as exc:
        return [{"error": str(exc)} for _ in jobs]
    import_s = time.perf_counter() - started
    reports = []
    for job in jobs:
        try:
            spec = ModelSpec.from_json(job["spec"])
            tensors = load_weights(job["weights"], spec).tensors
            images = np.load(job["input"], allow_pickle=False)
            port = module.Port(spec, device=device)
            port.load(tensors)
            logits = port.logits(images)
            np.save(job["output"], logits)
            reports.append({
                "param_count": port.param_count(), "device": port.device_class,
                "versions": module.version_info(), "import_s": import_s,
            })
        except PortbenchError as exc:
            reports.append({"error": str(exc)})
        except Exception as exc:  # a port bug: report it in one line, keep the other jobs going
            reports.append({"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"})
    return reports


def main(argv: list[str]) -> int:
    job_file = Path(argv[0])
    request = json.loads(job_file.read_text())
    reports = run_jobs(request["framework"], request["jobs"], request.get("device", "cpu"))
    job_file.with_suffix(".report.json").write_text(json.dumps(reports))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
