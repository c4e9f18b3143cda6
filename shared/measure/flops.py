"""Analytic forward FLOPs of a spec: 2 x multiply-adds of every matmul and the patch projection,
both attention products (Q·Kᵀ and A·V) included; softmax, GELU, LayerNorm and adds excluded
(performance.md §D.18). ViT-B/16: 17.564 G multiply-adds = 35.13 GFLOP per 224² image."""

from __future__ import annotations

from shared.core.spec import ModelSpec


def forward_macs_per_image(spec: ModelSpec) -> int:
    d = spec.derived
    n, width, inner = d.seq_len, spec.dim, d.attn_inner
    patch = d.num_patches * d.patch_features * width
    per_block = (n * width * 3 * inner  # q, k, v projections
                 + 2 * n * n * inner  # Q·Kᵀ and A·V over all heads
                 + n * inner * width  # output projection
                 + 2 * n * width * spec.mlp_dim)  # MLP in and out
    head, features = 0, d.pooled_dim
    for hidden in (*spec.head_hidden, spec.num_classes):
        head += features * hidden
        features = hidden
    return patch + spec.depth * per_block + head


def forward_flops(spec: ModelSpec, batch: int) -> int:
    return 2 * forward_macs_per_image(spec) * batch
