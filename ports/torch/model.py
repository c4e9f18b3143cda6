"""The spec's model in PyTorch (`torch.nn`), NCHW input.

Parallel text: every native port's model.py (ports/torch, keras, flax and mlx) has the same
classes in the same order; a diff between two of them shows only the framework idiom.
"""

from __future__ import annotations

from itertools import pairwise

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from shared.core.positions import fixed_table
from shared.core.spec import ModelSpec
from shared.core.taps import NO_TAPS, Taps

NARROW_HEAD = 8  # the default for head widths up to this is the explicit path (port.py's run_modes)

# The ways Attention computes the same softmax(q k^T) v: the library's fused kernel or the explicit
# path. Which one a run uses is a mode the port chooses (port.py's run_modes), never a constant.
ATTENTION_PATHS = ("fused", "explicit")


def activation(form: str) -> nn.Module:
    # Always pass the GELU form: torch's default is exact, Flax's and keras.ops' are tanh.
    return nn.GELU(approximate="none" if form == "gelu" else "tanh")


def layer_norm(spec: ModelSpec, width: int) -> nn.LayerNorm:
    # Always pass epsilon: torch and MLX 1e-5, Keras 1e-3 and Flax 1e-6 by default.
    return nn.LayerNorm(width, eps=spec.layer_norm_eps)


class PatchEmbed(nn.Module):
    """Pad (or drop) the remainder, then one Conv2d with kernel = stride = patch size."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        d = spec.derived
        # F.pad order is (left, right, top, bottom): zeros at the bottom and right only.
        self.padding = (0, d.cols_padded, 0, d.rows_padded)
        # `drop`: crop the remainder explicitly, so no conv kernel ever sees it (see Keras' port).
        self.used = (d.grid_rows * spec.patch_height, d.grid_cols * spec.patch_width)
        patch = (spec.patch_height, spec.patch_width)
        self.proj = nn.Conv2d(spec.channels, spec.dim, kernel_size=patch, stride=patch, padding=0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if any(self.padding):
            x = F.pad(x, self.padding)
        x = self.proj(x[:, :, : self.used[0], : self.used[1]])  # NCHW
        x = x.flatten(2).transpose(1, 2)  # (B, D, rows, cols) -> (B, tokens, D), row-major
        return x.to(self.proj.weight.dtype)  # the token stream is held in the parameter dtype


class Attention(nn.Module):
    """Multi-head attention with its own head width.

    nn.MultiheadAttention fixes the head width to embed_dim / num_heads (and defaults to
    batch_first=False), so it cannot express a spec whose head_dim is its own field (Keras'
    key_dim). This module packs q, k, v into one Linear (as timm does) and calls
    scaled_dot_product_attention, torch's fused kernel."""

    def __init__(self, spec: ModelSpec, index: int) -> None:
        super().__init__()
        self.tag, self.heads, self.head_dim = f"block{index}", spec.heads, spec.head_dim
        inner = spec.derived.attn_inner
        self.qkv = nn.Linear(spec.dim, 3 * inner, bias=spec.qkv_bias)
        self.out = nn.Linear(inner, spec.dim, bias=True)
        self.dropout = spec.dropout_attn
        self.attention_path = "fused"  # one of ATTENTION_PATHS: the port's mode sets it (port.py's set_mode)

    def forward(self, x: torch.Tensor, taps: Taps = NO_TAPS) -> torch.Tensor:
        b, n, _ = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)  # each (B, H, N, hd)
        scale = self.head_dim**-0.5  # 1/sqrt(head width), not 1/sqrt(dim)
        dropout = self.dropout if self.training else 0.0
        # Taps asked for: the explicit path, so the probabilities tapped are the ones applied.
        # Also when the mode asks for it (self.attention_path).
        if taps is not NO_TAPS or self.attention_path == "explicit":
            context = self.explicit(q, k, v, scale, dropout, taps)
        else:
            context = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, scale=scale)
        return self.out(context.transpose(1, 2).reshape(b, n, -1))

    def explicit(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, dropout: float,
                 taps: Taps) -> torch.Tensor:
        """softmax(q k^T) v with its probabilities materialised: the tapped `attn_probs` are the
        tensor that weighted v in this forward pass, never a recomputation beside a fused kernel."""
        # The softmax in float32, its probabilities rounded to the compute dtype (a no-op in fp32).
        probs = torch.softmax(((q * scale) @ k.transpose(-2, -1)).float(), dim=-1).to(v.dtype)
        taps[f"{self.tag}.attn_probs"] = probs
        return F.dropout(probs, dropout) @ v


