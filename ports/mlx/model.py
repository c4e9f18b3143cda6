"""The spec's model in MLX (`mlx.nn`), NHWC input.

Parallel text: every native port's model.py (ports/torch, keras, flax and mlx) has the same
classes in the same order; a diff between two of them shows only the framework idiom.
"""

from __future__ import annotations

from itertools import pairwise

import mlx.core as mx
import numpy as np
from mlx import nn

from shared.core.positions import fixed_table
from shared.core.spec import ModelSpec
from shared.core.taps import NO_TAPS, Taps

# The ways Attention computes the same softmax(q k^T) v: the library's fused kernel or the explicit
# path. Which one a run uses is a mode the port chooses (port.py's run_modes), never a constant.
ATTENTION_PATHS = ("fused", "explicit")


def activation(form: str) -> nn.Module:
    # Always pass the GELU form: MLX's default 'none' is exact (as torch); its tanh form is
    # named 'precise' ('tanh' is an alias), and 'fast' is x * sigmoid(1.702 x), another function.
    return nn.GELU(approx="none" if form == "gelu" else "precise")


def layer_norm(spec: ModelSpec, width: int) -> nn.LayerNorm:
    # Always pass epsilon: torch and MLX 1e-5, Keras 1e-3 and Flax 1e-6 by default.
    return nn.LayerNorm(width, eps=spec.layer_norm_eps, affine=True, bias=True)


