"""`compare.py divergences [NAME]`: the catalogue, with each framework's default read from the
installed frameworks and the measured gap of each demonstration (shared/teaching/divergences.py)."""

from __future__ import annotations

import argparse

from shared.cli._common import add_json_arg, check_outputs, write_json
from shared.cli._options import non_empty, refuse_unread
from shared.errors import SpecError

ORDER = 60
HELP = "the catalogue of silent framework differences, measured"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "divergences", help=HELP,
        description="Each entry: what differs, the installed frameworks' defaults, the pin, and "
                    "the logit (or update/loss) gap with and without the pin.")
    p.add_argument("name", type=non_empty, nargs="?",
                   help="one entry (default: all); `--list` shows the names")
    p.add_argument("--list", action="store_true", help="list entry names and exit")
    p.add_argument("--no-demo", action="store_true", help="skip the demonstrations (defaults only)")
    add_json_arg(p, "one object per entry")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.list:
        refuse_unread(args, ("name", "json", "no_demo"), "with --list, which prints the entries' names")
    check_outputs(args)
    from shared.teaching.divergences import CATALOGUE, entry

    if args.list:
        for e in CATALOGUE:
            print(f"{e.key:22s} {e.kind:9s} {e.title}")
        return 0
    if args.name:
        try:
            entries = [entry(args.name)]
        except KeyError:
            raise SpecError(f"divergence {args.name!r} is unknown; expected one of: "
                            f"{', '.join(e.key for e in CATALOGUE)}") from None
    else:
        entries = list(CATALOGUE)
    payload = []
    for e in entries:
        defaults = e.defaults()
        print(f"== {e.key}: {e.title}  [{e.kind}]")
        print(f"   differs: {e.differs}")
        for fw, value in defaults.items():
            print(f"   {fw:6s} default: {value}")
        print(f"   pinned by: {e.pin}")
        item = {"key": e.key, "title": e.title, "kind": e.kind, "differs": e.differs,
                "defaults": defaults, "pin": e.pin, "rows": e.rows}
        if not args.no_demo:
            demo = e.run_demo()
            gap = "n/a" if demo.gap is None else f"{demo.gap:.3g}"
            print(f"   measured gap: {gap}  (ran with {', '.join(demo.ran_with) or 'nothing'})")
            for line in demo.lines:
                print(f"     - {line}")
            item.update({"gap": demo.gap, "measurements": demo.lines, "ran_with": demo.ran_with})
        payload.append(item)
        print()
    if args.json:
        write_json(args.json, payload, args.force)
    return 0
