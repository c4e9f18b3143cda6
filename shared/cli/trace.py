"""`compare.py trace`: the first intermediate tensor where a port leaves the reference
(shared/teaching/first_divergence.py)."""

from __future__ import annotations

import argparse

from ports import NOTHING_INSTALLED
from shared.cli._common import (
    REFERENCE_ALONE,
    add_json_arg,
    add_model_args,
    check_model_options,
    check_outputs,
    installed_ports,
    load_model,
    load_user_model,
    write_json_and_page,
)
from shared.cli._lists import parse_frameworks
from shared.cli._options import FRAMEWORKS, HTML, WITH_REFERENCE, add_precision
from shared.core.precision import from_args
from shared.errors import FrameworkUnavailable, InputError

ORDER = 61
HELP = "locate the first intermediate tensor where a port diverges"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "trace", help=HELP,
        description="Run every port's named intermediates (patch embedding, positions, each "
                    "block's norms/attention/MLP, pooled vector, logits) against the float64 "
                    "reference; report the first tensor over a budget scaled to its magnitude. "
                    "Exit 0: all within budget; 1: a divergence or a port that could not run.")
    add_model_args(p)
    FRAMEWORKS.add(p, note=WITH_REFERENCE)
    p.add_argument("--verbose", action="store_true", help="print every tap of every port")
    add_precision(p)
    add_json_arg(p, "the per-tap table", "existing --json/--html files")
    HTML.add(p, "the error of every tensor along the depth of the network")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    check_model_options(args)
    check_outputs(args)
    precision = from_args(args)
    # the frameworks are read before the tracing tool is imported or any model is run: a refused
    # name costs nothing; 'reference' (always traced) is dropped, and with --model none is a default
    offered = () if args.model else installed_ports()
    frameworks = [f for f in parse_frameworks(args.frameworks, offered, reference=True) if f != "reference"]
    if not frameworks and not args.model:
        raise InputError(REFERENCE_ALONE) if args.frameworks else FrameworkUnavailable(NOTHING_INSTALLED)
    from shared.teaching.first_divergence import report_lines, trace

    if args.model:
        from shared.teaching.user_check import user_trace

        run, images, notes = load_user_model(args, taps=True)
        spec, tensors = run.spec, run.tensors
        _, traces = trace(spec, tensors, images, frameworks)
        traces.insert(0, user_trace(run, images))
    else:
        spec, tensors, images, notes = load_model(args)
        _, traces = trace(spec, tensors, images, frameworks, precision)
    for note in notes:
        print(note)
    packed = f" in {len(images)} sequences" if spec.batching == "packed" else ""
    print(f"spec {spec.name!r}: {len(images) * spec.pack_images} images{packed} at {precision.rung}, "
          "budgets = tolerance x max(1, |reference tensor|)")
    for line in report_lines(traces, args.verbose):
        print(line)
    def page() -> str:
        from shared.report.pages import trace_page

        return trace_page(spec.name, [t.to_dict() for t in traces], notes)

    write_json_and_page(args, [t.to_dict() for t in traces], page)
    bad = not all(t.passed for t in traces)  # a tap over budget, or verify's verdict failed
    return 1 if bad else 0
