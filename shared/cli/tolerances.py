"""`compare.py tolerances`: measure the precision ladder (shared/runtime/ladder.py) — every
preset in every native port at every low rung against float64, against the rung-emulating
reference and pairwise — on this CPU's arithmetic path, and print the ratios port gap / emulated
gap that the low-rung bounds in shared/core/tolerance.py are multiples of. `--json` keeps one
path's run; `--from` (once per path) writes docs/tolerances.md from such runs with `--markdown`.

The arithmetic path is the environment's: native (the CPU's bfloat16 / float16 instructions), or
limited to AVX2 with `ONEDNN_MAX_CPU_ISA=AVX2` (torch, TensorFlow) and
`XLA_FLAGS=--xla_cpu_max_isa=AVX2` (JAX), plus `TF_ENABLE_ONEDNN_OPTS=0`: with oneDNN limited to
AVX2, TensorFlow's own CPU check still routes bfloat16 / float16 matmuls to oneDNN, which has no
kernel for them there (a segfault); an AVX2 CPU routes them to Eigen, which that flag does."""

from __future__ import annotations

import argparse
import datetime
import json
import os
from typing import Any

from ports import NATIVE, parse_frameworks
from shared.cli._common import installed_ports, write_json
from shared.cli._options import DEVICE, FORCE, FRAMEWORKS, JSON, TIMEOUT
from shared.cli.time import parse_list
from shared.core.files import check_output, read_text, write_output
from shared.core.precision import LOW_RUNGS, RUNGS
from shared.core.presets import PRESETS
from shared.core.tolerance import FLOOR_FRACTION, MARGIN
from shared.errors import InputError

ORDER = 45
HELP = "measure every rung of the precision ladder against float64"
SCHEMA = "portbench.tolerances/2"
ISA_VARIABLES = ("ONEDNN_MAX_CPU_ISA", "XLA_FLAGS", "TF_ENABLE_ONEDNN_OPTS")


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("tolerances", help=HELP)
    parser.add_argument("--presets", help="comma-separated (default: every preset)")
    FRAMEWORKS.add(parser, note="default: every installed native port")
    parser.add_argument("--rungs", help=f"comma-separated, of {','.join(RUNGS)} "
                                        f"(default: {','.join(LOW_RUNGS)}; tf32 needs --device cuda)")
    DEVICE.add(parser)
    TIMEOUT.add(parser, default=3600.0)
    parser.add_argument("--from", dest="sources", action="append", metavar="JSON",
                        help="measure nothing: read a --json file of an earlier run (once per path)")
    parser.add_argument("--markdown", help="write the measurements as a Markdown page here")
    JSON.add(parser, "every measurement")
    FORCE.add(parser)
    parser.set_defaults(run=run)


def arithmetic_path() -> str:
    """This environment's arithmetic path, as docs/tolerances.md labels it."""
    from shared.measure.environment import low_precision_support

    limited = os.environ.get("ONEDNN_MAX_CPU_ISA") or ("xla_cpu_max_isa" in os.environ.get("XLA_FLAGS", ""))
    if limited:
        return "AVX2-limited (" + ", ".join(f"{k}={os.environ[k].strip()}" for k in ISA_VARIABLES
                                            if os.environ.get(k)) + ")"
    flags = low_precision_support()["flags"]
    return f"native ({', '.join(flags) or 'no bfloat16/float16 instructions'})"


def _load(path: str) -> tuple[str, list[Any], list[dict[str, Any]]]:
    from shared.runtime.ladder import Measured

    try:
        document = json.loads(read_text(path, "--from file"))
        if document.get("schema") != SCHEMA:
            raise InputError(f"--from {path!r}: schema {document.get('schema')!r}, expected {SCHEMA!r} "
                             "(written by `compare.py tolerances --json`)")
        entries = [Measured.from_dict(e, f"--from {path!r}: entries[{i}]", InputError)
                   for i, e in enumerate(document["entries"])]
        return str(document["path"]), entries, list(document["pairwise"])
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(f"--from {path!r}: not a `compare.py tolerances --json` file ({exc})") from None


def _print(label: str, measured: list[Any]) -> None:
    from shared.runtime.ladder import ratio_summary

    for m in measured:
        gap = "-" if m.gap is None else f"{m.gap:.2e}"
        ratio = "-" if m.ratio is None else f"{m.ratio:.2f}"
        print(f"{m.spec:24} {m.rung:15} {m.framework:6} {gap:>9} {ratio:>6}  {m.status}"
              + (f": {m.reason}" if m.status == "UNAVAILABLE" else ""))
    print(f"\n{label}: (smallest, largest) port gap / emulated gap; bound = largest x {MARGIN:g}, "
          f"floor = smallest x {FLOOR_FRACTION:g}:")
    for rung, (low, high) in ratio_summary(measured).items():
        print(f"  {rung!r}: ({low:.2f}, {high:.2f})")


def run(args: argparse.Namespace) -> int:
    from shared.runtime.ladder import markdown, measure

    for path in (args.markdown, args.json):
        if path:
            check_output(path, args.force)
    today = datetime.date.today().isoformat()
    if args.sources:
        paths = {}
        for source in args.sources:
            label, measured, pairs = _load(source)
            _print(label, measured)
            paths[label] = (measured, pairs)
    else:
        presets = list(parse_list(args.presets or ",".join(PRESETS), tuple(PRESETS), "preset"))
        rungs = parse_list(args.rungs or ",".join(LOW_RUNGS), RUNGS, "rung")
        frameworks = parse_frameworks(args.frameworks, tuple(n for n in NATIVE if n in installed_ports()))
        label = arithmetic_path()
        measured, pairs = measure(presets, frameworks, rungs, args.timeout, args.device)
        _print(label, measured)
        paths = {label: (measured, pairs)}
        if args.json:
            document = {"schema": SCHEMA, "date": today, "path": label,
                        "entries": [m.to_dict() for m in measured], "pairwise": pairs}
            write_json(args.json, document, args.force)
    if args.markdown:
        write_output(args.markdown, markdown(paths, today).encode(), force=args.force)
    return 0
