"""The spec's model in MLX (`mlx.nn`), NHWC input.

Parallel text: every native port's model.py (ports/torch, keras, flax and mlx) has the same
classes in the same order; a diff between two of them shows only the framework idiom.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from itertools import pairwise

import mlx.core as mx
import numpy as np
from mlx import nn

from shared.core.positions import sequence_positions, unpositioned
from shared.core.rotary import rotary_tables
from shared.core.spec import ModelSpec, positioned_prefix, projection_biases
from shared.core.taps import NO_TAPS, Taps

# The ways Attention computes the same softmax(q k^T) v: the library's fused kernel or the explicit
# path. Which one a run uses is a mode the port chooses (port.py's run_modes), never a constant.
ATTENTION_PATHS = ("fused", "explicit")

# Each pos_resample method this port computes, with the framework operation that computes it exactly
# (shared/core/resample.py defines each; mlx.nn.Upsample here). A method in RESAMPLE_MISSING has no such
# operation: ports.create_port refuses it with that reason, never a substitute.
RESAMPLE_OPS: dict[str, dict] = {
    # a = -0.75, half-pixel source coordinates, the taps clamped to the edge
    "timm_bicubic": {"mode": "cubic", "align_corners": False},
    "hf_bicubic": {"mode": "cubic", "align_corners": False},
    # PIL's filter: a = -0.5, stretched when shrinking, outside taps dropped and renormalised
    "timm_bicubic_antialias": {"mode": "cubic", "align_corners": False, "antialias": True},
    # scipy's first-order zoom samples corners on corners: align_corners=True
    "big_vision_zoom": {"mode": "linear", "align_corners": True},
    "bilinear": {"mode": "linear", "align_corners": False},
    # PIL's triangle: stretched when shrinking, outside taps dropped and renormalised
    "bilinear_antialias": {"mode": "linear", "align_corners": False, "antialias": True},
}
RESAMPLE_MISSING: dict[str, str] = {
    "dinov2_legacy": ("mlx.nn.Upsample centres a scale factor's sampling grid (start ((M - 1) / s - N + 1) "
                      "/ 2) where torch samples at (i + 0.5) / s - 0.5: with DINOv2's (out + 0.1) / in they "
                      "differ; MLX has no upsampling that samples torch's way at a given factor"),
}
# A naflex batch's per-image resize (image_positions): no MLX resize takes a traced size (nn.Upsample needs a
# static factor, and the compiled forward traces the grids), so each method's antialiased filter is built
# from its kernel here, as shared/core/resample.py's antialiased_weights (PIL's: triangle, Keys' a = -0.5).
IMAGE_RESIZE_KERNELS: dict[str, Callable[[mx.array], mx.array]] = {
    "bilinear_antialias": lambda x: mx.maximum(1.0 - mx.abs(x), 0.0),  # the triangle, half-width 1
    # Keys' cubic with a = -0.5 (PIL's), half-width 2
    "timm_bicubic_antialias": lambda x: mx.where(
        (t := mx.abs(x)) < 1.0, (1.5 * t - 2.5) * t * t + 1.0,
        mx.where(t < 2.0, ((-0.5 * t + 2.5) * t - 4.0) * t + 2.0, 0.0)),
}


def activation(form: str) -> nn.Module:
    # Always pass the GELU form: MLX's default 'none' is exact (as torch); its tanh form is
    # named 'precise' ('tanh' is an alias), and 'fast' is x * sigmoid(1.702 x), another function.
    if form in ("gelu", "gelu_tanh"):
        return nn.GELU(approx="none" if form == "gelu" else "precise")
    # QuickGELU (OpenAI CLIP) is that 'fast' x * sigmoid(1.702 x), held as the class every port has;
    # SiLU: x * sigmoid(x).
    return QuickGELU() if form == "quick_gelu" else nn.SiLU()


class QuickGELU(nn.Module):
    def __call__(self, x: mx.array) -> mx.array:
        return x * mx.sigmoid(1.702 * x)


def norm_layer(spec: ModelSpec, width: int, place: str) -> nn.LayerNorm | nn.RMSNorm:
    # Always pass epsilon, the one of the norm's place: torch and MLX 1e-5, Keras 1e-3 and Flax 1e-6
    # by default (RMSNorm: torch the dtype's machine epsilon, MLX 1e-5, Keras and Flax 1e-6).
    if spec.norm_type == "rms_norm":  # a scale, no bias, no mean subtracted
        return nn.RMSNorm(width, eps=spec.derived.norm_eps[place])
    return nn.LayerNorm(width, eps=spec.derived.norm_eps[place], affine=True, bias=True)


class PatchEmbed(nn.Module):
    """Pad (or drop) the remainder, then one Conv2d with kernel = stride = patch size; optional
    LayerNorms on each flattened patch before it and on each token after it (vit-pytorch). A naflex
    batch arrives patchified: the conv kernel is applied as a matmul (SigLIP2's Linear). Over T > 1
    frames it is a 3-D conv (Qwen's) on the image repeated to fill them, as the processors do."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        d = spec.derived
        # mx.pad takes (before, after) per axis of NHWC: zeros at the bottom and right only.
        self.padding = ((0, 0), (0, d.rows_padded), (0, d.cols_padded), (0, 0))
        # `drop`: crop the remainder explicitly, so no conv kernel ever sees it (see Keras' port).
        self.used = (d.grid_rows * spec.patch_height, d.grid_cols * spec.patch_width)
        self.grid, self.patch = (d.grid_rows, d.grid_cols), (spec.patch_height, spec.patch_width)
        self.norm_in = norm_layer(spec, d.patch_features, "patch") if spec.patch_norm_in else None
        # MLX convolves NHWC input with an (out, kh, kw, in) weight: neither torch's OIHW nor HWIO.
        self.frames = spec.temporal_patch_size  # 1: an image's 2-D patch
        conv, kernel = (nn.Conv3d, (self.frames, *self.patch)) if self.frames > 1 else (nn.Conv2d, self.patch)
        self.proj = conv(spec.channels, spec.dim, kernel_size=kernel, stride=kernel, padding=0,
                         bias=spec.patch_bias)
        self.norm_out = norm_layer(spec, spec.dim, "patch") if spec.patch_norm_out else None
        self.patchified = spec.batching != "fixed"  # (B, max_patches, ph*pw*C), not an image

    def __call__(self, x: mx.array) -> mx.array:
        if not self.patchified:
            if any(sum(self.padding, ())):
                x = mx.pad(x, self.padding)
            x = x[:, : self.used[0], : self.used[1], :]  # NHWC
        if self.norm_in is None and not self.patchified:
            x = x if self.frames == 1 else mx.repeat(x[:, None], self.frames, axis=1)  # (B, T, H, W, C)
            x = self.proj(x)
            x = x.reshape(x.shape[0], -1, x.shape[-1])  # (B, [1,] rows, cols, D) -> (B, tokens, D), row-major
        else:  # the patches as rows (a LayerNorm on each first): the conv kernel applied as a matmul
            x = x if self.patchified else self.unfold(x)
            x = x if self.norm_in is None else self.norm_in(x)
            x = x if self.frames == 1 else mx.tile(x, (1, 1, self.frames))  # (T, ph, pw, C): a patch a frame
            kernel = self.proj.weight.reshape(self.proj.weight.shape[0], -1)  # O[T]HWI -> (D, [T*]ph*pw*C)
            x = x @ kernel.T + self.proj.bias if "bias" in self.proj else x @ kernel.T
        if self.norm_out is not None:
            x = self.norm_out(x)
        return x.astype(self.proj.weight.dtype)  # the token stream is held in the parameter dtype

    def unfold(self, x: mx.array) -> mx.array:
        """(B, H, W, C) -> (B, tokens, ph*pw*C): patches row-major, each flattened (ph, pw, C)."""
        (rows, cols), (ph, pw) = self.grid, self.patch
        x = x.reshape(x.shape[0], rows, ph, cols, pw, x.shape[-1])
        return x.transpose(0, 1, 3, 2, 4, 5).reshape(x.shape[0], rows * cols, -1)


class Rotary(nn.Module):
    """2-D rotary position embeddings on one head's queries or keys: x * cos + x[partner] * sin,
    with shared/core/rotary.py's tables (timm's apply_rot_embed in either layout). The prefix
    tokens' rows are cos 1 and sin 0: they pass through unrotated, as timm and DINOv3 split them off."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        t = rotary_tables(spec)
        # Fixed, not parameters. Rows are tokens: q and k are (B, H, N, hd) here. MLX leaves keys
        # starting with "_" out of parameters().
        self._cos, self._sin = mx.array(t.cos.astype(np.float32)), mx.array(t.sin.astype(np.float32))
        self._partner = mx.array(t.partner.astype(np.int32))

    def __call__(self, x: mx.array, rows: mx.array | None = None) -> mx.array:
        # In x's dtype (the compute dtype), as the product reads it. `rows` (B, N): a naflex or packed
        # batch's row of the table for each token (shared/core/rotary.py's token_rows), per sequence.
        cos, sin = self._cos, self._sin
        if rows is not None:
            cos, sin = cos[rows][:, None], sin[rows][:, None]  # (B, 1, N, hd): broadcast over the heads
        return x * cos.astype(x.dtype) + mx.take(x, self._partner, axis=-1) * sin.astype(x.dtype)


class Attention(nn.Module):
    """Multi-head attention with its own head width.

    nn.MultiHeadAttention splits its `dims` (the q/k projection width) into num_heads, like
    torch's embed_dim, but takes the input and output widths separately, so dims = heads *
    head_dim with query/key/value_input_dims = value_output_dims = the model width expresses the
    spec's head_dim. Its `bias` (default False, unlike torch and Keras) covers q, k, v and the
    output together, so without qkv bias the output bias is a parameter of its own, and a projection
    without a bias of its own (`biases`, spec.projection_biases) is swapped for a bias-free one. Its call has
    no step between the projections and the product (qk-norm) and no attention dropout, so this
    module runs its projections and mx.fast.scaled_dot_product_attention, which is what that call
    does; with dropout in train mode the explicit path below applies it."""

    def __init__(self, spec: ModelSpec, tag: str, biases: dict[str, bool], qk_norm: bool, rope: bool,
                 kv_heads: int) -> None:
        super().__init__()
        self.tag, self.heads, self.head_dim = tag, spec.heads, spec.head_dim
        inner = spec.derived.attn_inner
        qkv_bias = any(biases[f"attn.{p}"] for p in ("query", "key", "value"))
        self.mha = nn.MultiHeadAttention(
            inner, spec.heads, query_input_dims=spec.dim, key_input_dims=spec.dim,
            value_input_dims=spec.dim, value_dims=inner, value_output_dims=spec.dim,
            bias=qkv_bias,
        )
        # A part without a bias of its own: a bias-free projection in its place. Grouped-query
        # attention: k and v projected to kv_heads heads (mx.fast's kernel shares them itself).
        for p in ("query", "key", "value"):
            width = inner if p == "query" else kv_heads * spec.head_dim
            if (qkv_bias and not biases[f"attn.{p}"]) or width != inner:
                own = nn.Linear(spec.dim, width, bias=qkv_bias and biases[f"attn.{p}"])
                setattr(self.mha, f"{p}_proj", own)
        if qkv_bias and not biases["attn.out"]:
            self.mha.out_proj = nn.Linear(inner, spec.dim, bias=False)
        own_out = not qkv_bias and biases["attn.out"]
        self.out_bias = mx.zeros((spec.dim,)) if own_out else None
        # qk-norm (timm's qk_norm): the spec's norm over each head's width, on queries and keys.
        self.q_norm = norm_layer(spec, spec.head_dim, "qk") if qk_norm else None
        self.k_norm = norm_layer(spec, spec.head_dim, "qk") if qk_norm else None
        # RoPE: each head's patch queries and keys rotated after qk-norm, before the product.
        self.rope = Rotary(spec) if rope else None
        self.dropout, self.dropout_rate = nn.Dropout(spec.dropout_attn), spec.dropout_attn
        self.attention_path = "fused"  # one of ATTENTION_PATHS: the port's mode sets it (port.py's set_mode)

    def __call__(self, x: mx.array, taps: Taps = NO_TAPS, queries: mx.array | None = None,
                 key_mask: mx.array | None = None, rope_rows: mx.array | None = None) -> mx.array:
        q, k, v = self.project(x, queries)  # each (B, H, N, hd)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        if self.rope is not None:
            q, k = self.rope(q, rope_rows), self.rope(k, rope_rows)
        b, n = q.shape[0], q.shape[2]
        scale = self.head_dim**-0.5  # 1/sqrt(head width), not 1/sqrt(dim)
        # A naflex batch's key padding (B, keys) or a packed batch's block-diagonal mask (B, queries,
        # keys) -> (B, 1, 1 or queries, keys), True = attend, as its boolean mask reads it.
        # No row is fully masked (a padding query attends to valid keys or to the padding), so none
        # becomes NaN.
        keys = None if key_mask is None else key_mask.reshape(key_mask.shape[0], 1, -1, key_mask.shape[-1])
        # Taps asked for: the explicit path, so the probabilities tapped are the ones applied.
        # Also when the mode asks for it (self.attention_path), and for attention dropout in train mode,
        # which mx.fast.scaled_dot_product_attention lacks.
        dropout = self.training and self.dropout_rate > 0
        if taps is not NO_TAPS or self.attention_path == "explicit" or dropout:
            context = self.explicit(q, k, v, scale, taps, keys)
        else:
            context = mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=keys)
        y = self.mha.out_proj(context.transpose(0, 2, 1, 3).reshape(b, n, -1))
        return y if self.out_bias is None else y + self.out_bias.astype(y.dtype)

    def project(self, x: mx.array, queries: mx.array | None) -> tuple[mx.array, ...]:
        """q, k, v as (B, H, N, hd). `queries` (the attention pool's probe) attend over `x`: the
        query projection projects them, the key and value projections project `x`."""
        def heads(y: mx.array) -> mx.array:  # (B, N, H*hd) -> (B, H, N, hd)
            return y.reshape(y.shape[0], y.shape[1], -1, self.head_dim).transpose(0, 2, 1, 3)

        queries = x if queries is None else queries
        return heads(self.mha.query_proj(queries)), heads(self.mha.key_proj(x)), heads(self.mha.value_proj(x))

    def explicit(self, q: mx.array, k: mx.array, v: mx.array, scale: float, taps: Taps,
                 keys: mx.array | None = None) -> mx.array:
        """softmax(q k^T) v with its probabilities materialised: the tapped `attn_probs` are the
        tensor that weighted v in this forward pass, never a recomputation beside a fused kernel."""
        # The softmax in float32 (precise=True), its probabilities rounded to the compute dtype.
        group = q.shape[1] // k.shape[1]  # grouped-query attention: each k/v head, consecutively
        k, v = mx.repeat(k, group, axis=1), mx.repeat(v, group, axis=1)
        scores = (q * scale) @ k.transpose(0, 1, 3, 2)
        if keys is not None:  # a masked key selected out at the dtype's lowest finite score: no -inf added
            scores = mx.where(keys, scores, mx.finfo(scores.dtype).min)
        probs = mx.softmax(scores, axis=-1, precise=True)
        taps[f"{self.tag}.attn_probs"] = probs
        return self.dropout(probs) @ v


class Mlp(nn.Module):
    """fc2(act(fc1 x)), or gated: fc2(act(gate x) * fc1 x) (SwiGLU when the activation is SiLU)."""

    def __init__(self, spec: ModelSpec, gated: bool, biases: dict[str, bool]) -> None:
        super().__init__()
        self.gate = nn.Linear(spec.dim, spec.mlp_dim, bias=biases["mlp.gate"]) if gated else None
        self.fc1 = nn.Linear(spec.dim, spec.mlp_dim, bias=biases["mlp.fc1"])
        self.act = activation(spec.activation)
        self.fc2 = nn.Linear(spec.mlp_dim, spec.dim, bias=biases["mlp.fc2"])
        self.drop = nn.Dropout(spec.dropout_mlp)

    def __call__(self, x: mx.array) -> mx.array:
        h = self.act(self.fc1(x)) if self.gate is None else self.act(self.gate(x)) * self.fc1(x)
        return self.drop(self.fc2(self.drop(h)))


class LayerScale(nn.Module):
    """A learned per-channel gamma on a residual branch (DINOv2, DeiT-III; timm's ls1 / ls2)."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        self.gamma = mx.ones((spec.dim,))

    def __call__(self, x: mx.array) -> mx.array:
        return x * self.gamma


class Block(nn.Module):
    def __init__(self, spec: ModelSpec, index: int) -> None:
        super().__init__()
        self.tag, self.pre_norm = f"block{index}", spec.norm == "pre"
        # Window attention (Qwen2.5-VL's): this block reads the window mask, not the batch's.
        self.windowed = spec.window_size > 0 and index not in spec.full_attention_blocks
        self.norm1 = norm_layer(spec, spec.dim, "blocks")
        biases = projection_biases(spec, "blocks")
        kv_heads = spec.derived.kv_heads  # grouped-query attention: the blocks' key/value heads
        self.attn = Attention(spec, self.tag, biases, spec.qk_norm, spec.rope != "none", kv_heads)
        self.ls1 = LayerScale(spec) if spec.layer_scale else nn.Identity()
        self.norm2 = norm_layer(spec, spec.dim, "blocks")
        self.mlp = Mlp(spec, spec.mlp == "gated", biases)
        self.ls2 = LayerScale(spec) if spec.layer_scale else nn.Identity()

    def __call__(self, x: mx.array, taps: Taps = NO_TAPS, key_mask: mx.array | None = None,
                 rope_rows: mx.array | None = None) -> mx.array:
        t = taps
        if self.pre_norm:  # x + f(LN(x))
            h = t[f"{self.tag}.norm1"] = self.norm1(x)
            x = x + (a := self.ls1(self.attn(h, t, key_mask=key_mask, rope_rows=rope_rows)))
            t[f"{self.tag}.attn"] = a
            h = t[f"{self.tag}.norm2"] = self.norm2(x)
            x = x + (m := self.ls2(self.mlp(h)))
            t[f"{self.tag}.mlp"] = m
        else:  # post: LN(x + f(x))
            t[f"{self.tag}.attn"] = a = self.ls1(self.attn(x, t, key_mask=key_mask, rope_rows=rope_rows))
            x = t[f"{self.tag}.norm1"] = self.norm1(x + a)
            t[f"{self.tag}.mlp"] = m = self.ls2(self.mlp(x))
            x = t[f"{self.tag}.norm2"] = self.norm2(x + m)
        t[f"{self.tag}.out"] = x
        return x


class AttentionPool(nn.Module):
    """big_vision's MAPHead (timm's attention pool, SigLIP's head): a learned probe attends over
    every token, then y + MLP(LN(y)); the probe's row is the pooled vector."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        self.probe = mx.zeros((spec.dim,))
        biases = projection_biases(spec, "pool")
        self.attn = Attention(spec, "pool", biases, qk_norm=False, rope=False, kv_heads=spec.heads)
        self.norm = norm_layer(spec, spec.dim, "pool")
        self.mlp = Mlp(spec, gated=False, biases=biases)

    def __call__(self, x: mx.array, taps: Taps = NO_TAPS,
                 pool_mask: mx.array | None = None) -> mx.array:
        images = 1 if pool_mask is None else pool_mask.shape[1]  # a probe per image, over its own tokens
        probe = mx.broadcast_to(self.probe, (x.shape[0], images, x.shape[-1]))
        y = self.attn(x, taps, queries=probe, key_mask=pool_mask)
        # (B * images, D): the rows are the images
        return (y + self.mlp(self.norm(y))).reshape(-1, x.shape[-1])


class Merger(nn.Module):
    """Qwen's patch merger: each token normed, each merge unit's tokens side by side (the batch's
    merge index, shared/core/batching.py's merge_index), then fc2(GELU(fc1 x)) with exact GELU. A
    deepstack merger (Qwen3-VL's) norms each unit's concatenated tokens instead (`postshuffle`)."""

    def __init__(self, spec: ModelSpec, postshuffle: bool = False) -> None:
        super().__init__()
        self.unit = spec.derived.merge_unit  # a merge unit's tokens, concatenated
        self.postshuffle = postshuffle
        self.norm = norm_layer(spec, self.unit if postshuffle else spec.dim, "merger")
        self.fc1 = nn.Linear(self.unit, self.unit)
        self.act = activation("gelu")
        self.fc2 = nn.Linear(self.unit, spec.merger_dim)

    def __call__(self, x: mx.array, merge_index: mx.array) -> mx.array:
        h = mx.take_along_axis(x if self.postshuffle else self.norm(x), merge_index[..., None], axis=1)
        h = h.reshape(h.shape[0], -1, self.unit)
        x = self.fc2(self.act(self.fc1(self.norm(h) if self.postshuffle else h)))
        return x.astype(self.fc2.weight.dtype)  # the new stream: the parameter dtype


class Head(nn.Module):
    """Hidden Linear + activation + dropout layers, then the class logits (none: num_classes 0)."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        widths = [spec.derived.pooled_dim, *spec.head_hidden]
        self.hidden = [nn.Linear(a, b) for a, b in pairwise(widths)]  # a plain list is a child list
        self.act = activation(spec.head_activation)
        self.drop = nn.Dropout(spec.dropout_head)
        bias = spec.derived.has_bias["head.out"]
        self.out = nn.Linear(widths[-1], spec.num_classes, bias=bias) if spec.num_classes else None

    def __call__(self, x: mx.array) -> mx.array:
        for layer in self.hidden:
            x = self.drop(self.act(layer(x)))
        return x if self.out is None else self.out(x)


def resample_positions(spec: ModelSpec, table: mx.array) -> mx.array:
    """The used rows of a learned table with its patch rows resampled from the table's grid to the
    image's by RESAMPLE_OPS[spec.pos_resample], the prefix rows kept aside (as the reference's
    shared/core/positions.py resampled_table)."""
    d, k = spec.derived, positioned_prefix(spec)
    source, target = (d.pos_grid_rows, d.pos_grid_cols), (d.grid_rows, d.grid_cols)
    if spec.pos_resample == "none" or source == target:  # every library returns early at the same size
        return table
    grid, options = table[k:].reshape(1, *source, spec.dim), RESAMPLE_OPS[spec.pos_resample]
    # Upsample takes a factor and makes int(factor * in) rows: the factor out / in, raised by an ulp
    # where its float product falls short of `out` (7 * (61 / 7) < 61).
    factors = []
    for n_in, n_out in zip(source, target, strict=True):
        factor = n_out / n_in
        factors.append(factor if int(factor * n_in) == n_out else math.nextafter(factor, math.inf))
    grid = nn.Upsample(tuple(factors), **options)(grid)
    # In the table's dtype: Upsample's float32 weights promote a narrower table.
    grid = grid.reshape(d.num_patches, spec.dim).astype(table.dtype)
    return mx.concatenate([table[:k], grid])


def resize_weights(size_in: int, sizes_out: mx.array, length: int, method: str) -> mx.array:
    """(B, length, size_in): each image's weights along one axis, from the table's size_in rows to its
    own size (sizes_out (B,), traced). Antialiased: output i centred at (i + 0.5) * in / out, the kernel
    stretched by in / out when shrinking, renormalised over the table's taps (shared/core/resample.py's
    antialiased_weights); big_vision_zoom: output i at i * (in - 1) / (out - 1), corners on corners
    (Qwen3-VL's aligned bilinear), the triangle unstretched. Rows from an image's own size on are never
    read."""
    index = mx.arange(length, dtype=mx.float32)[None, :, None]
    if method == "big_vision_zoom":  # corners on corners: the last output row on the last table row
        ratio = (size_in - 1) / mx.maximum(sizes_out.astype(mx.float32) - 1.0, 1.0)[:, None, None]
        taps = mx.arange(size_in, dtype=mx.float32)[None, None, :]
        return mx.maximum(1.0 - mx.abs(taps - index * ratio), 0.0)
    step = size_in / sizes_out.astype(mx.float32)[:, None, None]  # (B, 1, 1)
    centre = (index + 0.5) * step
    taps = mx.arange(size_in, dtype=mx.float32)[None, None, :] + 0.5
    weights = IMAGE_RESIZE_KERNELS[method]((taps - centre) / mx.maximum(step, 1.0))
    total = weights.sum(axis=-1, keepdims=True)
    # a zero sum (an output row past the table's reach) gives zero weights, never 0 / 0
    return mx.where(total > 0, weights / mx.where(total > 0, total, 1.0), 0.0)


def image_positions(spec: ModelSpec, table: mx.array, grids: mx.array,
                    position_rows: mx.array) -> mx.array:
    """A naflex or packed batch's positions (B, seq_len, D): the table's grid resized to each
    image's own by resize_weights (spec.pos_resample's) in float32 (SigLIP2's upcast), each
    image's in the spec's whole grid, the images one after another, and read by each token at
    its row (shared/core/batching.py's position_rows); zero rows on the prefix tokens and the
    padding, whose row is -1 (as the reference's shared/core/positions.py)."""
    d, method = spec.derived, spec.pos_resample
    grid = table[: d.pos_rows_used].astype(mx.float32).reshape(d.pos_grid_rows, d.pos_grid_cols, spec.dim)
    # Fixed shapes (the grids are traced under the compiled forward): every image's resize fills the
    # spec's whole (grid_rows, grid_cols) grid, each by its own weights, and its patches are read from it.
    sizes = grids.reshape(-1, 2)  # every image of every sequence
    rows_w = resize_weights(d.pos_grid_rows, sizes[:, 0], d.grid_rows, method)
    cols_w = resize_weights(d.pos_grid_cols, sizes[:, 1], d.grid_cols, method)
    resized = mx.einsum("bri,ijd,bcj->brcd", rows_w, grid, cols_w)  # (images, rows, cols, D)
    resized = resized.reshape(grids.shape[0], -1, spec.dim)  # each sequence's images, one after another
    out = mx.take_along_axis(resized, mx.maximum(position_rows, 0)[..., None], axis=1)
    return mx.where(position_rows[..., None] >= 0, out, 0.0).astype(table.dtype)


def masked_mean(x: mx.array, pool_mask: mx.array) -> mx.array:
    """Each image's mean over its own tokens (shared/core/batching.py's pool_mask: (B, images, tokens)):
    the others selected out (never multiplied by 0, which keeps a NaN), divided by its count; the
    rows are the images, sequence by sequence."""
    valid = pool_mask[..., None]  # (B, images, tokens, 1)
    means = mx.where(valid, x[:, None], 0).sum(axis=2) / valid.sum(axis=2).astype(x.dtype)
    return means.reshape(-1, x.shape[-1])


class VisionTransformer(nn.Module):
    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        d = spec.derived
        self.spec = spec
        self.patch_embed = PatchEmbed(spec)
        self.cls_token = mx.zeros((spec.dim,)) if spec.class_token else None
        self.dist_token = mx.zeros((spec.dim,)) if spec.distill_token else None
        self.reg_tokens = mx.zeros((spec.registers, spec.dim)) if spec.registers else None
        self.pos_embed = None
        if spec.pos_embed == "learned":  # the whole table; only the first rows are used
            self.pos_embed = mx.zeros((d.pos_rows_total, spec.dim))
        # fixed, not a parameter: MLX leaves keys starting with "_" out of
        # parameters() (a frozen array would still be counted there).
        self._pos_table = None
        if spec.pos_embed == "sincos":
            self._pos_table = mx.array(sequence_positions(spec).astype(np.float32))
        self.pos_drop = nn.Dropout(spec.dropout_embed)
        self.norm_pre = norm_layer(spec, spec.dim, "pre") if spec.norm_before_blocks else None
        self.blocks = [Block(spec, i) for i in range(spec.depth)]
        self.final_norm = None
        if spec.final_norm != "none":
            width = d.pooled_dim if spec.final_norm == "pooled" else spec.dim
            self.final_norm = norm_layer(spec, width, "final")
        self.merger = Merger(spec) if spec.merge_size > 1 else None
        self.deepstack = [Merger(spec, postshuffle=True) for _ in spec.deepstack_blocks]
        self.pool = AttentionPool(spec) if spec.pooling == "map" else None
        self.head = Head(spec)
        self.head_dist = nn.Linear(spec.dim, spec.num_classes) if spec.distill_token else None

    def prefix(self, batch: int) -> mx.array | None:
        """The class, distillation and register tokens, in that order, for every image."""
        tokens = [t.reshape(-1, self.spec.dim) for t in (self.cls_token, self.dist_token, self.reg_tokens)
                  if t is not None]
        shape = (batch, self.spec.derived.prefix_tokens, self.spec.dim)
        return mx.broadcast_to(mx.concatenate(tokens), shape) if tokens else None

    def positions(self, grids: mx.array | None = None,
                  position_rows: mx.array | None = None) -> mx.array | None:
        """The table added to the whole sequence: a learned table's grid resampled to the image's
        (resample_positions), then zero rows for the prefix tokens it has no row for
        (shared/core/positions.py's sequence_positions; adding zero is exact); a naflex or packed
        batch's resized to each image's grid (image_positions)."""
        if self.pos_embed is not None and grids is not None:
            return image_positions(self.spec, self.pos_embed, grids, position_rows)
        if self.pos_embed is None:
            # set_dtype casts parameters only: the fixed table follows the patch embedding's dtype.
            fixed = self._pos_table
            return None if fixed is None else fixed.astype(self.patch_embed.proj.weight.dtype)
        table = resample_positions(self.spec, self.pos_embed[: self.spec.derived.pos_rows_used])
        missing = unpositioned(self.spec)
        if not missing:
            return table
        k = positioned_prefix(self.spec)
        return mx.concatenate([table[:k], mx.zeros((missing, self.spec.dim), dtype=table.dtype), table[k:]])

    def __call__(self, x: mx.array, taps: Taps = NO_TAPS, key_mask: mx.array | None = None,
                 pool_mask: mx.array | None = None, grids: mx.array | None = None,
                 rope_rows: mx.array | None = None, window_mask: mx.array | None = None,
                 merge_index: mx.array | None = None, position_rows: mx.array | None = None) -> mx.array:
        """`key_mask`: a naflex batch's key-padding mask (B, tokens) or a packed batch's block-diagonal
        (B, tokens, tokens); `pool_mask` (B, images, tokens): the tokens each image pools (both
        shared/core/batching.py's); `grids`: each sequence's image grids (its `grid` field);
        `rope_rows` (B, tokens): each token's rotary row (shared/core/rotary.py's token_rows);
        `window_mask` (B, tokens, tokens): the window blocks' mask (batching.py's window_mask);
        `merge_index` (B, tokens): the merger's gather (batching.py's merge_index); `position_rows`
        (B, tokens): the row of the resized tables each token reads (batching.py's position_rows)."""
        s, t = self.spec, taps
        x = t["patch_embed"] = self.patch_embed(x)
        prefix = self.prefix(x.shape[0])
        if prefix is not None:  # [class, distillation, registers] then the patches
            x = mx.concatenate([prefix.astype(x.dtype), x], axis=1)
        table = self.positions(grids, position_rows)
        if table is not None:
            x = x + table
        x = t["pos_embed"] = self.pos_drop(x)
        if self.norm_pre is not None:  # CLIP's ln_pre
            x = t["norm_pre"] = self.norm_pre(x)
        for i, blk in enumerate(self.blocks):  # a window block attends within each image's windows
            x = blk(x, t, window_mask if blk.windowed else key_mask, rope_rows)
            if i in s.deepstack_blocks and t is not NO_TAPS:  # Qwen3-VL's extra outputs, when asked for
                j = s.deepstack_blocks.index(i)
                t[f"deepstack.{j}"] = self.deepstack[j](x, merge_index)
        if s.final_norm == "tokens":
            x = t["final_norm"] = self.final_norm(x)
        tokens = x
        if self.merger is not None:  # Qwen's patch merger: the merged tokens are what is pooled
            x = t["merger"] = self.merger(x, merge_index)
        if s.pooling == "cls":
            x = x[:, 0]
        elif s.pooling in ("mean", "mean_all") and pool_mask is not None:
            x = masked_mean(x, pool_mask)
        elif s.pooling == "mean":
            x = x[:, s.derived.prefix_tokens:].mean(axis=1)  # patch tokens only
        elif s.pooling == "mean_all":
            x = x.mean(axis=1)  # every token, class token included (keras-hub's gap)
        elif s.pooling == "map":
            x = self.pool(x, t, pool_mask)
        else:
            x = x.reshape(x.shape[0], -1)
        if s.final_norm == "pooled":
            x = self.final_norm(x)
        t["pooled"] = x
        x = self.head(x)
        if self.head_dist is not None:  # inference: the mean of the class and distillation heads
            x = (x + self.head_dist(tokens[:, 1])) / 2
        t["logits"] = x
        return x
