"""Synthetic timing results documents (the schema of shared/measure/schema.py) for tests that
read results without timing anything."""

from __future__ import annotations

from typing import Any

from shared.measure import schema


def results_doc(threads: int = 1, note: str | None = None) -> dict[str, Any]:
    phase = {"status": "ok", "samples": [0.001, 0.002, 0.003], "n": 3, "median": 0.002, "q1": 0.0015,
             "q3": 0.0025, "iqr": 0.001, "min": 0.001, "mean": 0.002}
    conditions = {"spec_name": "quadrant", "spec_hash": "abc", "batch": 8, "dtype": "float32",
                  "threads": threads, "device_class": "cpu", "device_name": "cpu"}
    row = {"framework": "torch", "status": "ok", "conditions": conditions,
           "phases": {"forward_eager": phase}, "memory": {"peak_rss_bytes": 1 << 20},
           "threads_applied": {"requested": threads, "affinity_note": note},
           "equivalence": {"eager": {"passed": True, "max_abs_err": 2e-7, "atol": 5e-6, "images": 8}},
           "roofline": {"forward_flops": 2e8, "gemm": {"status": "ok", "gflops": 50.0},
                        "phases": {"forward_eager": {"gflops": 10.0, "fraction": 0.2}}}}
    return schema.new_results({"hostname": "h"}, conditions, [row], "2026-12-01T00:00:00Z", ["compare.py"])
