"""The ports against the best public implementation in the same framework, side by side in one run.

    python benchmarks/peers.py [--threads 2] [--repeats 3] [--only IMPL,...] [--json FILE]

ViT-B/16, batch 8, fp32, the same thread count and CPU pinning for all; every implementation in
its own fresh process (benchmarks/_impls.py), randomly initialised, nothing downloaded. Reports
each as seconds per batch, as a ratio to its peer, and as a fraction of the measured fp32 GEMM
rate, with FLOPs counted analytically (shared/measure/flops.py: 35.13 GFLOP per 224² image).

Peers: torch port vs timm (eager and torch.compile); Flax port under jax.jit vs Transformers 4.x
FlaxViTModel under jax.jit; Keras port vs keras-hub's ViT and Transformers 4.x TFViTModel in a
tf.function. Needs `pip install --no-deps keras-hub tf_keras` for the last two.

Then the small `archive-torch` spec at batch 256 (where per-op overhead dominates) through
`compare.py time`. This is a benchmark, not a test: on a shared CPU its numbers are noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from shared.core.presets import get_preset  # noqa: E402
from shared.measure.flops import forward_flops  # noqa: E402
from shared.measure.runner import compile_cache_env  # noqa: E402
from shared.runtime.launch import launch  # noqa: E402

# (implementation, its peer or None, extra environment)
IMPLS: list[tuple[str, str | None, dict[str, str]]] = [
    ("matmul:torch", None, {}),
    ("matmul:tf", None, {}),
    ("matmul:jax", None, {}),
    ("timm:eager", None, {}),
    ("timm:compile", None, {}),
    ("hf-flax", None, {"USE_FLAX": "1", "USE_TF": "0", "USE_TORCH": "0"}),
    ("hf-tf", None, {"USE_TF": "1", "USE_FLAX": "0", "USE_TORCH": "0", "TF_USE_LEGACY_KERAS": "1"}),
    ("keras-hub", None, {"KERAS_BACKEND": "tensorflow"}),
    ("port:torch:eager", "timm:eager", {}),
    ("port:torch:compiled", "timm:compile", {}),
    ("port:flax:compiled", "hf-flax", {}),
    ("port:keras:compiled", "keras-hub", {"KERAS_BACKEND": "tensorflow"}),
    ("port:keras:tf-function", "keras-hub", {"KERAS_BACKEND": "tensorflow"}),
    ("port:keras:eager", "keras-hub", {"KERAS_BACKEND": "tensorflow"}),
]
SECOND_PEER = {"port:keras:compiled": "hf-tf", "port:keras:tf-function": "hf-tf"}
# The registry entry whose launch environment each implementation's family gets.
ENTRY = {"torch": "torch", "timm": "torch", "flax": "flax", "hf-flax": "flax", "jax": "flax",
         "keras": "keras", "keras-hub": "keras", "hf-tf": "keras", "tf": "keras"}
OWN_GEMM = {"torch": "matmul:torch", "timm": "matmul:torch", "hf-flax": "matmul:jax", "flax": "matmul:jax",
            "hf-tf": "matmul:tf", "keras-hub": "matmul:tf", "keras": "matmul:tf"}


def run_impl(impl: str, extra_env: dict[str, str], args: argparse.Namespace, workdir: str) -> dict[str, Any]:
    out = os.path.join(workdir, impl.replace(":", "_") + ".json")
    env = {**compile_cache_env(os.path.join(workdir, impl.replace(":", "_"))), **extra_env}
    repeats = 5 if impl.startswith("matmul") else args.repeats
    cmd = [str(ROOT / "benchmarks" / "_impls.py"), impl, "--threads", str(args.threads),
           "--batch", str(args.batch), "--repeats", str(repeats), "--out", out]
    print(f"  {impl} ...", file=sys.stderr, flush=True)
    entry = ENTRY[impl.split(":")[1] if impl.split(":")[0] in ("port", "matmul") else impl.split(":")[0]]
    done = launch(cmd, entry, args.timeout, threads=args.threads, pin=True, env=env)
    if done.error or not os.path.exists(out):
        return {"impl": impl, "error": (done.error or "no result written")[:200]}
    return json.loads(Path(out).read_text())


def family(impl: str) -> str:
    parts = impl.split(":")
    return parts[1] if parts[0] == "port" else parts[0]


def table(results: dict[str, dict[str, Any]], flops: float) -> str:
    gemm = {k: 2048**3 * 2 / r["median"] for k, r in results.items()
            if k.startswith("matmul") and "median" in r}
    roof = max(gemm.values()) if gemm else None
    lines = ["| implementation | s/batch (median) | IQR | n | first call s | GFLOP/s | % of best GEMM | "
             "% of own-fw GEMM | cpu util | vs peer |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for impl, peer, _ in IMPLS:
        r = results.get(impl)
        if r is None:
            continue
        if "error" in r:
            lines.append(f"| {impl} | {r['error']} | | | | | | | | |")
            continue
        if impl.startswith("matmul"):
            rate = gemm[impl]
            lines.append(f"| {impl} (2048³ GEMM) | {r['median']:.4f} | {r['iqr']:.4f} | {r['n']} | "
                         f"{r['first_call_s']:.2f} | {rate / 1e9:.0f} | {100 * rate / roof:.0f}% | | "
                         f"{r['cpu_util']:.2f} | |")
            continue
        rate = flops / r["median"]
        own = gemm.get(OWN_GEMM.get(family(impl), ""))
        peers = [p for p in (peer, SECOND_PEER.get(impl)) if p and "median" in results.get(p, {})]
        ratio = ", ".join(f"{r['median'] / results[p]['median']:.2f}x {p}" for p in peers) or "-"
        lines.append(f"| {impl} | {r['median']:.3f} | {r['iqr']:.3f} | {r['n']} | {r['first_call_s']:.1f} | "
                     f"{rate / 1e9:.0f} | {100 * rate / roof:.0f}% | "
                     f"{'-' if own is None else f'{100 * rate / own:.0f}%'} | {r['cpu_util']:.2f} | "
                     f"{ratio} |")
    return "\n".join(lines)


def archive_small_batch(args: argparse.Namespace, workdir: str) -> str:
    """archive-torch at batch 256 through compare.py itself (eager and compiled, 1 thread)."""
    out = os.path.join(workdir, "archive256.json")
    cmd = [str(ROOT / "compare.py"), "time", "--spec", "archive-torch", "--batch", "256",
           "--threads", "1", "--modes", "eager,compiled", "--budget", "1", "--json", out, "--no-chart"]
    print("  archive-torch batch 256 via compare.py time ...", file=sys.stderr, flush=True)
    lines: list[str] = []
    done = launch(cmd, None, args.timeout * 3, echo=lines.append)
    return "\n".join(lines).strip() or str(done.error)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--only", help="comma-separated implementations (default: all)")
    parser.add_argument("--skip-archive", action="store_true")
    parser.add_argument("--json", help="write the raw results here")
    args = parser.parse_args()
    only = set(args.only.split(",")) if args.only else None
    flops = float(forward_flops(get_preset("vit-b16"), args.batch))
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="portbench-peers-") as workdir:
        for impl, _, extra in IMPLS:
            if only is None or impl in only or impl.startswith("matmul"):
                results[impl] = run_impl(impl, extra, args, workdir)
        print(f"\nViT-B/16, batch {args.batch}, fp32, {args.threads} thread(s) pinned; "
              f"{flops / 1e9:.1f} GFLOP per batch (analytic)\n")
        print(table(results, flops))
        if not args.skip_archive:
            print("\narchive-torch, batch 256, 1 thread (compare.py time):\n")
            print(archive_small_batch(args, workdir))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
