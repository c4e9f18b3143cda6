"""`compare.py rosetta`: generate (or check) docs/rosetta.md, every spec field mapped to the
torch, Keras, Flax and MLX code that implements it (shared/teaching/rosetta.py)."""

from __future__ import annotations

import argparse
import os

from shared.core.files import read_text, write_output

ORDER = 65
HELP = "docs/rosetta.md: spec fields -> torch / Keras / Flax / MLX code"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "rosetta", help=HELP,
        description="Print the Rosetta table generated from the ports' source; --write updates "
                    "docs/rosetta.md, --check exits 1 when the file is stale.")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help="write docs/rosetta.md")
    group.add_argument("--check", action="store_true", help="exit 1 if docs/rosetta.md is stale")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from shared.teaching.port_source import ROOT
    from shared.teaching.rosetta import ROSETTA, rosetta_markdown

    text = rosetta_markdown()
    if args.write:
        ROSETTA.parent.mkdir(exist_ok=True)
        write_output(ROSETTA, text.encode(), force=True)  # the generated page, replaced atomically
        print(f"wrote {ROSETTA.relative_to(ROOT)}")
        return 0
    if args.check:
        # missing: stale; anything but a UTF-8 regular file (a folder, a FIFO): one line naming it
        page = f"--check: the page {str(ROSETTA)!r}"
        current = read_text(ROSETTA, page) if os.path.lexists(ROSETTA) else ""
        if current != text:
            print(f"{ROSETTA.relative_to(ROOT)} is stale: run `python compare.py rosetta --write`")
            return 1
        print(f"{ROSETTA.relative_to(ROOT)} is up to date")
        return 0
    print(text, end="")
    return 0
