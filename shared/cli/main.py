"""The bare `python compare.py`: one pass over the parallel texts (`ports.NATIVE`, the installed
ones) on the default spec. Each framework starts one fresh worker, whose equivalence gate (its
logits against the float64 reference, shared/core/equivalence.py's verdict) is the verification:
its verdict table prints first, as `compare.py verify` prints it, then the timing table. A port
that fails the gate is INVALID and not ranked.

Sized for about a minute on a 2-core CPU: 0.25 s of repeats per phase (at least 5 repeats, so
the median and IQR stay robust), two evaluation batches, and the torch.compile cache reused
across runs (`--compile-cache cold` for a first-compile time; the compile column says which),
and one round (`--processes 2` checks the rank order across rounds, at twice the time).
`--frameworks all` adds the other backends (keras-jax, keras-torch, onnx, ...). Besides the JSON,
CSV and chart it writes index.html beside the JSON (results/ unless --json says otherwise), one
self-contained page of the run: the main job's own file, replaced each run; a file of that name
it did not write is kept (refused without --force)."""

from __future__ import annotations

import argparse

from shared.cli._options import SPEC
from shared.cli.time import add_timing_arguments, run  # the main job is a timing run

ORDER = 0
HELP = "verify and time the parallel texts in one pass"


def register(sub: argparse._SubParsersAction) -> None:
    from ports import NATIVE

    parser = sub.add_parser("main", help=HELP,
                            description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    SPEC.add(parser)
    add_timing_arguments(parser, f"the installed ones of {','.join(NATIVE)}", budget=0.25, max_repeats=50,
                         eval_batches=2, processes=1, compile_cache="warm")
    parser.set_defaults(run=run, set=[], factorial=None, default_frameworks=NATIVE, print_verdicts=True,
                        html_index=True)
