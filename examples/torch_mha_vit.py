"""A user-style torch ViT, written the way a porter writes one, not the way `ports/torch` is:
`nn.MultiheadAttention(batch_first=True)` with its packed `in_proj_weight`, an `nn.Sequential`
MLP, post-norm blocks, a `(1, 1, D)` class embedding and a `(1, N + 1, D)` position table, and
names of its own. portbench binds it to the canonical tensors by structure.

    python compare.py verify --model examples/torch_mha_vit.py:build --spec mnist-vit-small
    python compare.py verify --model examples/torch_mha_vit.py:build_with_mistake --spec mnist-vit-small

`build_with_mistake` plants a mistake porters make: the MLP's GELU is the tanh approximation
(`nn.GELU(approximate="tanh")`, as `jax.nn.gelu` and Keras' default are) where the spec's MLP
uses the exact erf form. The logits move by about 1e-4, far over the 5e-6 tolerance.
"""

from __future__ import annotations

import torch
from torch import nn


class EncoderLayer(nn.Module):
    def __init__(self, width: int, heads: int, hidden: int, eps: float, gelu: str, dropout: float) -> None:
        super().__init__()
        self.attention = nn.MultiheadAttention(width, heads, batch_first=True)
        self.ln_a = nn.LayerNorm(width, eps=eps)
        self.ffn = nn.Sequential(nn.Linear(width, hidden), nn.GELU(approximate=gelu), nn.Dropout(dropout),
                                 nn.Linear(hidden, width))
        self.ln_b = nn.LayerNorm(width, eps=eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.ln_a(x + self.attention(x, x, x, need_weights=False)[0])  # post-norm
        return self.ln_b(x + self.ffn(x))


class MnistViT(nn.Module):
    def __init__(self, spec, gelu: str = "none") -> None:
        super().__init__()
        width = spec.dim
        tokens = (spec.image_height // spec.patch_height) * (spec.image_width // spec.patch_width)
        self.class_embedding = nn.Parameter(torch.zeros(1, 1, width))
        self.position_table = nn.Parameter(torch.zeros(1, tokens + 1, width))
        self.to_patches = nn.Conv2d(spec.channels, width, (spec.patch_height, spec.patch_width),
                                    stride=(spec.patch_height, spec.patch_width))
        self.layers = nn.ModuleList(
            EncoderLayer(width, spec.heads, spec.mlp_dim, spec.layer_norm_eps, gelu, spec.dropout_mlp)
            for _ in range(spec.depth))
        self.classifier = nn.Linear(width, spec.num_classes)
        nn.init.normal_(self.class_embedding, std=0.02)
        nn.init.normal_(self.position_table, std=0.02)

    def forward(self, images: torch.Tensor) -> torch.Tensor:  # (B, C, H, W)
        x = self.to_patches(images).flatten(2).transpose(1, 2)  # (B, N, D), row-major patches
        x = torch.cat([self.class_embedding.expand(len(x), -1, -1), x], dim=1) + self.position_table
        for layer in self.layers:
            x = layer(x)
        return self.classifier(x[:, 0])


def build(spec) -> MnistViT:
    torch.manual_seed(0)
    return MnistViT(spec)


def build_with_mistake(spec) -> MnistViT:
    torch.manual_seed(0)
    return MnistViT(spec, gelu="tanh")
