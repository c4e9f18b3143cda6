"""A ViT written the way users write one (lucidrains style: one file, no library class, so no
naming convention applies and it binds by structure), for the zoo presets: vit-pytorch's patch
LayerNorms, a packed qkv Linear, LayerScale as a block's own loose parameters, registers,
qk-norm, SwiGLU as three Linears (w1 the gate), a MAP head as q and packed kv Linears with its
probe, a distillation head."""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from shared.core.positions import positioned_prefix
from shared.core.spec import ModelSpec

ACTIVATIONS = {"gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "silu": F.silu,
               "quick_gelu": lambda x: x * torch.sigmoid(1.702 * x)}


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, heads: int) -> torch.Tensor:
    split = [t.unflatten(-1, (heads, -1)).transpose(1, 2) for t in (q, k, v)]
    return F.scaled_dot_product_attention(*split).transpose(1, 2).flatten(2)


class Block(nn.Module):
    def __init__(self, s: ModelSpec) -> None:
        super().__init__()
        d, inner, eps = s.dim, s.heads * s.head_dim, s.layer_norm_eps
        self.s = s
        if s.layer_scale:  # LayerScale as the block's own parameters, not a module
            self.gamma_attn = nn.Parameter(torch.rand(d))
            self.gamma_mlp = nn.Parameter(torch.rand(d))
        self.ln_attn = nn.LayerNorm(d, eps=eps)
        self.to_qkv = nn.Linear(d, 3 * inner, bias=s.qkv_bias)
        self.q_norm = nn.LayerNorm(s.head_dim, eps=eps) if s.qk_norm else None
        self.k_norm = nn.LayerNorm(s.head_dim, eps=eps) if s.qk_norm else None
        self.to_out = nn.Linear(inner, d)
        self.ln_mlp = nn.LayerNorm(d, eps=eps)
        self.w1 = nn.Linear(d, s.mlp_dim)  # the gate when gated (SwiGLU), else the first Linear
        self.w2 = nn.Linear(d, s.mlp_dim) if s.mlp == "gated" else None
        self.w3 = nn.Linear(s.mlp_dim, d)

    def mlp(self, x: torch.Tensor) -> torch.Tensor:
        hidden = ACTIVATIONS[self.s.activation](self.w1(x))
        return self.w3(hidden * self.w2(x) if self.w2 is not None else hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.to_qkv(self.ln_attn(x)).chunk(3, dim=-1)
        if self.q_norm is not None:
            heads = (self.s.heads, self.s.head_dim)
            q = self.q_norm(q.unflatten(-1, heads)).flatten(2)
            k = self.k_norm(k.unflatten(-1, heads)).flatten(2)
        a = self.to_out(attend(q, k, v, self.s.heads))
        x = x + (a * self.gamma_attn if self.s.layer_scale else a)
        m = self.mlp(self.ln_mlp(x))
        return x + (m * self.gamma_mlp if self.s.layer_scale else m)


class AttentionPool(nn.Module):
    """big_vision's MAPHead: a probe attends over the tokens, then y + MLP(LN(y))."""

    def __init__(self, s: ModelSpec) -> None:
        super().__init__()
        d, inner = s.dim, s.heads * s.head_dim
        self.s = s
        self.probe = nn.Parameter(torch.randn(1, 1, d))
        self.q = nn.Linear(d, inner, bias=s.pool_qkv_bias)
        self.kv = nn.Linear(d, 2 * inner, bias=s.pool_qkv_bias)
        self.proj = nn.Linear(inner, d)
        self.norm = nn.LayerNorm(d, eps=s.layer_norm_eps)
        self.fc1, self.fc2 = nn.Linear(d, s.mlp_dim), nn.Linear(s.mlp_dim, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k, v = self.kv(x).chunk(2, dim=-1)
        y = self.proj(attend(self.q(self.probe.expand(len(x), -1, -1)), k, v, self.s.heads))
        return (y + self.fc2(ACTIVATIONS[self.s.activation](self.fc1(self.norm(y)))))[:, 0]


class UserViT(nn.Module):
    def __init__(self, s: ModelSpec) -> None:
        super().__init__()
        d, eps = s.dim, s.layer_norm_eps
        self.s = s
        features = s.derived.patch_features
        if s.patch_norm_in:  # vit-pytorch: LayerNorm, Linear, LayerNorm on (ph, pw, C)-flattened patches
            self.to_patches = nn.Sequential(nn.LayerNorm(features, eps=eps), nn.Linear(features, d),
                                            nn.LayerNorm(d, eps=eps))
        else:
            self.to_patches = nn.Conv2d(s.channels, d, (s.patch_height, s.patch_width),
                                        (s.patch_height, s.patch_width), bias=s.patch_bias)
        self.cls = nn.Parameter(torch.randn(1, 1, d)) if s.class_token else None
        self.dist = nn.Parameter(torch.randn(1, 1, d)) if s.distill_token else None
        self.registers = nn.Parameter(torch.randn(1, s.registers, d)) if s.registers else None
        self.positions = nn.Parameter(torch.randn(1, s.derived.pos_rows_total, d))
        self.ln_pre = nn.LayerNorm(d, eps=eps) if s.norm_before_blocks else None
        self.blocks = nn.ModuleList(Block(s) for _ in range(s.depth))
        self.ln_post = nn.LayerNorm(d, eps=eps) if s.final_norm != "none" else None
        self.pool = AttentionPool(s) if s.pooling == "map" else None
        self.head = nn.Linear(d, s.num_classes) if s.num_classes else None
        self.head_dist = nn.Linear(d, s.num_classes) if s.distill_token else None

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        s = self.s
        if s.patch_norm_in:
            b, c, h, w = images.shape
            ph, pw = s.patch_height, s.patch_width
            grid = images.reshape(b, c, h // ph, ph, w // pw, pw)
            x = self.to_patches(grid.permute(0, 2, 4, 3, 5, 1).flatten(3).flatten(1, 2))
        else:
            x = self.to_patches(images).flatten(2).transpose(1, 2)
        prefix = [t.expand(len(x), -1, -1) for t in (self.cls, self.dist) if t is not None]
        placed = positioned_prefix(s) - (s.registers if s.pos_embed_register_rows else 0)
        x = torch.cat([*prefix[:placed], x], 1) + self.positions[:, :s.derived.pos_rows_used]
        regs = [self.registers.expand(len(x), -1, -1)] if self.registers is not None else []
        x = torch.cat([x[:, :placed], *prefix[placed:], *regs, x[:, placed:]], 1)
        x = self.ln_pre(x) if self.ln_pre is not None else x
        for block in self.blocks:
            x = block(x)
        tokens = self.ln_post(x) if self.ln_post is not None and s.final_norm == "tokens" else x
        pooled = self.pool(tokens) if self.pool is not None else tokens[:, 0]
        pooled = self.ln_post(pooled) if s.final_norm == "pooled" else pooled
        logits = self.head(pooled) if self.head is not None else pooled
        return (logits + self.head_dist(tokens[:, 1])) / 2 if self.head_dist is not None else logits
