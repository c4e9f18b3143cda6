"""`compare.py lessons [NAME]`: the four native ports' own code side by side for each divergence, with
the measured gap and the pin (shared/teaching/lessons.py); after them (or alone, `--rungs`) which
forward divergences an equivalence test still catches at each precision rung
(shared/teaching/detectability.py)."""

from __future__ import annotations

import argparse
import shutil
from typing import TYPE_CHECKING

from shared.cli._common import add_json_arg, check_outputs, write_json, write_json_and_page
from shared.cli._options import HTML, columns, non_empty, refuse_unread
from shared.errors import SpecError

if TYPE_CHECKING:  # the teaching tool is imported when a lesson runs, never by --help or a refusal
    from shared.teaching.detectability import Row

ORDER = 64
HELP = "the ports' code side by side where frameworks differ, with measured gaps"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "lessons", help=HELP,
        description="Each lesson extracts the relevant code from ports/torch, ports/keras, "
                    "ports/flax and ports/mlx (with ast, when run: it cannot drift from the ports), "
                    "and shows the catalogue's measured gap and the spec field that pins it.")
    p.add_argument("name", type=non_empty, nargs="?",
                   help="one lesson (default: all); `--list` shows the names")
    p.add_argument("--list", action="store_true", help="list the lessons and exit")
    p.add_argument("--no-measure", action="store_true", help="skip the gap measurements")
    p.add_argument("--rungs", action="store_true", help="only the table of which forward divergences "
                   "an equivalence test still catches at each precision rung (NAME: that entry's rows)")
    p.add_argument("--markdown", action="store_true", help="with --rungs: the table in Markdown, as "
                   "docs/teaching.md shows it")
    p.add_argument("--width", type=columns, help="output width (default: the terminal's, at least 150)")
    add_json_arg(p, "one object per lesson", "existing --json/--html files")
    HTML.add(p, "the code side by side with highlighting, the measured gaps and the rosetta table")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.list:
        refuse_unread(args, ("name", "json", "html", "rungs", "markdown", "no_measure", "width"),
                      "with --list, which prints the lessons' names")
    if args.rungs:
        refuse_unread(args, ("html", "width"), "with --rungs, whose table --json keeps")
    else:
        refuse_unread(args, ("markdown",), "without --rungs (it prints the rungs table in Markdown)")
    check_outputs(args)
    from shared.teaching import detectability
    from shared.teaching.lessons import LESSONS, build_view, lesson, library_columns, side_by_side

    if args.list:
        for item in LESSONS:
            print(f"{item.name:22s} {item.point}")
        return 0
    if args.rungs:
        return run_rungs(args)
    if args.name:
        try:
            chosen = [lesson(args.name)]
        except KeyError:
            raise SpecError(f"lesson {args.name!r} is unknown; expected one of: "
                            f"{', '.join(x.name for x in LESSONS)}") from None
    else:
        chosen = list(LESSONS)
    width = args.width or max(150, shutil.get_terminal_size((180, 40)).columns)
    payload = []
    for item in chosen:
        view = build_view(item, measure=not args.no_measure)
        print(f"== {item.name}: {view.title}")
        print(f"   {item.point}")
        for line in side_by_side(view.code, width):
            print(f"   {line}")
        if view.library_code:
            print("   the libraries' own code (read from the installed files):")
            for line in side_by_side(library_columns(view), width):
                print(f"   {line}")
        if view.gap is not None:
            print(f"   measured gap without the pin: {view.gap:.3g}")
            for m in view.measurements:
                print(f"     - {m}")
        print(f"   pinned by: {view.pin}")
        print()
        payload.append(view.to_dict())
    if not args.name and not args.no_measure:
        print_rungs(detectability.rows())
    def page() -> str:
        from shared.report.pages import lessons_page
        from shared.teaching.rosetta import rosetta_markdown

        return lessons_page(payload, rosetta_markdown())

    write_json_and_page(args, payload, page)
    return 0


def print_rungs(measured: tuple[list[Row], list[str]]) -> None:
    from shared.teaching import detectability

    print("== what an equivalence test can still see at each rung")
    print("   each forward divergence's float64 logit gap / max(1, max |logit|) against each rung's bound")
    for line in detectability.text_table(*measured):
        print(f"   {line}")
    print()


def run_rungs(args: argparse.Namespace) -> int:
    from shared.teaching import detectability

    if args.name and args.name not in detectability.forward_entries():  # before measuring anything
        raise SpecError(f"{args.name!r} is not a forward divergence; expected one of: "
                        f"{', '.join(detectability.forward_entries())}")
    table, same = detectability.rows(run_demos=not args.no_measure, only=args.name)
    if args.markdown:
        print("\n".join(detectability.markdown_table(table)))
    else:
        print_rungs((table, same))
    if args.json:
        write_json(args.json, [r.to_dict() for r in table], args.force)
    return 0