class PatchEmbed(nn.Module):
    """Pad (or drop) the remainder, then one Conv2d with kernel = stride = patch size."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        d = spec.derived
        # mx.pad takes (before, after) per axis of NHWC: zeros at the bottom and right only.
        self.padding = ((0, 0), (0, d.rows_padded), (0, d.cols_padded), (0, 0))
        # `drop`: crop the remainder explicitly, so no conv kernel ever sees it (see Keras' port).
        self.used = (d.grid_rows * spec.patch_height, d.grid_cols * spec.patch_width)
        patch = (spec.patch_height, spec.patch_width)
        # MLX convolves NHWC input with an (out, kh, kw, in) weight: neither torch's OIHW nor HWIO.
        self.proj = nn.Conv2d(spec.channels, spec.dim, kernel_size=patch, stride=patch, padding=0)

    def __call__(self, x: mx.array) -> mx.array:
        if any(sum(self.padding, ())):
            x = mx.pad(x, self.padding)
        x = self.proj(x[:, : self.used[0], : self.used[1], :])  # NHWC
        x = x.reshape(x.shape[0], -1, x.shape[-1])  # (B, rows, cols, D) -> (B, tokens, D), row-major
        return x.astype(self.proj.weight.dtype)  # the token stream is held in the parameter dtype


class Attention(nn.Module):
    """Multi-head attention with its own head width.

    nn.MultiHeadAttention splits its `dims` (the q/k projection width) into num_heads, like
    torch's embed_dim, but takes the input and output widths separately, so dims = heads *
    head_dim with query/key/value_input_dims = value_output_dims = the model width expresses the
    spec's head_dim. Its `bias` (default False, unlike torch and Keras) covers q, k, v and the
    output together, so without qkv bias the output bias is a parameter of its own. It has no
    attention dropout: with dropout in train mode the explicit path below applies it."""

    def __init__(self, spec: ModelSpec, index: int) -> None:
        super().__init__()
        self.tag, self.heads, self.head_dim = f"block{index}", spec.heads, spec.head_dim
        inner = spec.derived.attn_inner
        self.mha = nn.MultiHeadAttention(
            inner, spec.heads, query_input_dims=spec.dim, key_input_dims=spec.dim,
            value_input_dims=spec.dim, value_dims=inner, value_output_dims=spec.dim,
            bias=spec.qkv_bias,
        )
        self.out_bias = None if spec.qkv_bias else mx.zeros((spec.dim,))
        self.dropout, self.dropout_rate = nn.Dropout(spec.dropout_attn), spec.dropout_attn
        self.attention_path = "fused"  # one of ATTENTION_PATHS: the port's mode sets it (port.py's set_mode)

    def __call__(self, x: mx.array, taps: Taps = NO_TAPS) -> mx.array:
        # Taps asked for: the explicit path, so the probabilities tapped are the ones applied.
        # Also when the mode asks for it (self.attention_path), and for attention dropout in train mode,
        # which nn.MultiHeadAttention lacks.
        dropout = self.training and self.dropout_rate > 0
        explicit = taps is not NO_TAPS or self.attention_path == "explicit" or dropout
        y = self.explicit(x, taps) if explicit else self.mha(x, x, x)
        return y if self.out_bias is None else y + self.out_bias.astype(y.dtype)

    def explicit(self, x: mx.array, taps: Taps) -> mx.array:
        """softmax(q k^T) v with its probabilities materialised: the tapped `attn_probs` are the
        tensor that weighted v in this forward pass, never a recomputation beside a fused kernel."""
        b, n, _ = x.shape

        def heads(t: mx.array) -> mx.array:  # (B, N, H*hd) -> (B, H, N, hd)
            return t.reshape(b, n, self.heads, self.head_dim).transpose(0, 2, 1, 3)

        q, k, v = heads(self.mha.query_proj(x)), heads(self.mha.key_proj(x)), heads(self.mha.value_proj(x))
        scale = self.head_dim**-0.5  # 1/sqrt(head width), not 1/sqrt(dim)
        # The softmax in float32 (precise=True), its probabilities rounded to the compute dtype.
        probs = mx.softmax((q * scale) @ k.transpose(0, 1, 3, 2), axis=-1, precise=True)
        taps[f"{self.tag}.attn_probs"] = probs
        context = self.dropout(probs) @ v
        return self.mha.out_proj(context.transpose(0, 2, 1, 3).reshape(b, n, -1))


class Mlp(nn.Module):
    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        self.fc1 = nn.Linear(spec.dim, spec.mlp_dim, bias=True)
        self.act = activation(spec.activation)
        self.fc2 = nn.Linear(spec.mlp_dim, spec.dim, bias=True)
        self.drop = nn.Dropout(spec.dropout_mlp)

    def __call__(self, x: mx.array) -> mx.array:
        return self.drop(self.fc2(self.drop(self.act(self.fc1(x)))))


class Block(nn.Module):
    def __init__(self, spec: ModelSpec, index: int) -> None:
        super().__init__()
        self.tag, self.pre_norm = f"block{index}", spec.norm == "pre"
        self.norm1 = layer_norm(spec, spec.dim)
        self.attn = Attention(spec, index)
        self.norm2 = layer_norm(spec, spec.dim)
        self.mlp = Mlp(spec)

    def __call__(self, x: mx.array, taps: Taps = NO_TAPS) -> mx.array:
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
        self.hidden = [nn.Linear(a, b) for a, b in pairwise(widths)]  # a plain list is a child list
        self.act = activation(spec.head_activation)
        self.drop = nn.Dropout(spec.dropout_head)
        self.out = nn.Linear(widths[-1], spec.num_classes)

    def __call__(self, x: mx.array) -> mx.array:
        for layer in self.hidden:
            x = self.drop(self.act(layer(x)))
        return self.out(x)


class VisionTransformer(nn.Module):
    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        d = spec.derived
        self.spec = spec
        self.patch_embed = PatchEmbed(spec)
        self.cls_token = mx.zeros((spec.dim,)) if spec.class_token else None
        self.pos_embed = None
        if spec.pos_embed == "learned":  # the whole table; only the first rows are used
            self.pos_embed = mx.zeros((d.pos_rows_total, spec.dim))
        # fixed, not a parameter: MLX leaves keys starting with "_" out of
        # parameters() (a frozen array would still be counted there).
        self._pos_table = None
        if spec.pos_embed == "sincos":
            self._pos_table = mx.array(fixed_table(spec).astype(np.float32))
        self.pos_drop = nn.Dropout(spec.dropout_embed)
        self.blocks = [Block(spec, i) for i in range(spec.depth)]
        self.final_norm = None
        if spec.final_norm != "none":
            width = d.pooled_dim if spec.final_norm == "pooled" else spec.dim
            self.final_norm = layer_norm(spec, width)
        self.head = Head(spec)

    def positions(self) -> mx.array | None:
        if self.pos_embed is not None:
            return self.pos_embed[: self.spec.derived.pos_rows_used]
        # set_dtype casts parameters only: the fixed table follows the patch embedding's dtype.
        return None if self._pos_table is None else self._pos_table.astype(self.patch_embed.proj.weight.dtype)

    def __call__(self, x: mx.array, taps: Taps = NO_TAPS) -> mx.array:
        s, t = self.spec, taps
        x = t["patch_embed"] = self.patch_embed(x)
        table = self.positions()
        if table is not None and not s.pos_embed_class_row:
            x = x + table  # big_vision: patches only, before the class token
        if self.cls_token is not None:
            cls = mx.broadcast_to(self.cls_token, (x.shape[0], 1, s.dim))
            x = mx.concatenate([cls, x], axis=1)
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
            x = x[:, int(s.class_token):].mean(axis=1)  # patch tokens only
        else:
            x = x.reshape(x.shape[0], -1)
        if s.final_norm == "pooled":
            x = self.final_norm(x)
        t["pooled"] = x
        x = t["logits"] = self.head(x)
        return x