class Mlp(nn.Module):
    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        self.fc1 = nn.Linear(spec.dim, spec.mlp_dim)
        self.act = activation(spec.activation)
        self.fc2 = nn.Linear(spec.mlp_dim, spec.dim)
        self.drop = nn.Dropout(spec.dropout_mlp)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.fc2(self.drop(self.act(self.fc1(x)))))


class Block(nn.Module):
    def __init__(self, spec: ModelSpec, index: int) -> None:
        super().__init__()
        self.tag, self.pre_norm = f"block{index}", spec.norm == "pre"
        self.norm1 = layer_norm(spec, spec.dim)
        self.attn = Attention(spec, index)
        self.norm2 = layer_norm(spec, spec.dim)
        self.mlp = Mlp(spec)

    def forward(self, x: torch.Tensor, taps: Taps = NO_TAPS) -> torch.Tensor:
        t = taps
        if self.pre_norm:  # x + f(LN(x))
            h = t[f"{self.tag}.norm1"] = self.norm1(x)
            x = x + (a := self.attn(h, t))
            t[f"{self.tag}.attn"] = a
            h = t[f"{self.tag}.norm2"] = self.norm2(x)
            x = x + (m := self.mlp(h))
            t[f"{self.tag}.mlp"] = m
        else:  # post: LN(x + f(x))
            t[f"{self.tag}.attn"] = a = self.attn(x, t)
            x = t[f"{self.tag}.norm1"] = self.norm1(x + a)
            t[f"{self.tag}.mlp"] = m = self.mlp(x)
            x = t[f"{self.tag}.norm2"] = self.norm2(x + m)
        t[f"{self.tag}.out"] = x
        return x


class Head(nn.Module):
    """Hidden Linear + activation + dropout layers, then the class logits."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        widths = [spec.derived.pooled_dim, *spec.head_hidden]
        self.hidden = nn.ModuleList(nn.Linear(a, b) for a, b in pairwise(widths))
        self.act = activation(spec.head_activation)
        self.drop = nn.Dropout(spec.dropout_head)
        self.out = nn.Linear(widths[-1], spec.num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.hidden:
            x = self.drop(self.act(layer(x)))
        return self.out(x)


class VisionTransformer(nn.Module):
    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        d = spec.derived
        self.spec = spec
        self.patch_embed = PatchEmbed(spec)
        self.cls_token = nn.Parameter(torch.zeros(spec.dim)) if spec.class_token else None
        self.pos_embed = None
        if spec.pos_embed == "learned":  # the whole table; only the first rows are used
            self.pos_embed = nn.Parameter(torch.zeros(d.pos_rows_total, spec.dim))
        elif spec.pos_embed == "sincos":  # fixed, not a parameter
            table = torch.tensor(fixed_table(spec), dtype=torch.float32)
            self.register_buffer("pos_table", table, persistent=False)
        self.pos_drop = nn.Dropout(spec.dropout_embed)
        self.blocks = nn.ModuleList(Block(spec, i) for i in range(spec.depth))
        self.final_norm = None
        if spec.final_norm != "none":
            width = d.pooled_dim if spec.final_norm == "pooled" else spec.dim
            self.final_norm = layer_norm(spec, width)
        self.head = Head(spec)

    def positions(self) -> torch.Tensor | None:
        if self.pos_embed is not None:
            return self.pos_embed[: self.spec.derived.pos_rows_used]
        return getattr(self, "pos_table", None)

    def forward(self, x: torch.Tensor, taps: Taps = NO_TAPS) -> torch.Tensor:
        s, t = self.spec, taps
        x = t["patch_embed"] = self.patch_embed(x)
        table = self.positions()
        if table is not None and not s.pos_embed_class_row:
            x = x + table  # big_vision: patches only, before the class token
        if self.cls_token is not None:
            x = torch.cat([self.cls_token.expand(x.shape[0], 1, -1), x], dim=1)
        if table is not None and s.pos_embed_class_row:
            x = x + table  # timm/torchvision: the table has a class-token row
        x = t["pos_embed"] = self.pos_drop(x)
        for blk in self.blocks:
            x = blk(x, t)
        if s.final_norm == "tokens":
            x = t["final_norm"] = self.final_norm(x)
        if s.pooling == "cls":
            x = x[:, 0]
        elif s.pooling == "mean":
            x = x[:, int(s.class_token):].mean(dim=1)  # patch tokens only
        else:
            x = x.flatten(1)
        if s.final_norm == "pooled":
            x = self.final_norm(x)
        t["pooled"] = x
        x = t["logits"] = self.head(x)
        return x
