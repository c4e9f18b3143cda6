"""Interleaved A/B of a port against its peer and against variants of itself, in ONE process.

    python benchmarks/ab_interleaved.py torch|keras|flax [--batch 2] [--rounds 5] [--threads 2]

On a shared CPU, separate processes see different co-tenants, so a 10-30% gap between two runs
can be the neighbours. Here every variant is built once and then called in turn, round after
round (A B C A B C ...), so all of them see the same contention; the table reports each
variant's median and its median ratio to the first variant over the rounds. Used to find *why*
a port is slower than its peer; the variants that are not the port's own code (another
attention path, another compiler setting) are built here, without editing the port.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from shared.runtime.process_env import pin_cpus, thread_env, transformers4_env

Variants = list[tuple[str, Callable[[], Any]]]


def port_and_input(name: str, spec: Any, batch: int) -> tuple[Any, Any, Any]:
    """(the port with seed-0 weights, its prepared input, the NHWC images it was prepared from)."""
    from ports import create_port
    from shared.core.inputs import probe_batch
    from shared.core.weights import init_weights

    port = create_port(name, spec, device="cpu")
    port.load(init_weights(spec, seed=0))
    images = probe_batch(spec, batch=batch)
    return port, port.prepare(images), images


def peer(family: str, spec: Any, images: Any, mode: str, threads: int) -> Callable[[], Any]:
    """`compare.py peers`' own peer of `spec`: built by its checkpoint library's plug-in and run
    as `peers` runs it (ports/public_models.py), so the variants time the model the port computes."""
    from ports.public_models import BUILDERS
    from shared.measure.peer_timing import peer_model

    call, _ = BUILDERS[family](spec, images, mode, threads, peer_model(family, spec))
    return call


def torch_variants(spec: Any, batch: int, threads: int) -> Variants:
    port, x, images = port_and_input("torch", spec, batch)  # its forward runs without gradients
    return [("port eager", lambda: port.forward(x)),
            ("timm eager", peer("timm", spec, images, "eager", threads))]


def keras_variants(spec: Any, batch: int, threads: int) -> Variants:
    import tensorflow as tf

    port, x, images = port_and_input("keras", spec, batch)
    graph = tf.function(lambda t: port.model(t, training=False), jit_compile=False)
    xla = tf.function(lambda t: port.model(t, training=False), jit_compile=True)
    return [("port tf.function (graph)", lambda: graph(x).numpy()),
            ("port tf.function (XLA)", lambda: xla(x).numpy()),
            ("port eager", lambda: port.to_numpy(port.forward(x))),
            ("keras-hub predict_on_batch", peer("keras-hub", spec, images, "predict", threads)),
            ("keras-hub tf.function(jit_compile=False)", peer("keras-hub", spec, images, "graph", threads)),
            ("Transformers TFViT tf.function", peer("hf-tf", spec, images, "graph", threads))]


def flax_variants(spec: Any, batch: int, threads: int) -> Variants:
    import jax
    from flax import nnx

    port, x, images = port_and_input("flax", spec, batch)
    highest = port.compiled_forward()  # the port pins 'highest' matmul precision
    graphdef, state = nnx.split(port.model)

    @jax.jit
    def default_precision(state: Any, t: Any) -> Any:
        with jax.default_matmul_precision("default"):
            return nnx.merge(graphdef, state)(t)

    return [("port jax.jit ['highest' precision]", lambda: highest(x).block_until_ready()),
            ("port jax.jit, 'default' precision", lambda: default_precision(state, x).block_until_ready()),
            ("Transformers FlaxViT jax.jit", peer("hf-flax", spec, images, "jit", threads))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("framework", choices=("torch", "keras", "flax"))
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    os.environ.update(thread_env(args.threads))
    pin_cpus(args.threads)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if args.framework == "keras":
        os.environ["KERAS_BACKEND"] = "tensorflow"
        os.environ.update(USE_TORCH="0", USE_FLAX="0")  # Transformers: TF only (torch after TF crashes)
    if args.framework in ("keras", "flax"):  # their Transformers peer is a 4.x class (TF, Flax)
        side = transformers4_env()  # {}: 4.x is installed; None: neither, and the peer says so
        sys.path[:0] = [side["PYTHONPATH"]] if side else []
    from shared.core.presets import get_preset
    from shared.errors import PortbenchError

    spec = get_preset("vit-b16")
    try:
        variants = {"torch": torch_variants, "keras": keras_variants, "flax": flax_variants}[args.framework](
            spec, args.batch, args.threads)
    except PortbenchError as exc:  # a peer that cannot be built here
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for _, call in variants:  # first call (compile) and one warm-up each, untimed
        call()
        call()
    times: dict[str, list[float]] = {name: [] for name, _ in variants}
    for _ in range(args.rounds):
        for name, call in variants:
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    base = variants[0][0]
    print(f"\nvit-b16, batch {args.batch}, {args.threads} threads, {args.rounds} interleaved rounds\n")
    print("| variant | median s | ratio to first (median over rounds) |")
    print("|---|---:|---:|")
    for name, _ in variants:
        ratio = statistics.median(a / b for a, b in zip(times[name], times[base], strict=True))
        print(f"| {name} | {statistics.median(times[name]):.3f} | {ratio:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
