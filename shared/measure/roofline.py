"""How close a port runs to what its own framework's matrix multiply can do on this machine.

The ceiling is the framework's GEMM rate in the run's compute dtype (float32 unless the run is
at a lower precision rung), measured in the timing worker at the run's threads and device
(`gemm_call` in every ports/<fw>/port.py) on the spec's own dense matmul shapes
(`flops.gemm_shapes`), each weighted by how often the forward pass runs it: the rate the model
would reach if it did nothing but its GEMMs at the library's speed. A ceiling is what the
library can do, so each shape counts its fastest call (on a shared CPU a median of a few calls
would sink with the neighbours' load and put models above 100%), and a small shape is timed with
more rows, enough for MIN_GEMM_FLOPS per call: a 224x32 @ 32x96 product alone measures the cost
of one call, not the GEMM, and a compiled model that runs all its GEMMs in one call would sit at
several times such a "ceiling". On a tiny spec the roofline therefore says how far per-op
overhead keeps the model from the machine's limit. A row's achieved rate
is the analytic FLOPs (`flops.forward_flops`) over its median forward time; the roofline
fraction is achieved / ceiling. Attention's small products, softmax, LayerNorm, GELU and
dispatch are what keeps it below 1. The rate records other processes' CPU use while it was
measured (`foreign_cpu`): a ceiling measured on a busy CPU is flagged, not silently divided by
(shared/measure/rounds.py).
"""

from __future__ import annotations

from typing import Any

from shared.core.spec import ModelSpec
from shared.measure import flops
from shared.measure.contention import ForeignCpu, pinned_cpus
from shared.measure.stats import Budget, repeat, summarise
from shared.runtime.contract import PortModule
from shared.runtime.worker import one_line

# Short and fixed: every shape gets 2 warm-up calls and at least 5 timed ones; small shapes repeat
# until 0.1 s so that their microsecond times are not one timer tick.
GEMM_BUDGET = Budget(warmup=2, min_repeats=5, max_repeats=200, seconds=0.1)
FORWARD_PHASES = ("forward_eager", "forward_compiled")
MIN_GEMM_FLOPS = 2 * 10**8  # per timed product: milliseconds at tens of GFLOP/s, so the call is noise


def gemm_rate(module: PortModule, spec: ModelSpec, batch: int, device: str,
              budget: Budget = GEMM_BUDGET, dtype: str = "float32") -> dict[str, Any]:
    """The framework's GEMM rate in `dtype` on the spec's shapes, or why there is none."""
    if not hasattr(module, "gemm_call"):
        return {"status": "n/a", "reason": "the port module has no gemm_call"}
    shapes = []
    with ForeignCpu(pinned_cpus()) as foreign:  # a rate measured on a busy CPU is no ceiling
        for mm in flops.gemm_shapes(spec, batch):
            rows = max(mm.m, -(-MIN_GEMM_FLOPS // (2 * mm.k * mm.n)))
            stats = summarise(repeat(module.gemm_call(rows, mm.k, mm.n, device, dtype), budget))
            rate = 2 * rows * mm.k * mm.n / stats["min"] / 1e9
            shapes.append({"name": mm.name, "m": mm.m, "k": mm.k, "n": mm.n, "count": mm.count,
                           "m_timed": rows, "n_samples": stats["n"], "gflops": rate,
                           "seconds": 2 * mm.m * mm.k * mm.n / rate / 1e9})  # the spec's product at that rate
    return {"status": "ok", "gflops": weighted_rate(shapes), "dtype": dtype, "shapes": shapes,
            "foreign_cpu": foreign.value}


def weighted_rate(shapes: list[dict[str, Any]]) -> float:
    """GFLOP/s over the set as the forward pass uses it: all its GEMM FLOPs over all their time."""
    work = sum(2 * s["m"] * s["k"] * s["n"] * s["count"] for s in shapes)
    seconds = sum(s["seconds"] * s["count"] for s in shapes)
    return work / seconds / 1e9


def achieved(work: int, phases: dict[str, Any], gemm: dict[str, Any]) -> dict[str, Any]:
    """Per forward phase: achieved GFLOP/s (`work` analytic FLOPs / median) and its fraction of
    the GEMM rate (None where the rate is n/a)."""
    ceiling = gemm.get("gflops") if gemm.get("status") == "ok" else None
    out: dict[str, Any] = {}
    for name in FORWARD_PHASES:
        phase = phases.get(name) or {}
        if phase.get("status") != "ok" or not phase.get("median"):
            continue
        rate = work / phase["median"] / 1e9
        out[name] = {"gflops": rate, "fraction": None if ceiling is None else rate / ceiling}
    return out


def roofline(spec: ModelSpec, batch: int, phases: dict[str, Any], gemm: dict[str, Any]) -> dict[str, Any]:
    """The row's `roofline` record (docs/results-schema.md)."""
    work = flops.forward_flops(spec, batch)
    return {"forward_flops": work, "gemm": gemm, "phases": achieved(work, phases, gemm)}


def measured(module: Any, spec: ModelSpec, batch: int, device: str, dtype: str,
             phases: dict[str, Any]) -> dict[str, Any]:
    """`roofline` from a GEMM rate measured now; a failing measurement costs the roofline only
    (its reason is the row's roofline entry), never the timing row."""
    try:
        gemm = gemm_rate(module, spec, batch, device, dtype=dtype)
    except Exception as exc:
        gemm = {"status": "n/a", "reason": f"GEMM rate failed: {one_line(exc)}"}
    return roofline(spec, batch, phases, gemm)


def best_fraction(row: dict[str, Any]) -> tuple[float | None, float | None]:
    """(GFLOP/s, fraction) of the row's faster forward mode, for the table."""
    phases = (row.get("roofline") or {}).get("phases") or {}
    if not phases:
        return None, None
    best = max(phases.values(), key=lambda p: p["gflops"])
    return best["gflops"], best.get("fraction")
