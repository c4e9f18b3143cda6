"""The worker's port-running job kinds (`LOGITS`, `TAPS`: shared/runtime/job_kinds.py): a port, a
canonical weight file and an input batch in; its logits (`compare.py verify`) or its named
intermediates (`compare.py trace`, experiments) out. Run in the worker process only."""

from __future__ import annotations

from typing import Any

import numpy as np

import ports
from shared.core.equivalence import first_nonfinite
from shared.core.precision import Precision
from shared.core.spec import ModelSpec
from shared.core.weights import load_weights
from shared.errors import FrameworkUnavailable, first_line
from shared.runtime.contract import PortInterface
from shared.runtime.job_kinds import JobKind, Output
from shared.runtime.worker import print_phase

# How frameworks say a dtype has no kernel on this device: torch "... not implemented for
# 'Half'", TensorFlow "No registered ... kernel", XLA "UNIMPLEMENTED", MLX "not supported".
NO_KERNEL = ("not implemented for", "no registered", "unimplemented", "not supported")


def _loaded_port(framework: str, job: dict[str, Any]) -> PortInterface:
    """The port for `job`: its spec (the weight file's when the job gives none), weights loaded,
    at the job's precision rung. The launcher is told the phase (a timeout names it)."""
    print_phase("port-import")
    ports.load_port_module(framework)  # the framework's import, its own phase
    print_phase("port-build")
    spec = ModelSpec.from_json(job["spec"]) if job.get("spec") else None
    loaded = load_weights(job["weights"], spec)
    precision = Precision.from_dict(job.get("precision") or {})  # none named: float32
    port = ports.create_port(framework, loaded.spec, device=job.get("device", "cpu"), precision=precision)
    port.load(loaded.tensors)
    return port


def low_precision_logits(port: PortInterface, images: np.ndarray) -> np.ndarray:
    """port.logits, where a framework without a kernel for the rung's dtype on this device is
    `unavailable` with its own words, not a crash."""
    try:
        return np.asarray(port.logits(images))
    except Exception as exc:
        text = first_line(exc)
        if port.precision.low and any(word in text.lower() for word in NO_KERNEL):
            raise FrameworkUnavailable(f"{port.framework}: no {port.precision.dtype} kernel on "
                                       f"{port.device_class} here: {text[:200]}") from None
        raise


def logits(framework: str, job: dict[str, Any], out: Output) -> None:
    """{"spec", "weights", "input": .npy, "device", "precision", "dtypes"} -> arrays["logits"] (and
    each of the spec's extra outputs, by name); the
    report gives the port's own parameter count, device, versions and, below float32 (unless
    "dtypes" is false), the dtype of every named tensor."""
    port = _loaded_port(framework, job)
    images = np.load(job["input"], allow_pickle=False)
    print_phase("port-forward")
    out.arrays["logits"] = low_precision_logits(port, images)
    if port.spec.derived.extra_outputs:  # Qwen3-VL's deepstack outputs: computed with the taps
        taps = port.intermediates(images)
        out.arrays.update({name: np.asarray(taps[name]) for name in port.spec.derived.extra_outputs})
    if not np.all(np.isfinite(out.arrays["logits"])):  # name where it went wrong, not only that it did
        out.report["first_nonfinite"] = first_nonfinite(port.intermediates(images))
    if job.get("dtypes", True):  # on the same batch: a new shape would make JAX compile every eager op again
        print_phase("port-dtypes")
        out.report["tap_dtypes"] = contract_dtypes(port, images)
    out.report.update({"param_count": int(port.param_count()), "device": port.device_class,
                       "versions": ports.load_port_module(framework).version_info(),
                       "precision": port.precision.to_dict()})


def taps(framework: str, job: dict[str, Any], out: Output) -> None:
    """{"weights", "input": .npy, optional "spec"} -> arrays: every named intermediate, eval mode;
    the report gives the port's own parameter count and, below float32, every named tensor's dtype
    (what `check_logits` decides the port on, beside the logits tap)."""
    port = _loaded_port(framework, job)
    images = np.load(job["input"], allow_pickle=False)
    print_phase("port-forward")
    out.arrays.update({name: np.asarray(t) for name, t in port.intermediates(images).items()})
    print_phase("port-dtypes")
    out.report.update({"param_count": int(port.param_count()), "tap_dtypes": contract_dtypes(port, images)})


def contract_dtypes(port: Any, images: np.ndarray) -> dict[str, str]:
    """Below float32, the dtype every named tensor was computed in, read from the framework (one
    more forward, with taps), for the precision contract (shared/core/precision.py). At float32
    the contract is float32 everywhere (`expected_tap_dtype`) and none is read: a tensor held in
    a lower dtype shows in the logits, far beyond float32's bound."""
    return port.tap_dtypes(images) if port.precision.low else {}


LOGITS = JobKind("logits", logits)
TAPS = JobKind("taps", taps)
