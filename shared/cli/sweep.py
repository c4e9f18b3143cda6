"""`compare.py sweep --spec S --batch 1,8,64 [--image 32,64,128] [--frameworks ...]`: how each
port's forward time and peak memory grow with the batch and the token count.

Every point runs in the same fair harness as `compare.py time` (one fresh, pinned worker per
framework, the equivalence gate first, median ± IQR), is refused before anything runs when it
cannot fit in memory, and the fitted log-log slopes per port are printed: a time slope against
batch well below 1 means a fixed per-call cost (eager dispatch) still dominates, near 1 the work
does; against tokens, near 1 the linear layers dominate, toward 2 attention's n² does. Writes a
results JSON (readable by `compare.py report`), a CSV (one line per port and point) and a PNG
(one line per port); never over an existing file without --force.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from shared.cli._options import (
    BUDGET,
    CHART,
    COMPILE_CACHE,
    CSV,
    DEVICE,
    FORCE,
    FRAMEWORKS,
    JSON,
    MODES,
    NO_CHART,
    SET,
    SPEC,
    THREADS,
    TIMEOUT,
    listed,
)

ORDER = 42
HELP = "time and memory against batch and image size, with fitted slopes"


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("sweep", help=HELP,
                            description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    SPEC.add(parser)
    SET.add(parser)
    parser.add_argument("--batch", type=listed("comma-separated whole numbers, e.g. 1,8,64"),
                        dest="batches", required=True,
                        help="comma-separated batch sizes, e.g. 1,8,64")
    parser.add_argument("--image", type=listed("comma-separated sizes, e.g. 32,64"), dest="images",
                        help="comma-separated square image sizes in pixels, "
                                                       "e.g. 32,64,128 (default: the spec's)")
    FRAMEWORKS.add(parser, note="default: every installed one")
    THREADS.add(parser)
    DEVICE.add(parser, default="auto")
    MODES.add(parser, default="eager,compiled")
    BUDGET.add(parser, default=0.25)
    COMPILE_CACHE.add(parser, default="warm")
    TIMEOUT.add(parser, default=900.0)
    JSON.add(parser, note="default: results/sweep-SPEC-UTC-PID.json")
    CSV.add(parser, note="default: beside the JSON")
    CHART.add(parser, note="default: beside the JSON")
    NO_CHART.add(parser)
    FORCE.add(parser)
    parser.set_defaults(run=run, min_repeats=5, max_repeats=50, warmup=2, eval_batches=1, processes=1,
                        rank_by="forward", dtype="float32", precision=None, allow_tf32=False, batch=1)


def run(args: argparse.Namespace) -> int:
    from shared.cli._lists import comma_list, parse_frameworks, parse_list, whole_number
    from shared.cli.time import build_config, choose_frameworks, output_paths, progress
    from shared.core.presets import resolve_spec

    parse_frameworks(args.frameworks, ())  # an unknown name is refused before any tool is imported
    from shared.measure import sweep

    parse_list(args.modes, ("eager", "compiled"), "mode")  # it fits forward times: no train
    sizes = "whole numbers >= 1, each once, e.g. 1,8,64"  # each point is timed once
    batches = comma_list(args.batches, "--batch", sizes, whole_number(1))
    images = comma_list(args.images, "--image", sizes, whole_number(1)) if args.images else None
    spec = resolve_spec(args.spec, args.set)
    points = sweep.plan(spec, batches, images)  # refuses a point that cannot fit, before any runs
    config = build_config(args, spec)
    frameworks, missing = choose_frameworks(args.frameworks)
    paths = output_paths(args, spec.name, kind="sweep")
    progress(f"sweep {spec.name}: batch {','.join(map(str, batches))}"
             + (f", image {','.join(map(str, images))}" if images else "")
             + f"; {args.threads} thread(s); frameworks: {', '.join(frameworks) or 'none'}")
    rows = sweep.run_sweep(points, frameworks, config, progress)
    fitted = sweep.fits(rows)
    print(points_table(rows))
    print(fits_text(fitted))
    write(paths, spec, config, rows + missing, {"batches": batches, "images": images, "fits": fitted},
          args.force)
    bad = [r for r in rows if r["status"] in ("invalid", "crashed", "timeout")]
    return 1 if bad else 0


def points_table(rows: list[dict[str, Any]]) -> str:
    from shared.core.terminal import format_table
    from shared.measure.guard import metric_value
    from shared.measure.output import fmt_bytes, peak_memory, phase_cell

    lines = []
    for row in rows:
        point = row["sweep_point"]
        found = metric_value(row, "forward")
        lines.append([row["framework"], str(point["batch"]), f"{point['image'][0]}x{point['image'][1]}",
                      str(point["tokens"]), phase_cell(row["phases"].get(found[1])) if found else "-",
                      found[1].removeprefix("forward_") if found else row["status"].upper(),
                      fmt_bytes(peak_memory(row)[0])])
    return format_table(["port", "batch", "image", "tokens", "best forward", "mode", "peak mem"], lines)


def fits_text(fitted: dict[str, dict[str, Any]]) -> str:
    def slope(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    lines = ["\nlog-log slopes (least squares on log values; '-': that variable did not vary):"]
    for framework, fit in fitted.items():
        lines.append(f"  {framework}: time ~ batch^{slope(fit['time']['batch'])} "
                     f"tokens^{slope(fit['time']['tokens'])}; {fit['memory_source'] or 'memory'} ~ "
                     f"batch^{slope(fit['memory']['batch'])} tokens^{slope(fit['memory']['tokens'])} "
                     f"({fit['points']} points)")
    lines.append("  time vs batch well below 1: a fixed per-call cost (dispatch) dominates; near 1: "
                 "the work does.\n  time vs tokens near 1: the linear layers dominate; toward 2: "
                 "attention's n².")
    return "\n".join(lines)


def write(paths: dict[str, Path | None], spec: Any, config: Any, rows: list[dict[str, Any]],
          record: dict[str, Any], force: bool) -> None:
    from shared.core.files import Outputs
    from shared.measure import schema, sweep
    from shared.measure.environment import host_record, utc_now

    conditions = {**config.conditions(), "batch": None, "input_shape": None}
    doc = schema.new_results(host_record(), conditions, rows, utc_now(), ["compare.py", *sys.argv[1:]],
                             {"sweep": record})
    schema.validate(doc, "results being written")
    measured = [r for r in rows if "sweep_point" in r]
    with Outputs(force, make_folders=True) as outputs:  # all of them, or none
        written = [outputs.add(paths["json"], schema.dumps(doc).encode()),  # type: ignore[arg-type]
                   outputs.add(paths["csv"], sweep.csv_text(measured).encode())]  # type: ignore[arg-type]
        if paths["chart"] is not None and any(sweep.point_time(r) is not None for r in measured):
            written.append(outputs.add(paths["chart"],
                                       sweep.chart_png(measured, f"{spec.name}: {config.threads} thread(s)")))
        outputs.publish()
    print("wrote " + ", ".join(str(p) for p in written))
