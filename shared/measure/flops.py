"""Analytic forward FLOPs of a spec, and the matrix products they come from (one source for the
FLOP count, the roofline's GEMM shapes and the peers' rates).

FLOPs are 2 x multiply-adds of every matmul and the patch projection, both attention products
(Q·Kᵀ and A·V) included; softmax, GELU, LayerNorm and adds are excluded. ViT-B/16: 17.564 G
multiply-adds = 35.13 GFLOP per 224² image.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.core.spec import ModelSpec


@dataclass(frozen=True)
class Matmul:
    """`count` products of (m, k) @ (k, n) in one forward pass over a batch."""

    name: str
    m: int
    k: int
    n: int
    count: int = 1
    dense: bool = True  # a weight matmul over every token (False: attention's per-head products and
    #                     the per-image products of the pool and the heads, m = batch)

    @property
    def macs(self) -> int:
        return self.m * self.k * self.n * self.count


def matmuls(spec: ModelSpec, batch: int) -> list[Matmul]:
    """Every matrix product of one forward pass, in the order the model runs them."""
    d = spec.derived
    n, width, inner, tokens = d.seq_len, spec.dim, d.attn_inner, batch * d.seq_len
    heads = batch * spec.heads
    out = [
        Matmul("patch", batch * d.num_patches, d.patch_features * spec.temporal_patch_size, width),  # frames
        Matmul("qkv", tokens, width, inner + 2 * d.kv_inner, spec.depth),  # k, v: kv_heads heads
        Matmul("q·kᵀ", n, spec.head_dim, n, spec.depth * heads, dense=False),
        Matmul("a·v", n, n, spec.head_dim, spec.depth * heads, dense=False),
        Matmul("attn out", tokens, inner, width, spec.depth),
        Matmul("mlp in", tokens, width, spec.mlp_dim, spec.depth),
    ]
    if spec.mlp == "gated":  # the gate: a second product of the MLP's input width
        out.append(Matmul("mlp gate", tokens, width, spec.mlp_dim, spec.depth))
    out.append(Matmul("mlp out", tokens, spec.mlp_dim, width, spec.depth))
    if spec.pooling == "map":  # one probe per image attends over every token
        out += [
            Matmul("pool q", batch, width, inner, dense=False),
            Matmul("pool kv", tokens, width, 2 * inner),
            Matmul("pool q·kᵀ", 1, spec.head_dim, n, heads, dense=False),
            Matmul("pool a·v", 1, n, spec.head_dim, heads, dense=False),
            Matmul("pool out", batch, inner, width, dense=False),
            Matmul("pool mlp in", batch, width, spec.mlp_dim, dense=False),
            Matmul("pool mlp out", batch, spec.mlp_dim, width, dense=False),
        ]
    features = d.pooled_dim
    for i, hidden in enumerate((*spec.head_hidden, spec.num_classes)):
        if hidden:  # num_classes 0: no classifier
            out.append(Matmul(f"head {i}", batch, features, hidden, dense=False))
        features = hidden
    if spec.distill_token:
        out.append(Matmul("head dist", batch, width, spec.num_classes, dense=False))
    return out


def forward_flops(spec: ModelSpec, batch: int) -> int:
    return 2 * sum(m.macs for m in matmuls(spec, batch))


def gemm_shapes(spec: ModelSpec, batch: int) -> list[Matmul]:
    """The roofline's fixed, short set: the spec's own dense matmuls over all tokens (patch
    projection, q/k/v, attention output, MLP in and out), distinct shapes only, each counted as
    often as the forward pass runs it. The heads and the pool's per-image products (m = batch) and
    attention's per-head products are left out: they are the part of the model that cannot run at
    the GEMM rate."""
    shapes: dict[tuple[int, int, int], Matmul] = {}
    for mm in matmuls(spec, batch):
        if not mm.dense:
            continue
        key = (mm.m, mm.k, mm.n)
        seen = shapes.get(key)
        shapes[key] = mm if seen is None else Matmul(f"{seen.name}+{mm.name}", *key,
                                                     seen.count + mm.count)
    return list(shapes.values())
