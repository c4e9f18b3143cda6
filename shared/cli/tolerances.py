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

from ports import NATIVE
from shared.cli._common import installed_ports
from shared.cli._lists import parse_frameworks, parse_list
from shared.cli._options import DEVICE, FORCE, FRAMEWORKS, JSON, TIMEOUT, listed, non_empty, refuse_unread
from shared.core.documents import decode_json
from shared.core.files import Outputs, check_output, read_text
from shared.core.paths import check_distinct
from shared.core.precision import LOW_RUNGS, RUNGS
from shared.core.presets import PRESETS
from shared.core.tolerance import FLOOR_FRACTION, MARGIN
from shared.errors import InputError

ORDER = 45
HELP = "measure every rung of the precision ladder against float64"
ISA_VARIABLES = ("ONEDNN_MAX_CPU_ISA", "XLA_FLAGS", "TF_ENABLE_ONEDNN_OPTS")
DEFAULT_TIMEOUT_S = 3600.0  # a measuring run's: every preset at every rung in one worker per framework


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("tolerances", help=HELP)
    parser.add_argument("--presets", type=listed("comma-separated preset names"),
                        help="comma-separated (default: every preset)")
    FRAMEWORKS.add(parser, note="default: every installed native port")
    parser.add_argument("--rungs", type=listed("comma-separated rungs"),
                        help=f"comma-separated, of {','.join(RUNGS)} "
                                        f"(default: {','.join(LOW_RUNGS)}; tf32 needs --device cuda)")
    DEVICE.add(parser, default=None, shown=DEVICE.default)  # None: with --from, given is refused
    TIMEOUT.add(parser, default=None, shown=DEFAULT_TIMEOUT_S)
    parser.add_argument("--from", type=non_empty, dest="sources", action="append", metavar="JSON",
                        help="measure nothing: read a --json file of an earlier run (once per path)")
    parser.add_argument("--markdown", type=non_empty, help="write the measurements as a Markdown page here")
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
    """(the path's label, its entries, its pairs) of a `--json` file, read through its record
    (shared/runtime/ladder.LadderFile): a field of the wrong type or value is one line naming it."""
    from shared.core.data_record import read_value, required, stored_fields
    from shared.core.record import field_types
    from shared.runtime.ladder import SCHEMA, LadderFile

    where, foreign = f"--from {path!r}", f"--from {path!r}: not a `compare.py tolerances --json` file"
    document = decode_json(read_text(path, f"--from file {path!r}"), where, InputError)
    if document.get("schema") != SCHEMA:
        raise InputError(f"{where}: schema {document.get('schema')!r:.60}, expected {SCHEMA!r} "
                         "(written by `compare.py tolerances --json`)")
    stored, types = stored_fields(LadderFile), field_types(LadderFile)
    known = [key for _, key in stored]
    lacking = [key for f, key in stored if required(f) and key not in document]
    unknown = sorted(str(key) for key in document if key not in known)
    if lacking or unknown:
        raise InputError(f"{foreign} (it lacks the field {lacking[0]!r})" if lacking else
                         f"{foreign} (it has the unknown field {unknown[0]!r:.40}; expected some of: "
                         f"{', '.join(known)})")
    # each field named as `--from 'FILE': entries[0].rung`, as a results file's are (schema.validate)
    ladder = LadderFile(**{f.name: read_value(types[f.name], document[key], f"{where}: {key}", InputError)
                           for f, key in stored})
    return ladder.path, ladder.entries, [p.to_dict() for p in ladder.pairwise]


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


def _check_outputs(args: argparse.Namespace) -> None:
    """Before any work: each output its own file, none of them a `--from` file, each writable;
    `--json` only for a run that measures (with `--from` there is nothing new to keep)."""
    if args.sources and args.json:
        raise InputError(f"--json {args.json!r} keeps a measured run, and with --from nothing is "
                         "measured: drop --json (or --from)")
    if args.sources:  # the table is the files' own: what chooses a measurement would change nothing
        refuse_unread(args, ("presets", "rungs", "frameworks", "device", "timeout"),
                      "with --from, which reports the files' own measurements")
    outputs = {"--markdown": args.markdown, "--json": args.json}
    check_distinct(outputs)
    for source in args.sources or ():
        check_distinct(outputs, {"--from": source})
    for path in outputs.values():
        if path:
            check_output(path, args.force)


def run(args: argparse.Namespace) -> int:
    from shared.runtime.ladder import SCHEMA, LadderFile, markdown, measure

    _check_outputs(args)
    today = datetime.date.today().isoformat()
    outputs: dict[str, bytes] = {}
    if args.sources:
        paths, read_from = {}, {}
        for source in args.sources:  # every file read and checked before anything is printed
            label, measured, pairs = _load(source)
            if label in read_from:  # one would silently replace the other on the page
                raise InputError(f"--from {source!r} measured the path {label!r:.80} as {read_from[label]!r} "
                                 "did: give one file per arithmetic path")
            read_from[label] = source
            paths[label] = (measured, pairs)
        for label, (measured, _) in paths.items():
            _print(label, measured)
    else:
        presets = list(parse_list(args.presets or ",".join(PRESETS), tuple(PRESETS), "preset"))
        rungs = parse_list(args.rungs or ",".join(LOW_RUNGS), RUNGS, "rung")
        frameworks = parse_frameworks(args.frameworks, tuple(n for n in NATIVE if n in installed_ports()),
                                      offered=NATIVE)  # the ladder measures the parallel texts
        label = arithmetic_path()
        measured, pairs = measure(presets, frameworks, rungs, args.timeout or DEFAULT_TIMEOUT_S,
                                  args.device or DEVICE.default)
        _print(label, measured)
        paths = {label: (measured, pairs)}
        if args.json:
            document = {"schema": SCHEMA, "date": today, "path": label,
                        "entries": [m.to_dict() for m in measured], "pairwise": pairs}
            LadderFile.from_dict(document, "tolerances being written", InputError)  # as --from reads it
            outputs[args.json] = (json.dumps(document, indent=2) + "\n").encode()
    if args.markdown:
        outputs[args.markdown] = markdown(paths, today).encode()
    with Outputs(args.force) as staged:  # every output, or none
        for path, data in outputs.items():
            staged.add(path, data)
        staged.publish()
    return 0
