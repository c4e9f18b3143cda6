"""`compare.py verify`: every installed port against the float64 reference and against each
other (shared/runtime/verify.py runs them, each framework in its own fresh process; the verdict
is shared/core/equivalence.py's). Exit status 1 when any port fails."""

from __future__ import annotations

import argparse
import json

from ports import installed, parse_frameworks
from shared.cli._common import (
    add_spec_args,
    add_user_model_args,
    print_note,
    resolve_model,
    user_options,
    user_spec,
)
from shared.cli._options import add_batch, add_device, add_precision, add_timeout
from shared.core.files import check_output, write_output
from shared.core.inputs import probe_batch
from shared.core.precision import from_args
from shared.core.presets import DEFAULT_PRESET, PRESETS, get_preset
from shared.core.summary import format_table
from shared.core.terminal import wrap, wrapped
from shared.core.tolerance import logit_atol
from shared.core.weights import init_weights
from shared.errors import FrameworkUnavailable
from shared.runtime.verify import Case, Entry, verify

ORDER = 40
SCHEMA = "portbench.verify/1"


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("verify", help="check every port's logits against the float64 reference")
    add_spec_args(parser)
    parser.add_argument("--frameworks", help="comma-separated (default: every installed port)")
    parser.add_argument("--all-presets", action="store_true", help="verify every preset")
    add_batch(parser, 4, "probe batch size")
    add_device(parser, "cpu")
    add_precision(parser)
    add_timeout(parser, 900.0)
    parser.add_argument("--json", help="write the results here (one entry per spec and framework)")
    parser.add_argument("--force", action="store_true", help="replace an existing --json file")
    add_user_model_args(parser)
    parser.set_defaults(run=run)


def default_frameworks() -> list[str]:
    return [name for name, reason in installed().items() if reason is None]


def print_report(cases: list[Case], entries: list[Entry], pairwise: list[dict]) -> None:
    for case in cases:
        rows = []
        mine = [e for e in entries if e.spec == case.spec.name]
        tol = mine[0].tolerance if mine else logit_atol(case.spec, case.reference, case.precision,
                                                        case.emulated_gap)
        floor = f", floor {mine[0].floor:.1e}" if mine and mine[0].floor else ""
        print()
        print(wrapped(f"spec {case.spec.name!r} ({case.spec.spec_hash}): {case.spec.derived.params:,} "
                      f"parameters, probe batch {case.images.shape[0]}"))
        print(wrapped(f"rung {case.precision.rung}: tolerance {tol:.1e}{floor} (max abs vs float64 "
                      "reference)"))
        if mine and mine[0].bound:  # below float32: what the bound is a multiple of
            print(wrapped(f"bound: {mine[0].bound}"))
        print_note(case.note)
        reasons = []  # why a row failed or could not run: under the table, so the table stays narrow
        for e in mine:
            rows.append([e.framework, e.device or "-", f"{e.param_count:,}" if e.param_count else "-",
                         f"{e.max_abs_diff:.2e}" if e.max_abs_diff is not None else "-",
                         f"{e.max_rel_diff:.2e}" if e.max_rel_diff is not None else "-",
                         e.status + ("*" if e.error else "")])
            if e.error:
                reasons += wrap(f"* {e.framework}: {e.status}: {e.error}")
        print(format_table(["framework", "device", "params", "max abs", "max rel", "status"], rows))
        if reasons:
            print("\n".join(reasons))
        pairs = [p for p in pairwise if p["spec"] == case.spec.name]
        if pairs:
            gaps = ", ".join(f"{p['a']}~{p['b']} {p['max_abs_diff']:.1e}" for p in pairs)
            print(wrapped(f"pairwise max abs: {gaps}"))


def write_json(path: str, entries: list[Entry], pairwise: list[dict], force: bool = False) -> None:
    document = {"schema": SCHEMA, "entries": [e.to_dict() for e in entries], "pairwise": pairwise}
    write_output(path, (json.dumps(document, indent=2) + "\n").encode(), force=force)


