"""The ports against the public implementations, then a small spec at a large batch:

    python benchmarks/peers_then_large_batch.py [--threads 2] [--repeats 5] [--processes 1] [--json FILE]

1. `compare.py peers --spec vit-b16 --batch 8` (shared/measure/peer_timing.py: timm eager and
   compiled, Transformers 4.x ViT in PyTorch / TensorFlow / Flax, keras-hub's ViT, each
   random-initialised on ViT-B/16 in its own pinned worker, ratios with the quartiles' range,
   the ports' share of their framework's fp32 GEMM rate);
2. archive-torch at batch 256, 1 thread, through `compare.py time` (where per-op overhead
   dominates).
A benchmark, not a test: on a shared CPU its numbers are noisy.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere: compare.py and shared/ beside it

import compare as cli


def compare(*args: str) -> int:
    """`python compare.py ARGS` in this process: its workers start through the one launcher."""
    return cli.main(list(args))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--json", help="write the peers results here")
    parser.add_argument("--skip-archive", action="store_true")
    args = parser.parse_args()
    peers = ["peers", "--spec", "vit-b16", "--batch", "8", "--threads", str(args.threads),
             "--repeats", str(args.repeats), "--processes", str(args.processes)]
    code = compare(*peers, *(["--json", args.json, "--force"] if args.json else []))
    if not args.skip_archive:
        print("\narchive-torch, batch 256, 1 thread (compare.py time):", flush=True)
        code = max(code, compare("time", "--spec", "archive-torch", "--batch", "256", "--threads", "1",
                                 "--modes", "eager,compiled", "--budget", "1", "--no-chart",
                                 "--json", str(ROOT / "results" / "archive256.json"), "--force"))
    return code


if __name__ == "__main__":
    sys.exit(main())
