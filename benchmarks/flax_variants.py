"""Why the Flax port is not ahead of Transformers' FlaxViTModel: the port vs hand-written JAX
forwards of the same vit-b16 function (same canonical weights), interleaved in one process.

    python benchmarks/flax_variants.py [--batch 2] [--rounds 5] [--threads 2]

Variants differ in one thing each: q/k/v as three (D, H·hd) projections (what nnx.MultiHeadAttention
and HF do) or one packed (D, 3·H·hd) projection (what timm does), and the attention as explicit
einsum + softmax or `jax.nn.dot_product_attention`. The 'separate + einsum' variant is the
control: it should time like the port. Each variant is checked against the port's logits first.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from shared.runtime.process_env import pin_cpus, thread_env


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    os.environ.update(thread_env(args.threads))
    pin_cpus(args.threads)

    import jax
    import jax.numpy as jnp
    import numpy as np

    from ports import create_port
    from shared.core.inputs import probe_batch
    from shared.core.presets import get_preset
    from shared.core.weights import init_weights

    spec = get_preset("vit-b16")
    tensors = init_weights(spec, seed=0)
    port = create_port("flax", spec, device="cpu")
    port.load(tensors)
    x = port.prepare(probe_batch(spec, batch=args.batch))
    port_jit = port.compiled_forward()
    h, hd, d, eps = spec.heads, spec.head_dim, spec.dim, spec.layer_norm_eps

    def ln(t: jax.Array, scale: jax.Array, bias: jax.Array) -> jax.Array:
        mean = t.mean(-1, keepdims=True)
        var = ((t - mean) ** 2).mean(-1, keepdims=True)
        return (t - mean) * jax.lax.rsqrt(var + eps) * scale + bias

    def params(packed: bool) -> dict:
        w = {k: jnp.asarray(v) for k, v in tensors.items()}
        for i in range(spec.depth):
            p = f"blocks.{i}.attn."
            if packed:
                w[p + "qkv.kernel"] = jnp.concatenate(
                    [w[p + n + ".kernel"].reshape(d, h * hd) for n in ("query", "key", "value")], axis=1)
                w[p + "qkv.bias"] = jnp.concatenate([w[p + n + ".bias"].reshape(-1)
                                                     for n in ("query", "key", "value")])
        return w

    def make(packed: bool, fused_attention: bool):  # -> a synchronised zero-argument call
        def forward(w: dict, images: jax.Array) -> jax.Array:
            b = images.shape[0]
            patches = images.reshape(b, 14, 16, 14, 16, 3).transpose(0, 1, 3, 2, 4, 5).reshape(b, 196, -1)
            t = patches @ w["patch_embed.kernel"].reshape(-1, d) + w["patch_embed.bias"]
            t = jnp.concatenate([jnp.broadcast_to(w["cls_token"], (b, 1, d)), t], axis=1) + w["pos_embed"]
            for i in range(spec.depth):
                p = f"blocks.{i}."
                y = ln(t, w[p + "norm1.scale"], w[p + "norm1.bias"])
                if packed:
                    qkv = (y @ w[p + "attn.qkv.kernel"] + w[p + "attn.qkv.bias"]).reshape(b, -1, 3, h, hd)
                    q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
                else:
                    q, k, v = (jnp.einsum("bnd,dhk->bnhk", y, w[p + f"attn.{n}.kernel"])
                               + w[p + f"attn.{n}.bias"] for n in ("query", "key", "value"))
                if fused_attention:
                    ctx = jax.nn.dot_product_attention(q, k, v, scale=hd**-0.5, implementation="xla")
                else:
                    probs = jax.nn.softmax(jnp.einsum("bqhk,bshk->bhqs", q * hd**-0.5, k), axis=-1)
                    ctx = jnp.einsum("bhqs,bshk->bqhk", probs, v)
                t = t + jnp.einsum("bqhk,hkd->bqd", ctx, w[p + "attn.out.kernel"]) + w[p + "attn.out.bias"]
                y = ln(t, w[p + "norm2.scale"], w[p + "norm2.bias"])
                y = jax.nn.gelu(y @ w[p + "mlp.fc1.kernel"] + w[p + "mlp.fc1.bias"], approximate=False)
                t = t + y @ w[p + "mlp.fc2.kernel"] + w[p + "mlp.fc2.bias"]
            t = ln(t, w["final_norm.scale"], w["final_norm.bias"])
            return t[:, 0] @ w["head.out.kernel"] + w["head.out.bias"]

        jitted = jax.jit(forward)
        w = params(packed)
        return lambda: jitted(w, x).block_until_ready()

    variants = [
        ("port: nnx.MultiHeadAttention under jax.jit", lambda: port_jit(x).block_until_ready()),
        ("separate q/k/v + einsum softmax (control)", make(False, False)),
        ("packed qkv + einsum softmax", make(True, False)),
        ("packed qkv + jax.nn.dot_product_attention", make(True, True)),
    ]
    expected = np.asarray(variants[0][1]())
    for name, call in variants[1:]:
        diff = float(np.max(np.abs(np.asarray(call()) - expected)))
        print(f"{name}: max |logit - port| {diff:.1e}")
    for _, call in variants:
        call()
    times: dict[str, list[float]] = {name: [] for name, _ in variants}
    for _ in range(args.rounds):
        for name, call in variants:
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    base = variants[0][0]
    print(f"\nvit-b16, batch {args.batch}, {args.threads} threads, {args.rounds} interleaved rounds\n")
    print("| variant | median s | ratio to the port (median over rounds) |")
    print("|---|---:|---:|")
    for name, _ in variants:
        ratio = statistics.median(a / b for a, b in zip(times[name], times[base], strict=True))
        print(f"| {name} | {statistics.median(times[name]):.3f} | {ratio:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
