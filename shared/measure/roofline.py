"""How close a port runs to what its own framework's matrix multiply can do on this machine.

The ceiling is the framework's GEMM rate in the run's compute dtype (float32 unless the run is
at a lower precision rung), measured in the timing worker at the run's threads and device
(`gemm_call` in every ports/<fw>/port.py), run the way the run's chosen mode runs its matmuls
(Keras' `xla`: under XLA; a ceiling timed another way is not this forward's: an XLA forward read
164% of oneDNN's graph GEMM), on the spec's own dense matmul shapes
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


def gemm_rate(module: PortModule, spec: ModelSpec, batch: int, device: str, dtype: str = "float32",
              mode: str | None = None) -> dict[str, Any]:
    """The framework's GEMM rate in `dtype` on the spec's shapes, its products run as `mode` (the
    run's chosen mode, recorded with the rate) runs them; or why there is none."""
    shapes = []
    with ForeignCpu(pinned_cpus()) as foreign:  # a rate measured on a busy CPU is no ceiling
        for mm in flops.gemm_shapes(spec, batch):
            rows = max(mm.m, -(-MIN_GEMM_FLOPS // (2 * mm.k * mm.n)))
            call = module.gemm_call(rows, mm.k, mm.n, device, dtype, mode=mode)
            stats = summarise(repeat(call, GEMM_BUDGET))
            rate = 2 * rows * mm.k * mm.n / stats["min"] / 1e9
            shapes.append({"name": mm.name, "m": mm.m, "k": mm.k, "n": mm.n, "count": mm.count,
                           "m_timed": rows, "n_samples": stats["n"], "gflops": rate,
                           "seconds": 2 * mm.m * mm.k * mm.n / rate / 1e9})  # the spec's product at that rate
    return {"status": "ok", "gflops": weighted_rate(shapes), "dtype": dtype, "mode": mode, "shapes": shapes,
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


def measured(module: Any, spec: ModelSpec, batch: int, device: str, dtype: str,
             phases: dict[str, Any], mode: str | None) -> dict[str, Any]:
    """The row's `roofline` record (docs/results-schema.md), from a GEMM rate measured now in the
    run's `mode`; a failing measurement costs the roofline only (its reason is the row's roofline
    entry), never the timing row."""
    try:
        gemm = gemm_rate(module, spec, batch, device, dtype=dtype, mode=mode)
    except Exception as exc:
        gemm = {"status": "n/a", "reason": f"GEMM rate failed: {one_line(exc)}"}
    work = flops.forward_flops(spec, batch)
    return {"forward_flops": work, "gemm": gemm, "phases": achieved(work, phases, gemm)}


# A share above 1 is no finding about the forward: its ceiling was timed another way than the
# forward runs its matmuls (another compiler, another kernel), so the table marks it `!` and says so.
ABOVE_ROOF = "roof below the forward's rate: the ceiling was not measured as the forward runs"


def above_roof(name: str, achieved: float | None, gemm: dict[str, Any]) -> str | None:
    """The line for a forward whose `achieved` GFLOP/s is above its GEMM ceiling, or None."""
    ceiling = gemm.get("gflops") if gemm.get("status") == "ok" else None
    if achieved is None or not ceiling or achieved <= ceiling:
        return None
    mode = f" in mode {gemm['mode']}" if gemm.get("mode") else ""
    return (f"{name}: {ABOVE_ROOF} (forward {achieved:.3g} GFLOP/s, {achieved / ceiling:.0%} of the "
            f"{gemm.get('dtype', 'float32')} GEMM rate {ceiling:.3g} GFLOP/s measured{mode})")


def best_fraction(row: dict[str, Any]) -> tuple[float | None, float | None]:
    """(GFLOP/s, fraction) of the row's faster forward mode, for the table."""
    phases = (row.get("roofline") or {}).get("phases") or {}
    if not phases:
        return None, None
    best = max(phases.values(), key=lambda p: p["gflops"])
    return best["gflops"], best.get("fraction")
