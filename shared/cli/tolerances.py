"""`compare.py tolerances`: measure the precision ladder (shared/runtime/ladder.py) — every
preset in every native port at every low rung against float64 and pairwise — and print the
bounds it implies for shared/core/tolerance.py; `--markdown` writes docs/tolerances.md."""

from __future__ import annotations

import argparse
import datetime
import json

from ports import NATIVE, installed, parse_frameworks
from shared.cli._options import add_device, add_timeout
from shared.core.files import check_output, write_output
from shared.core.precision import LOW_RUNGS, RUNGS
from shared.core.presets import PRESETS
from shared.core.tolerance import SAFETY
from shared.errors import SpecError

ORDER = 45


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("tolerances", help="measure every rung of the precision ladder against float64")
    parser.add_argument("--presets", help="comma-separated (default: every preset)")
    parser.add_argument("--frameworks", help="comma-separated (default: every installed native port)")
    parser.add_argument("--rungs", help=f"comma-separated, of {','.join(RUNGS)} "
                                        f"(default: {','.join(LOW_RUNGS)}; tf32 needs --device cuda)")
    add_device(parser, "cpu")
    add_timeout(parser, 3600.0)
    parser.add_argument("--markdown", help="write the measurements as a Markdown page here")
    parser.add_argument("--json", help="write every measurement here")
    parser.add_argument("--force", action="store_true", help="replace existing output files")
    parser.set_defaults(run=run)


def _names(text: str | None, allowed: tuple[str, ...], what: str) -> list[str]:
    names = [n.strip() for n in (text or ",".join(allowed)).split(",") if n.strip()]
    for n in names:
        if n not in allowed:
            raise SpecError(f"--{what} {n!r}: expected one of {', '.join(allowed)}")
    return names


def run(args: argparse.Namespace) -> int:
    from shared.runtime.ladder import markdown, measure, summary

    presets = _names(args.presets, tuple(PRESETS), "presets")
    rungs = tuple(_names(args.rungs or ",".join(LOW_RUNGS), RUNGS, "rungs"))
    native = tuple(n for n in NATIVE if installed()[n] is None)
    frameworks = parse_frameworks(args.frameworks, native)
    for path in (args.markdown, args.json):
        if path:
            check_output(path, args.force)
    measured, pairs = measure(presets, frameworks, rungs, args.timeout, args.device)
    for m in measured:
        gap = "-" if m.gap is None else f"{m.gap:.2e}"
        print(f"{m.spec:24} {m.rung:15} {m.framework:6} {gap:>9}  {m.status}"
              + (f": {m.reason}" if m.status == "UNAVAILABLE" else ""))
    print(f"\nmeasured (smallest, largest) normalised gap; bound = largest x {SAFETY:g}:")
    for rung, sizes in summary(measured).items():
        print(f"  {rung!r}: " + ", ".join(f"{size!r}: ({low:.2e}, {high:.2e})" for size, (low, high)
                                         in sorted(sizes.items())))
    today = datetime.date.today().isoformat()
    if args.markdown:
        write_output(args.markdown, markdown(measured, pairs, today).encode(), force=args.force)
    if args.json:
        document = {"schema": "portbench.tolerances/1", "date": today,
                    "entries": [vars(m) for m in measured], "pairwise": pairs}
        write_output(args.json, (json.dumps(document, indent=2) + "\n").encode(), force=args.force)
    return 0
