"""`compare.py time`: fair, phase-separated timing of every port, one fresh process each.

Every port gets the same spec, canonical weights, seeded batch, dtype, thread count and budget;
each is checked against the float64 reference before it is timed (INVALID ports are never
ranked); phases are timed separately and synchronised; results go to a versioned JSON file, a
CSV and a PNG chart. `--factorial A B` splits a time gap into a spec and a framework effect.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from shared.cli._lists import parse_frameworks, parse_list
from shared.cli._options import (
    ALLOW_MIXED,
    BATCH,
    BUDGET,
    CHART,
    COMPILE_CACHE,
    CSV,
    DEVICE,
    FORCE,
    FRAMEWORKS,
    HTML,
    JSON,
    MODES,
    NO_CHART,
    PROCESSES,
    RANK_BY,
    SET,
    SPEC,
    THREADS,
    TIMEOUT,
    add_precision,
    given,
    non_empty,
    non_negative_int,
    positive_int,
)
from shared.cli._outputs import output_paths, write_outputs
from shared.core.precision import from_args
from shared.core.terminal import wrapped
from shared.errors import FrameworkUnavailable, PortbenchError, SpecError

ORDER = 40
HELP = "time every port fairly, phase by phase"
MODES_TIMED = ("eager", "compiled", "train")


def add_timing_arguments(parser: argparse.ArgumentParser, default_set: str = "every installed one", *,
                         budget: float = 1.0, max_repeats: int = 100, eval_batches: int = 3,
                         processes: int = 2, compile_cache: str = "cold") -> None:
    """The options shared by `time` and the bare `compare.py`, with the defaults each runs (and
    its --help states)."""
    FRAMEWORKS.add(parser, note=f"default: {default_set}")
    BATCH.add(parser, default=8)
    THREADS.add(parser)
    DEVICE.add(parser, default="auto")
    MODES.add(parser, default=",".join(MODES_TIMED))
    BUDGET.add(parser, default=budget)
    parser.add_argument("--min-repeats", type=positive_int, default=5,
                        help="repeats per phase, at least (default 5)")
    parser.add_argument("--max-repeats", type=positive_int, default=max_repeats,
                        help=f"repeats per phase, at most (default {max_repeats})")
    parser.add_argument("--warmup", type=non_negative_int, default=2,
                        help="untimed calls before repeats (default 2)")
    parser.add_argument("--eval-batches", type=positive_int, default=eval_batches,
                        help=f"batches per evaluation pass (default {eval_batches})")
    PROCESSES.add(parser, "fresh workers per framework; a row is ranked only where every round puts it in "
                  "the same place and no round was contended; two are the fewest that can disagree",
                  default=processes)
    TIMEOUT.add(parser, default=900.0)
    COMPILE_CACHE.add(parser, default=compile_cache)
    JSON.add(parser, note="default: results/time-SPEC-UTC-PID.json")
    CSV.add(parser, note="default: beside the JSON")
    CHART.add(parser, note="default: beside the JSON")
    NO_CHART.add(parser)
    HTML.add(parser, note="the bare job: index.html beside its results JSON, its own page, replaced each run")
    add_precision(parser)
    FORCE.add(parser)
    ALLOW_MIXED.add(parser)
    RANK_BY.add(parser)
    parser.add_argument("--wide", action="store_true",
                        help="every column (default: a table that fits 100 columns)")
    parser.add_argument("--mode", type=given("NAME or FRAMEWORK=NAME"),
                        dest="force_modes", action="append", default=[],
                        metavar="[FRAMEWORK=]NAME",
                        help="run this port mode instead of measuring which is fastest (repeatable; "
                             "a bare NAME: every port that offers it; docs/timing.md, 'Modes')")
    parser.add_argument("--remeasure-modes", action="store_true",
                        help="measure every port's modes again instead of reusing the cached choice")


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("time", help=HELP,
                            description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    SPEC.add(parser, note="default: with --model, the spec read from your model; else archive-torch")
    SET.add(parser)
    parser.add_argument("--factorial", type=non_empty, nargs=2, metavar=("SPEC_A", "SPEC_B"),
                        help="run both specs with every framework and split the time gap into a "
                             "spec effect and a framework effect")
    add_timing_arguments(parser)
    from shared.cli._common import add_user_model_args

    add_user_model_args(parser)  # `--model`: the user's own model, one more row
    parser.set_defaults(run=run)


# ---- argument checking (before anything is timed) ----------------------------------------------
def choose_frameworks(text: str | None, default: tuple[str, ...] | None = None,
                      refusal: Callable[[str], str | None] | None = None,
                      ) -> tuple[list[str], list[dict[str, Any]]]:
    """(runnable names, an `unavailable` row for each one that is not installed or that
    `refusal` refuses: `ports.rung_refusal` at the run's rung, the decision `verify` and every
    worker take, here before any worker starts). The names are read by `parse_frameworks`;
    without names: the installed ones of `default` (None: every installed one)."""
    from ports import NOTHING_INSTALLED, missing_requirement
    from shared.cli._common import installed_ports

    names = parse_frameworks(text, [n for n in installed_ports() if default is None or n in default])
    if not names:
        raise FrameworkUnavailable(NOTHING_INSTALLED)
    why = {n: missing_requirement(n) or (refusal(n) if refusal else None) for n in names}
    missing = [{"framework": n, "status": "unavailable", "reason": why[n], "conditions": {}, "phases": {},
                "memory": {}} for n in names if why[n]]
    return [n for n in names if not why[n]], missing


def build_config(args: argparse.Namespace, spec: Any) -> Any:
    from shared.measure.guard import RANK_METRICS
    from shared.measure.runner import RunConfig
    from shared.measure.stats import Budget, check_repeats

    modes = parse_list(args.modes, MODES_TIMED, "mode")
    if args.rank_by not in RANK_METRICS:
        raise PortbenchError(f"unknown ranking metric {args.rank_by!r}; expected one of: "
                             f"{', '.join(RANK_METRICS)}")
    from shared.core.budget import check_fits, check_work

    for name in ("min_repeats", "max_repeats", "warmup", "eval_batches", "processes", "budget"):
        check_work(f"--{name.replace('_', '-')}", getattr(args, name))
    passes = max(1, args.eval_batches)  # the evaluation pass holds its batches at once
    check_fits(spec, args.batch * passes, "a timing run's batches",
               f"{passes} evaluation batches of --batch {args.batch:,}" if passes > 1 else None)
    check_repeats("--min-repeats", args.min_repeats)
    if args.max_repeats < args.min_repeats:
        raise PortbenchError(f"--max-repeats {args.max_repeats} is below --min-repeats {args.min_repeats}")
    budget = Budget(warmup=args.warmup, min_repeats=args.min_repeats, max_repeats=args.max_repeats,
                    seconds=args.budget)
    return RunConfig(spec=spec, batch=args.batch, threads=args.threads, device=args.device,
                     modes=tuple(m for m in modes if m != "train"), train="train" in modes, budget=budget,
                     eval_batches=args.eval_batches, timeout_s=args.timeout,
                     compile_cache=args.compile_cache, processes=args.processes,
                     precision=from_args(args), user=user_job(args, spec),
                     mode_options={"force": mode_requests(getattr(args, "force_modes", [])),
                                   "remeasure": getattr(args, "remeasure_modes", False)})


def mode_requests(items: list[str]) -> list[str]:
    """`--mode` values as given, each checked for its form ([FRAMEWORK=]NAME); whether a port
    offers the mode is decided in its worker (shared/measure/modes.py), where its modes are known."""
    from ports import PORTS

    chosen: dict[str, str] = {}  # a framework (or a bare name) -> the --mode that chose it
    for item in items:
        framework, equals, name = item.rpartition("=")
        if not name or (equals and framework not in PORTS) or "=" in framework:  # `=NAME`: no framework
            raise PortbenchError(f"--mode {item!r}: expected NAME or FRAMEWORK=NAME with FRAMEWORK one of "
                                 f"{', '.join(PORTS)}")
        key = framework or item
        if key in chosen:  # the first would win, silently
            what = f"{framework}'s mode" if framework else "that mode"
            raise PortbenchError(f"--mode {chosen[key]!r} and --mode {item!r} both choose {what}: give one")
        chosen[key] = item
    return list(items)


def user_job(args: argparse.Namespace, spec: Any) -> dict[str, Any] | None:
    """`--model`: what the timing worker needs to build the user's model (checked here first)."""
    if not getattr(args, "model", None):
        return None
    from shared.your_model.rules import read_rules
    from shared.your_model.run import check_model_argument, worker_framework

    model = check_model_argument(args.model)
    return {"model": model, "framework": args.framework, "layout": args.input_layout,
            "output": args.output, "rules": read_rules(args.map, spec) if args.map else None,
            "entry": worker_framework(model, args.framework)}


