"""The bare `python compare.py`: verify every installed port against the reference, then time the
default spec with every installed port on the best device and print one table. Sized to finish
in about two minutes on a 2-core CPU: short per-phase budgets, and a reused torch.compile cache
(the compile column is then a warm-cache time, which the results file records)."""

from __future__ import annotations

import argparse

from shared.cli.time import add_timing_arguments

ORDER = 0


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("main", help="verify, then time the default spec with every installed port")
    parser.add_argument("--spec", help="preset name, spec file or JSON (default: the default preset)")
    parser.add_argument("--skip-verify", action="store_true", help="time without verifying first")
    add_timing_arguments(parser)
    parser.set_defaults(run=run, overrides=[], factorial=None, budget=0.5, eval_batches=2,
                        compile_cache="warm", max_repeats=50)


def run(args: argparse.Namespace) -> int:
    from shared.cli import time as time_cli
    from shared.cli.verify import main_verify

    if not args.skip_verify:
        code = main_verify()
        if code != 0:
            print("verification failed: not timing (run `compare.py time` to time anyway)")
            return code
    return time_cli.run(args)
