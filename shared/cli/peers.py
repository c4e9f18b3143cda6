"""`compare.py peers [--spec S] [--batch 8] [--threads 2] [--frameworks ...]`: each port against
the public implementation a user would pick instead, in one run (shared/measure/peer_timing.py):

  torch eager    vs timm eager and Transformers' PyTorch class (eager; the towers' own too)
  torch compiled vs timm under torch.compile
  flax compiled  vs Transformers' FlaxViT under jax.jit
  keras compiled vs keras-hub's class (predict_on_batch, and in a tf.function) and Transformers'
                 TFViT in a tf.function

Every implementation is random-initialised on the model the spec describes (nothing is
downloaded), in its own fresh, pinned worker, on the same images, batch and threads, on the CPU
(no worker is shown a GPU). Prints each
one's median ± IQR/2, its analytic GFLOP/s (the ports: and its share of their framework's fp32
GEMM rate), and port / peer ratios with the range the quartiles allow. The sequence runs in
several interleaved rounds (--processes, default 3) and a ratio is printed only where no round of
either side was contended and the per-round ratios agree (docs/timing.md); otherwise the pair is
"not comparable: <why>". Above 1.05, with its range above 1, it says what differs: each side's
mode and threads, and the A/B finding where one was measured. keras-hub and Transformers'
TF ViT need packages installed beside Keras 3 without their dependencies (see the one-line
command printed when they are missing); Transformers' TF and Flax ViT are 4.x's, run from its side
directory where 5 is installed (`make` puts it there). A benchmark: on a shared CPU its numbers are noisy.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from shared.cli._options import (
    BATCH,
    DEVICE,
    FORCE,
    FRAMEWORKS,
    JSON,
    MODES,
    PROCESSES,
    SET,
    SPEC,
    THREADS,
    TIMEOUT,
    positive_int,
)
from shared.core.terminal import wrap

ORDER = 44
HELP = "each port against timm, Transformers and keras-hub, in one run"
PORTED = ("torch", "keras", "flax")  # the ports that have peers


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("peers", help=HELP,
                            description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    SPEC.add(parser, note="default: vit-b16")
    SET.add(parser)
    FRAMEWORKS.add(parser, note=f"default: {','.join(PORTED)}, the ports with peers")
    MODES.add(parser, default="eager,compiled")
    BATCH.add(parser, default=8)
    THREADS.add(parser, default=2)
    DEVICE.add(parser, note="peers: cpu, where every implementation runs; auto chooses it")
    parser.add_argument("--repeats", type=positive_int, default=5,
                        help="timed calls per process, at least (default 5; a fast forward repeats for "
                             "0.25 s, so other processes' CPU use over it can be measured)")
    PROCESSES.add(parser, "the whole sequence again; a ratio is printed only where no round was contended "
                  "and the rounds agree", default=3)
    TIMEOUT.add(parser, default=900.0)
    JSON.add(parser, "every report and ratio")
    FORCE.add(parser, "an existing --json file")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from shared.cli._common import read_files
    from shared.cli._lists import parse_frameworks, parse_list
    from shared.cli.time import progress
    from shared.core.budget import check_fits, check_work
    from shared.core.files import check_output, write_output
    from shared.core.paths import check_distinct
    from shared.core.presets import resolve_spec
    from shared.errors import FrameworkUnavailable, InputError, SpecError

    # every argument checked before the timing tool is imported: a refused one imports no tool
    if args.device not in ("cpu", "auto"):  # the peers run on the CPU (peer_timing.CPU_ONLY): a port
        raise InputError(f"--device {args.device!r}: peers times every implementation on the CPU, where the "
                         "public implementations are built, so a port on another device would be compared "
                         "with them; expected cpu (or auto)")
    if args.device == "auto":  # only auto chooses, and says what it chose
        print("device auto: peers runs every implementation on the cpu", file=sys.stderr)
        args.device = "cpu"
    spec = resolve_spec(args.spec or "vit-b16", args.set)
    check_fits(spec, args.batch, "a peers run")
    check_work("--repeats", args.repeats)
    check_work("--processes", args.processes)
    frameworks = parse_frameworks(args.frameworks, PORTED, offered=PORTED)
    from shared.measure.stats import check_repeats

    check_repeats("--repeats", args.repeats)
    modes = parse_list(args.modes, ("eager", "compiled"), "mode")
    check_distinct({"--json": args.json}, read_files(args))
    if args.json:
        check_output(args.json, args.force)
    from shared.measure import peer_timing
    from shared.measure.contention import CONTENDED, MIN_WALL_S
    from shared.measure.rounds import SPREAD
    from shared.measure.stats import Budget

    peer_timing.check_expressible(spec)
    impls, missing, refused = peer_timing.plan(frameworks, modes, spec)
    no_peer = not any(not i.name.startswith("port:") for i in impls)
    if no_peer and not missing:
        raise SpecError(f"no peer of {', '.join(frameworks)} can build spec {spec.name!r}: "
                        + "; ".join(refused))
    if missing:
        print(f"not installed: {'; '.join(missing)}; install with: {peer_timing.INSTALL}", file=sys.stderr)
    if refused:
        print(f"left out, they cannot build spec {spec.name!r}: {'; '.join(refused)}", file=sys.stderr)
    if no_peer:
        raise FrameworkUnavailable("no peer implementation is installed; install with: "
                                   f"{peer_timing.INSTALL}")
    # At least --repeats calls, and on until the probe of other processes' CPU use can resolve the
    # span (contention.MIN_WALL_S): a 1 ms forward timed 5 times would never be judged.
    budget = Budget(warmup=1, min_repeats=args.repeats, max_repeats=max(args.repeats, 1000),
                    seconds=MIN_WALL_S + 0.05)
    job = peer_timing.job_config(args.batch, args.threads, args.device, budget)
    progress(f"peers on {spec.name}, batch {args.batch}, {args.threads} thread(s), fp32: "
             f"{', '.join(i.name for i in impls)}")
    results = peer_timing.run_peers(spec, impls, job, args.processes, args.timeout, progress)
    found = peer_timing.ratios(results)
    print(report_text(spec, args, results, found))
    if args.json:
        # the thresholds the decisions in this file were taken with
        rule = {"contended_above": CONTENDED, "spread": SPREAD, "differs_above": peer_timing.DIFFERS_ABOVE}
        document = {"spec": spec.to_dict(), "batch": args.batch, "threads": args.threads,
                    "rounds": args.processes, "rule": rule, "results": results, "ratios": found}
        write_output(args.json, (json.dumps(document, indent=1, default=str) + "\n").encode(),
                     force=args.force)
        print(f"wrote {args.json}")
    return 1 if any(r.get("error") for r in results.values()) else 0


def report_text(spec: Any, args: argparse.Namespace, results: dict[str, dict[str, Any]],
                found: list[dict[str, Any]]) -> str:
    from shared.core.terminal import format_table
    from shared.measure.output import fmt_seconds
    from shared.measure.roofline import above_roof
    from shared.measure.rounds import contended_rounds, gemm_warning

    rows, notes = [], []
    for name, r in results.items():
        busy = contended_rounds(name, r.get("rounds") or [])
        if busy:
            notes.extend(wrap(f"{name}: CONTENDED: other processes used its CPUs while it was timed: "
                              f"{', '.join(busy)}"))
        if r.get("error"):
            rows.append([name, "-", "-", "-", "-", "-", "FAILED"])
            notes.extend(wrap(f"{name}: {r['error']}"))
            continue
        gemm = r.get("gemm") or {}
        rate = gemm.get("gflops")
        warning = gemm_warning(name, gemm) if rate else None
        above = above_roof(name, r["gflops"], gemm)  # `!`: the ceiling was not timed as the forward runs
        roof = (f"{100 * r['gflops'] / rate:.0f}%{'?' if warning else ''}{'!' if above else ''} of "
                f"{rate:.3g}") if rate else "-"
        notes.extend([*(wrap(warning) if warning else []), *(wrap(above) if above else [])])
        if r.get("unread"):  # left out of its count, as the spec's count leaves them out
            unread = ", ".join(r["unread"])
            notes.extend(wrap(f"{name}: params leave out {unread}, which its forward never reads"))
        rows.append([name + (" CONTENDED" if busy else ""), f"{fmt_seconds(r['median'])} ±"
                     f"{fmt_seconds(r['iqr'] / 2)}", str(r["n"]), f"{r['params']:,}", f"{r['gflops']:.3g}",
                     roof, fmt_seconds(r["first_call_s"])])
    head = (f"\n{spec.name} ({spec.spec_hash}), batch {args.batch}, {args.threads} thread(s), fp32, "
            f"{args.processes} round(s), interleaved")
    table = format_table(["implementation", "forward", "n", "params", "GFLOP/s", "fp32 GEMM roof",
                          "1st call"], rows)
    lines = [line for r in found for line in ratio_lines(r)]
    legend = wrap("port / peer, median ratio (quartile range; < 1: the port is faster), printed only where "
                  "no round was contended and the rounds agree (uncontended rounds that disagree, each "
                  "on the same side of 1: their range, no median):")
    lines = lines or ["  none: no port and peer both finished"]
    return "\n".join([head, table, *notes, "", *legend, *lines])


def ratio_lines(r: dict[str, Any]) -> list[str]:
    """One ratio: the number where the rounds' rule allows it, the per-round range where the rounds
    disagree on one side of 1 (no median), else why not; then what differs."""
    from shared.measure.rounds import one_side_text

    pair = f"{r['port']} / {r['peer']}"
    if not r["comparable"]:
        return wrap(f"  {pair}: {one_side_text(r) or 'not comparable: ' + r['why']}")
    rounds = (f"; rounds {', '.join(f'{x:.2f}' for x in r['per_round'])}" if r["checked"]
              else " (1 round: agreement not checked)")
    lines = wrap(f"  {pair}: {r['ratio']:.2f}x ({r['low']:.2f}-{r['high']:.2f}){rounds}")
    differs = r.get("differs")
    if differs:
        for side, name in (("port", r["port"]), ("peer", r["peer"])):
            used = differs[side]["threads_used"] or {}
            threads = ", ".join(f"{k} {v}" for k, v in used.items() if k != "affinity")
            lines += wrap(f"    {name} ran {differs[side]['runs_as']}; threads: {threads or 'n/a'}, "
                          f"CPUs {used.get('affinity')}")
        lines += wrap(f"    finding: {differs['finding'] or 'none measured yet for this pair'}")
    return lines
