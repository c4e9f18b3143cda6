"""`compare.py audit`: every place a framework default is used instead of a value from the spec
(shared/teaching/audit.py), in this project's ports or in your own source files."""

from __future__ import annotations

import argparse

from ports import NATIVE
from shared.cli._common import installed_ports
from shared.cli._lists import parse_frameworks
from shared.cli._options import FRAMEWORKS, SET, SPEC, non_empty, refuse_unread
from shared.core.budget import check_fits
from shared.core.presets import resolve_spec

ORDER = 63
HELP = "list framework defaults used instead of spec values"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "audit", help=HELP,
        description="Without --source: read each port's source for calls that omit a pinning "
                    "keyword, then build each port for two probe specs whose settings differ from "
                    "every framework default and compare each layer with the spec. With --source: "
                    "only the source check, on your files (nothing is imported or run). "
                    "For a built model of your own, use shared.teaching.audit.audit_model(model, spec). "
                    "Exit 0: no findings; 1: findings.")
    SPEC.add(p, note="the base of the probe builds; default: archive-torch")
    SET.add(p)
    FRAMEWORKS.add(p, note="default: every installed parallel text (torch, keras, flax, mlx)")
    p.add_argument("--source", type=non_empty, nargs="+", metavar="FILE",
                   help="audit these Python files instead")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.source:
        refuse_unread(args, ("spec", "set", "frameworks"), "with --source, which reads your files only")
        from shared.teaching.audit import audit_file

        findings = []
        for name in args.source:
            findings += audit_file(name)
        checked = [f"source of {', '.join(args.source)}"]
    else:
        # The parallel texts only, in this one process: keras-jax and keras-torch are the Keras
        # port's own source (and a second Keras backend cannot start here), onnx has no layers.
        native = [name for name in NATIVE if name in installed_ports()]
        frameworks = parse_frameworks(args.frameworks, native, offered=NATIVE)
        spec = resolve_spec(args.spec, args.set)
        check_fits(spec, 1, "building each port for the audit")  # before a port allocates it
        from shared.teaching.audit import audit_ports

        findings, checked = audit_ports(frameworks, spec)
    for item in checked:
        print(f"checked {item}")
    if not findings:
        print("no framework default is used where the spec gives a value")
        return 0
    print(f"{len(findings)} framework default(s) used instead of a spec value:")
    for f in findings:
        print(f"  {f.line()}")
    return 1
