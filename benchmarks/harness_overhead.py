"""Harness overhead: the median compiled forward that `compare.py time` reports vs a bare
hand-written loop around the same compiled call, per framework.

    python benchmarks/harness_overhead.py [--spec archive-torch] [--batch 8] [--threads 1]
                                          [--frameworks torch,keras,flax] [--calls 200]

The bare loop runs in its own fresh process with the same thread pinning, builds the port the
same way, and times blocks of `--calls` back-to-back calls with one clock pair per block (no
per-call timer, no lambda, no stats): per-call time = block time / calls, median over 5 blocks.
Under contention the block means absorb every stall while compare.py's median skips them, so
the table also compares the best call with the best block (the least disturbed on each side).
Both use the warm torch.compile cache (compile time is not what is measured here).
A small spec is the hard case: the harness's fixed cost per call is a larger share of a short
call. This is a benchmark, not a test; on a shared CPU its numbers are noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def bare_loop(framework: str, spec_name: str, batch: int, threads: int, calls: int) -> dict:
    """Child process (pinned, threads and registry environment set by the launcher): build the
    port, then time blocks of bare calls to the compiled forward."""
    from ports import create_port
    from shared.core.inputs import probe_batch
    from shared.core.presets import get_preset
    from shared.core.weights import init_weights

    spec = get_preset(spec_name)
    port = create_port(framework, spec, device="cpu")
    port.load(init_weights(spec, seed=0))
    x = port.prepare(probe_batch(spec, batch=batch, seed=1234))
    fn = port.compiled_forward()
    sync = port.sync
    for _ in range(5):
        sync(fn(x))
    blocks = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            sync(fn(x))
        blocks.append((time.perf_counter() - start) / calls)
    blocks.sort()
    return {"framework": framework, "per_call_median": blocks[2], "blocks": blocks}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", default="archive-torch")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--frameworks", default="torch,keras,flax")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--bare", help=argparse.SUPPRESS)  # child mode
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare:
        result = bare_loop(args.bare, args.spec, args.batch, args.threads, args.calls)
        Path(args.out).write_text(json.dumps(result))
        return 0

    from shared.measure.runner import compile_cache_env
    from shared.runtime.launch import launch

    rows = []
    with tempfile.TemporaryDirectory(prefix="portbench-overhead-") as tmp:
        for fw in args.frameworks.split(","):
            print(f"  {fw}: compare.py time ...", file=sys.stderr, flush=True)
            results = os.path.join(tmp, f"{fw}.json")
            launch([str(ROOT / "compare.py"), "time", "--spec", args.spec, "--batch", str(args.batch),
                    "--threads", str(args.threads), "--frameworks", fw, "--modes", "compiled",
                    "--budget", "2", "--max-repeats", "1000", "--compile-cache", "warm",
                    "--json", results, "--no-chart"], None, None)
            print(f"  {fw}: bare loop ...", file=sys.stderr, flush=True)
            bare_out = os.path.join(tmp, f"{fw}-bare.json")
            launch([__file__, "--bare", fw, "--spec", args.spec, "--batch", str(args.batch),
                    "--threads", str(args.threads), "--calls", str(args.calls), "--out", bare_out], fw,
                   None, threads=args.threads, pin=True, env=compile_cache_env(tmp, "warm"))
            try:
                doc = json.loads(Path(results).read_text())
                phase = doc["runs"][0]["phases"]["forward_compiled"]
                bare = json.loads(Path(bare_out).read_text())
            except (OSError, KeyError, IndexError, json.JSONDecodeError) as exc:
                rows.append(f"| {fw} | failed: {type(exc).__name__} | | | |")
                continue
            ratio = phase["median"] / bare["per_call_median"]
            best = phase["min"] / min(bare["blocks"])
            rows.append(f"| {fw} | {phase['median'] * 1e3:.3f} (n={phase['n']}, IQR "
                        f"{phase['iqr'] * 1e3:.3f}) | {bare['per_call_median'] * 1e3:.3f} | {ratio:.3f} | "
                        f"{phase['min'] * 1e3:.3f} | {min(bare['blocks']) * 1e3:.3f} | {best:.3f} |")
    from shared.measure.stats import Budget, repeat, summarise

    class NoPort:  # what the worker wraps around every call, minus the call itself
        def sync(self, result: object = None) -> None:
            del result

    port = NoPort()
    floor = summarise(repeat(lambda: port.sync(None), Budget(warmup=100, min_repeats=10000,
                                                              max_repeats=10000, seconds=0)))
    print(f"\nharness floor (timing an empty synchronised call through shared.measure.stats): "
          f"median {floor['median'] * 1e9:.0f} ns, q3 {floor['q3'] * 1e9:.0f} ns")
    print(f"\n{args.spec}, batch {args.batch}, {args.threads} thread(s), compiled forward\n")
    print("| framework | compare.py median ms | bare loop ms/call (median of 5 blocks) | ratio | "
          "compare.py min ms | bare best block ms/call | ratio of bests |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
