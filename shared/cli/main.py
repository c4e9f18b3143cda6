"""The bare `python compare.py`: verify the default spec with every installed port (the timing
issue extends this to verify, then time)."""

from __future__ import annotations

import argparse

ORDER = 0


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("main", help="verify the default spec with every installed port")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from shared.cli.verify import main_verify

    return main_verify()