def run_cases(cases: list[Case], frameworks: list[str], device: str, timeout: float,
              json_path: str | None, force: bool = False) -> int:
    if json_path:
        check_output(json_path, force)  # before minutes of work, not after
    entries, pairwise = verify(cases, frameworks, device, timeout)
    print_report(cases, entries, pairwise)
    if json_path:
        write_json(json_path, entries, pairwise, force)
    ran = [e for e in entries if not e.unavailable]
    if not ran:
        raise FrameworkUnavailable(f"no framework could run here: {entries[0].error}" if entries
                                   else "no framework to verify")
    failed = [e for e in ran if not e.passed] + [p for p in pairwise if not p["passed"]]
    passed = len(ran) + len(pairwise) - len(failed)
    unavailable = len(entries) - len(ran)
    tail = f", {unavailable} unavailable" if unavailable else ""
    print(f"\n{passed} passed, {len(failed)} failed{tail}")
    return 1 if failed else 0


def run(args: argparse.Namespace) -> int:
    if args.model:
        return run_user_model(args)
    frameworks = parse_frameworks(args.frameworks, tuple(default_frameworks()))
    if args.frameworks:
        for name in frameworks:
            reason = installed().get(name) if name != "reference" else None
            if reason:
                raise FrameworkUnavailable(reason)
    precision = from_args(args)
    if args.all_presets:
        specs = [get_preset(name) for name in PRESETS]
        cases = [Case(s, init_weights(s, args.seed), probe_batch(s, args.batch), precision=precision)
                 for s in specs]
    else:
        model = resolve_model(args)
        cases = [Case(model.spec, model.tensors, probe_batch(model.spec, args.batch), model.note,
                      precision)]
    return run_cases(cases, frameworks, args.device, args.timeout, args.json, args.force)


def main_verify() -> int:
    """The default job's verification: the default spec, seeded weights, every installed port."""
    spec = get_preset(DEFAULT_PRESET)
    case = Case(spec, init_weights(spec, 0), probe_batch(spec))
    return run_cases([case], default_frameworks(), "cpu", 900.0, None)


def run_user_model(args: argparse.Namespace) -> int:
    """`verify --model`: the user's model as a row beside the reference (and our ports with
    --frameworks); spec contradictions first; on a gap, diagnose's finding."""
    from shared.teaching.user_model import check_user

    if args.json:
        check_output(args.json, args.force)
    spec = user_spec(args)
    named = parse_frameworks(args.frameworks, ()) if args.frameworks else []
    frameworks = [f for f in named if f != "reference"]
    images = probe_batch(spec, args.batch)
    result = check_user(args.model, spec, images, frameworks=frameworks, timeout=args.timeout,
                        **user_options(args))
    run = result.run
    if args.show_binding:
        print("\n".join(run.binding_lines()))
    for c in run.contradictions:
        print(f"spec check: {c.line()}")
    how = "--weights loaded into your model" if args.weights else "your model's own parameters, bound"
    case = Case(spec, run.tensors, images, f"weights: {how} by {run.binding['rule']}")
    print_report([case], [result.entry, *result.ports], result.pairwise)
    if result.diagnosis is not None:
        print("diagnose: " + "\n  ".join(result.diagnosis.lines()))
    if args.json:
        document = {"schema": SCHEMA, "entries": [e.to_dict() for e in [result.entry, *result.ports]],
                    "pairwise": result.pairwise, "binding": run.binding,
                    "contradictions": [c.line() for c in run.contradictions],
                    "diagnosis": result.diagnosis.to_dict() if result.diagnosis else None}
        write_output(args.json, (json.dumps(document, indent=2) + "\n").encode(), force=args.force)
    failed = [e for e in [result.entry, *result.ports] if not e.passed and not e.unavailable]
    ok = result.passed and not failed
    verdict = result.explanation() if ok else f"NOT equivalent: {result.explanation()}"
    print(f"\n{verdict}")
    return 0 if ok else 1
