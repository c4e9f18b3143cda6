"""The worker's port-running job kinds (registered in `shared.runtime.worker.KINDS`): a port, a
canonical weight file and an input batch in; its logits (`compare.py verify`) or its named
intermediates (`compare.py trace`, experiments) out. Run in the worker process only."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

import ports
from shared.core.equivalence import first_nonfinite
from shared.core.spec import ModelSpec
from shared.core.weights import load_weights
from shared.runtime.worker import Output


def _loaded_port(framework: str, job: dict[str, Any]) -> Any:
    """The port for `job`: its spec (the weight file's when the job gives none), weights loaded."""
    spec = ModelSpec.from_json(job["spec"]) if job.get("spec") else None
    loaded = load_weights(job["weights"], spec)
    port = ports.create_port(framework, loaded.spec, device=job.get("device", "cpu"))
    port.load(loaded.tensors)
    return port


def logits(framework: str, job: dict[str, Any], out: Output) -> None:
    """{"spec", "weights", "input": .npy, "device"} -> arrays["logits"]; the report gives the
    port's own parameter count, device, versions and the framework's import time."""
    started = time.perf_counter()
    module = ports.load_port_module(framework)  # the first job of a process pays the import
    out.report["import_s"] = time.perf_counter() - started
    port = _loaded_port(framework, job)
    images = np.load(job["input"], allow_pickle=False)
    out.arrays["logits"] = np.asarray(port.logits(images))
    if not np.all(np.isfinite(out.arrays["logits"])):  # name where it went wrong, not only that it did
        out.report["first_nonfinite"] = first_nonfinite(port.intermediates(images))
    out.report.update({"param_count": int(port.param_count()), "device": port.device_class,
                       "versions": module.version_info()})


def taps(framework: str, job: dict[str, Any], out: Output) -> None:
    """{"weights", "input": .npy, optional "spec"} -> arrays: every named intermediate, eval mode."""
    port = _loaded_port(framework, job)
    images = np.load(job["input"], allow_pickle=False)
    out.arrays.update({name: np.asarray(t) for name, t in port.intermediates(images).items()})