# ---- running ------------------------------------------------------------------------------------
def progress(message: str) -> None:
    print(wrapped(message), file=sys.stderr, flush=True)


def time_spec(spec: Any, frameworks: list[str], missing: list[dict[str, Any]],
              config: Any, logits: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    from shared.measure.runner import run_all

    several = len(frameworks) + bool(config.user) > 1

    def stop_on_user_error(row: dict[str, Any]) -> None:
        # A device one framework cannot use is a row saying why when several are timed (never a
        # silent CPU run); for a single framework it is the user's mistake: one line, no results.
        if row.get("user_error") and not (several and row.get("status") == "unavailable"):
            raise PortbenchError(row["user_error"])

    rows = run_all(frameworks, config, progress, on_row=stop_on_user_error, logits=logits) + missing
    if rows and all(r.get("status") == "unavailable" for r in rows):
        raise PortbenchError(f"no framework could run here: {rows[0].get('reason')}")
    return rows


def print_verdicts(spec: Any, config: Any, rows: list[dict[str, Any]], logits: dict[str, Any]) -> bool:
    """The timing run's equivalence gate in verify's table, made of the verdicts its workers
    recorded (shared/measure/gate.py); True when all pass."""
    from shared.cli._verdicts import print_verdicts as print_table
    from shared.cli._verdicts import tally
    from shared.measure.gate import verdicts

    case, table, pairwise = verdicts(spec, config.batch, config.seed, rows, logits, config.precision)
    print_table([case], table, pairwise)
    line, failed = tally(table, pairwise)
    print(f"\n{line} (the timing run's equivalence gate)")
    return not failed and bool(table)


def run(args: argparse.Namespace) -> int:
    from ports import rung_refusal
    from shared.cli._common import check_model_options
    from shared.core.presets import resolve_spec

    check_model_options(args)
    parse_frameworks(args.frameworks, ())  # an unknown name is refused before any tool is imported
    if args.factorial:
        if args.spec or args.set:
            raise SpecError("--factorial names both specs; do not combine it with --spec/--set")
        specs = [resolve_spec(s) for s in args.factorial]
    elif getattr(args, "model", None) and not args.spec:  # the spec read from the user's model
        from shared.cli._common import spec_from_model

        specs = [spec_from_model(args, args.set)]
    else:
        specs = [resolve_spec(args.spec, args.set)]
    configs = [build_config(args, s) for s in specs]
    frameworks, missing = choose_frameworks(args.frameworks, getattr(args, "default_frameworks", None),
                                            lambda n: rung_refusal(n, configs[0].precision, args.device))
    if missing and not frameworks and not configs[0].user:  # as `verify` refuses it, before any worker
        raise FrameworkUnavailable(f"no framework could run here: {missing[0]['reason']}")
    if args.factorial:
        from shared.measure.factorial import check_design

        check_design(args.factorial, specs, frameworks)
    from shared.measure import output, schema
    from shared.measure.environment import host_record, utc_now
    from shared.measure.guard import ranking_record

    stem = "-vs-".join(s.name for s in specs)
    paths = output_paths(args, stem)
    host = host_record()

    all_rows: list[dict[str, Any]] = []
    per_spec: list[list[dict[str, Any]]] = []
    rankings: list[dict[str, Any]] = []  # the rank decision of each table printed
    for spec, config in zip(specs, configs, strict=True):
        progress(f"timing {spec.name} (spec {spec.spec_hash}) batch {config.batch}, {config.threads} "
                 f"thread(s), device {config.device}, frameworks: {', '.join(frameworks) or 'none'}")
        logits: dict[str, Any] | None = {} if getattr(args, "print_verdicts", False) else None
        rows = time_spec(spec, frameworks, [dict(m) for m in missing], config, logits)
        per_spec.append(rows)
        all_rows.extend(rows)
        if logits is not None and not print_verdicts(spec, config, rows, logits):
            print("verification failed: the failing ports are INVALID and not ranked")
        print(f"\n{spec.name} ({spec.spec_hash}), batch {config.batch}, {config.threads} thread(s), "
              f"{config.precision.rung}")
        print(output.table(rows, args.rank_by, args.allow_mixed, wide=args.wide))
        rankings.append(ranking_record(rows, args.rank_by, args.allow_mixed))

    extra: dict[str, Any] = {"ranking": rankings}
    if args.factorial:
        from shared.measure import factorial

        metric = args.rank_by
        parts = factorial.attribute(per_spec[0], per_spec[1], metric)
        extra["factorial"] = {"spec_a": specs[0].name, "spec_b": specs[1].name, "metric": metric,
                              "decompositions": parts}
        print("\n" + factorial.describe(specs[0].name, specs[1].name, parts))
    conditions = configs[0].conditions() if len(configs) == 1 else {
        "factorial_specs": [c.conditions() for c in configs], **{
            k: configs[0].conditions()[k]
            for k in ("batch", "dtype", "precision", "threads", "device_request")}}
    doc = schema.new_results(host, conditions, all_rows, utc_now(), ["compare.py", *sys.argv[1:]], extra)
    write_outputs(doc, all_rows, paths, f"{stem}: batch {configs[0].batch}, {configs[0].threads} thread(s)",
                  args.force, args.rank_by, args.allow_mixed)
    bad = [r for r in all_rows if r["status"] in ("invalid", "crashed", "timeout")]
    return 1 if bad else 0
