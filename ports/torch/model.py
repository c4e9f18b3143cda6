"""The spec's model in PyTorch (`torch.nn`), NCHW input.

Parallel text: every native port's model.py (ports/torch, keras, flax and mlx) has the same
classes in the same order; a diff between two of them shows only the framework idiom.
"""

from __future__ import annotations

from itertools import pairwise

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from shared.core.positions import sequence_positions, unpositioned
from shared.core.resample import dinov2_legacy_factor
from shared.core.rotary import rotary_tables
from shared.core.spec import ModelSpec, positioned_prefix, projection_biases
from shared.core.taps import NO_TAPS, Taps

NARROW_HEAD = 8  # the default for head widths up to this is the explicit path (port.py's run_modes)

# The ways Attention computes the same softmax(q k^T) v: the library's fused kernel or the explicit
# path. Which one a run uses is a mode the port chooses (port.py's run_modes), never a constant.
ATTENTION_PATHS = ("fused", "explicit")

# Each pos_resample method this port computes, with the framework operation that computes it exactly
# (shared/core/resample.py defines each; F.interpolate here). A method in RESAMPLE_MISSING has no such
# operation: ports.create_port refuses it with that reason, never a substitute.
RESAMPLE_OPS: dict[str, dict] = {
    # a = -0.75, half-pixel source coordinates, the taps clamped to the edge
    "timm_bicubic": {"mode": "bicubic", "align_corners": False},
    "hf_bicubic": {"mode": "bicubic", "align_corners": False},
    # PIL's filter: a = -0.5, stretched when shrinking, outside taps dropped and renormalised
    "timm_bicubic_antialias": {"mode": "bicubic", "align_corners": False, "antialias": True},
    # called with DINOv2's scale factor (out + 0.1) / in, not a size
    "dinov2_legacy": {"mode": "bicubic", "align_corners": False},
    # scipy's first-order zoom samples corners on corners: align_corners=True
    "big_vision_zoom": {"mode": "bilinear", "align_corners": True},
    "bilinear": {"mode": "bilinear", "align_corners": False},
    # PIL's triangle: stretched when shrinking, outside taps dropped and renormalised
    "bilinear_antialias": {"mode": "bilinear", "align_corners": False, "antialias": True},
}
RESAMPLE_MISSING: dict[str, str] = {}


def activation(form: str) -> nn.Module:
    # Always pass the GELU form: torch's default is exact, Flax's and keras.ops' are tanh.
    if form in ("gelu", "gelu_tanh"):
        return nn.GELU(approximate="none" if form == "gelu" else "tanh")
    # QuickGELU (OpenAI CLIP): x * sigmoid(1.702 x), no framework has it as a layer; SiLU: x * sigmoid(x).
    return QuickGELU() if form == "quick_gelu" else nn.SiLU()


class QuickGELU(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(1.702 * x)


def norm_layer(spec: ModelSpec, width: int, place: str) -> nn.LayerNorm | nn.RMSNorm:
    # Always pass epsilon, the one of the norm's place: torch and MLX 1e-5, Keras 1e-3 and Flax 1e-6
    # by default (RMSNorm: torch the dtype's machine epsilon, MLX 1e-5, Keras and Flax 1e-6).
    if spec.norm_type == "rms_norm":  # a scale, no bias, no mean subtracted
        return nn.RMSNorm(width, eps=spec.derived.norm_eps[place])
    return nn.LayerNorm(width, eps=spec.derived.norm_eps[place])


class PatchEmbed(nn.Module):
    """Pad (or drop) the remainder, then one Conv2d with kernel = stride = patch size; optional
    LayerNorms on each flattened patch before it and on each token after it (vit-pytorch). A naflex
    batch arrives patchified: the conv kernel is applied as a matmul (SigLIP2's Linear). Over T > 1
    frames it is a 3-D conv (Qwen's) on the image repeated to fill them, as the processors do."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        d = spec.derived
        # F.pad order is (left, right, top, bottom): zeros at the bottom and right only.
        self.padding = (0, d.cols_padded, 0, d.rows_padded)
        # `drop`: crop the remainder explicitly, so no conv kernel ever sees it (see Keras' port).
        self.used = (d.grid_rows * spec.patch_height, d.grid_cols * spec.patch_width)
        self.grid, self.patch = (d.grid_rows, d.grid_cols), (spec.patch_height, spec.patch_width)
        self.norm_in = norm_layer(spec, d.patch_features, "patch") if spec.patch_norm_in else None
        self.frames = spec.temporal_patch_size  # 1: an image's 2-D patch
        conv, kernel = (nn.Conv3d, (self.frames, *self.patch)) if self.frames > 1 else (nn.Conv2d, self.patch)
        self.proj = conv(spec.channels, spec.dim, kernel_size=kernel, stride=kernel, padding=0,
                         bias=spec.patch_bias)
        self.norm_out = norm_layer(spec, spec.dim, "patch") if spec.patch_norm_out else None
        self.patchified = spec.batching != "fixed"  # (B, max_patches, ph*pw*C), not an image

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.patchified:
            if any(self.padding):
                x = F.pad(x, self.padding)
            x = x[:, :, : self.used[0], : self.used[1]]  # NCHW
        if self.norm_in is None and not self.patchified:
            x = x if self.frames == 1 else torch.stack([x] * self.frames, dim=2)  # (B, C, T, H, W)
            x = self.proj(x).flatten(2).transpose(1, 2)  # (B, D, [1,] rows, cols) -> (B, tokens, D)
        else:  # the patches as rows (a LayerNorm on each first): the conv kernel applied as a matmul
            x = x if self.patchified else self.unfold(x)
            x = x if self.norm_in is None else self.norm_in(x)
            x = x if self.frames == 1 else x.repeat(1, 1, self.frames)  # (T, ph, pw, C): a patch a frame
            kernel = self.proj.weight.movedim(1, -1).flatten(1)  # OI[T]HW -> (D, [T*]ph*pw*C)
            x = F.linear(x, kernel, self.proj.bias)
        if self.norm_out is not None:
            x = self.norm_out(x)
        return x.to(self.proj.weight.dtype)  # the token stream is held in the parameter dtype

    def unfold(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) -> (B, tokens, ph*pw*C): patches row-major, each flattened (ph, pw, C)."""
        (rows, cols), (ph, pw) = self.grid, self.patch
        x = x.reshape(x.shape[0], x.shape[1], rows, ph, cols, pw)
        return x.permute(0, 2, 4, 3, 5, 1).reshape(x.shape[0], rows * cols, -1)


class Rotary(nn.Module):
    """2-D rotary position embeddings on one head's queries or keys: x * cos + x[partner] * sin,
    with shared/core/rotary.py's tables (timm's apply_rot_embed in either layout). The prefix
    tokens' rows are cos 1 and sin 0: they pass through unrotated, as timm and DINOv3 split them off."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        t = rotary_tables(spec)
        # Fixed, not parameters. Rows are tokens: q and k are (B, H, N, hd) here.
        self.register_buffer("cos", torch.tensor(t.cos, dtype=torch.float32), persistent=False)
        self.register_buffer("sin", torch.tensor(t.sin, dtype=torch.float32), persistent=False)
        self.register_buffer("partner", torch.tensor(t.partner), persistent=False)

    def forward(self, x: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        # In x's dtype (the compute dtype), as the product reads it. `rows` (B, N): a naflex or packed
        # batch's row of the table for each token (shared/core/rotary.py's token_rows), per sequence.
        cos, sin = self.cos, self.sin
        if rows is not None:
            cos, sin = cos[rows][:, None], sin[rows][:, None]  # (B, 1, N, hd): broadcast over the heads
        return x * cos.to(x.dtype) + x[..., self.partner] * sin.to(x.dtype)


class Attention(nn.Module):
    """Multi-head attention with its own head width.

    nn.MultiheadAttention fixes the head width to embed_dim / num_heads (and defaults to
    batch_first=False), so it cannot express a spec whose head_dim is its own field (Keras'
    key_dim). This module packs q, k, v into one Linear (as timm does) and calls
    scaled_dot_product_attention, torch's fused kernel. `biases` says which projections have a
    bias (spec.projection_biases): the packed Linear's bias when q, k and v all have one; otherwise
    the Linear has none and each part that has one holds its own (timm's EVA: q_bias and v_bias)."""

    def __init__(self, spec: ModelSpec, tag: str, biases: dict[str, bool], qk_norm: bool, rope: bool,
                 kv_heads: int) -> None:
        super().__init__()
        self.tag, self.heads, self.head_dim = tag, spec.heads, spec.head_dim
        self.inner = spec.derived.attn_inner
        # Grouped-query attention: k and v of kv_heads heads each, packed after q's rows.
        self.widths = [self.inner, kv_heads * spec.head_dim, kv_heads * spec.head_dim]
        self.group = spec.heads // kv_heads  # query heads per k/v head (a Python int: ONNX tracing)
        parts = [biases[f"attn.{p}"] for p in ("query", "key", "value")]
        self.qkv = nn.Linear(spec.dim, sum(self.widths), bias=all(parts))
        self.q_bias, self.k_bias, self.v_bias = (
            nn.Parameter(torch.zeros(width)) if own and not all(parts) else None
            for own, width in zip(parts, self.widths, strict=True))
        # qk-norm (timm's qk_norm): the spec's norm over each head's width, on queries and keys.
        self.q_norm = norm_layer(spec, spec.head_dim, "qk") if qk_norm else None
        self.k_norm = norm_layer(spec, spec.head_dim, "qk") if qk_norm else None
        # RoPE: each head's patch queries and keys rotated after qk-norm, before the product.
        self.rope = Rotary(spec) if rope else None
        self.out = nn.Linear(self.inner, spec.dim, bias=biases["attn.out"])
        self.dropout = spec.dropout_attn
        self.attention_path = "fused"  # one of ATTENTION_PATHS: the port's mode sets it (port.py's set_mode)

    def forward(self, x: torch.Tensor, taps: Taps = NO_TAPS, queries: torch.Tensor | None = None,
                key_mask: torch.Tensor | None = None, rope_rows: torch.Tensor | None = None) -> torch.Tensor:
        q, k, v = self.project(x, queries)  # each (B, H, N, hd)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        if self.rope is not None:
            q, k = self.rope(q, rope_rows), self.rope(k, rope_rows)
        b, n = q.shape[0], q.shape[2]
        scale = self.head_dim**-0.5  # 1/sqrt(head width), not 1/sqrt(dim)
        dropout = self.dropout if self.training else 0.0
        # A naflex batch's key padding (B, keys) or a packed batch's block-diagonal mask (B, queries,
        # keys) -> (B, 1, 1 or queries, keys), True = attend, as SDPA's boolean attn_mask reads it.
        # No row is fully masked (a padding query attends to valid keys or to the padding), so none
        # becomes NaN.
        keys = None if key_mask is None else key_mask.reshape(key_mask.shape[0], 1, -1, key_mask.shape[-1])
        # Taps asked for: the explicit path, so the probabilities tapped are the ones applied.
        # Also when the mode asks for it (self.attention_path).
        if taps is not NO_TAPS or self.attention_path == "explicit":
            context = self.explicit(q, k, v, scale, dropout, taps, keys)
        else:
            # enable_gqa: the kernel shares each k/v head with its group of query heads itself.
            context = F.scaled_dot_product_attention(q, k, v, attn_mask=keys, dropout_p=dropout, scale=scale,
                                                     enable_gqa=self.group > 1)
        return self.out(context.transpose(1, 2).reshape(b, n, -1))

    def project(self, x: torch.Tensor, queries: torch.Tensor | None) -> tuple[torch.Tensor, ...]:
        """q, k, v as (B, H, N, hd). `queries` (the attention pool's probe) attend over `x`: the
        packed Linear's query rows project them, its key and value rows project `x`."""
        def heads(y: torch.Tensor) -> torch.Tensor:  # (B, N, H*hd) -> (B, H, N, hd)
            return y.reshape(y.shape[0], y.shape[1], -1, self.head_dim).transpose(1, 2)

        weight, bias, own = self.qkv.weight, self.qkv.bias, (self.q_bias, self.k_bias, self.v_bias)
        if any(b is not None for b in own):
            bias = torch.cat([weight.new_zeros(width) if b is None else b
                              for b, width in zip(own, self.widths, strict=True)])
        if queries is None:
            return tuple(heads(y) for y in F.linear(x, weight, bias).split(self.widths, dim=-1))
        split = [None, None] if bias is None else [bias[: self.inner], bias[self.inner :]]
        q = F.linear(queries, weight[: self.inner], split[0])
        k, v = F.linear(x, weight[self.inner :], split[1]).split(self.widths[1:], dim=-1)
        return heads(q), heads(k), heads(v)

    def explicit(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, dropout: float,
                 taps: Taps, keys: torch.Tensor | None = None) -> torch.Tensor:
        """softmax(q k^T) v with its probabilities materialised: the tapped `attn_probs` are the
        tensor that weighted v in this forward pass, never a recomputation beside a fused kernel."""
        # The softmax in float32, its probabilities rounded to the compute dtype (a no-op in fp32).
        # Grouped-query attention: each k/v head serves self.group consecutive query heads.
        k, v = k.repeat_interleave(self.group, dim=1), v.repeat_interleave(self.group, dim=1)
        scores = ((q * scale) @ k.transpose(-2, -1)).float()
        if keys is not None:  # a masked key selected out at float32's lowest finite score: no -inf added
            scores = scores.masked_fill(~keys, torch.finfo(scores.dtype).min)
        probs = torch.softmax(scores, dim=-1).to(v.dtype)
        taps[f"{self.tag}.attn_probs"] = probs
        return F.dropout(probs, dropout) @ v


class Mlp(nn.Module):
    """fc2(act(fc1 x)), or gated: fc2(act(gate x) * fc1 x) (SwiGLU when the activation is SiLU)."""

    def __init__(self, spec: ModelSpec, gated: bool, biases: dict[str, bool]) -> None:
        super().__init__()
        self.gate = nn.Linear(spec.dim, spec.mlp_dim, bias=biases["mlp.gate"]) if gated else None
        self.fc1 = nn.Linear(spec.dim, spec.mlp_dim, bias=biases["mlp.fc1"])
        self.act = activation(spec.activation)
        self.fc2 = nn.Linear(spec.mlp_dim, spec.dim, bias=biases["mlp.fc2"])
        self.drop = nn.Dropout(spec.dropout_mlp)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.act(self.fc1(x)) if self.gate is None else self.act(self.gate(x)) * self.fc1(x)
        return self.drop(self.fc2(self.drop(h)))


class LayerScale(nn.Module):
    """A learned per-channel gamma on a residual branch (DINOv2, DeiT-III; timm's ls1 / ls2)."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(spec.dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
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

    def forward(self, x: torch.Tensor, taps: Taps = NO_TAPS, key_mask: torch.Tensor | None = None,
                rope_rows: torch.Tensor | None = None) -> torch.Tensor:
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
        self.probe = nn.Parameter(torch.zeros(spec.dim))
        biases = projection_biases(spec, "pool")
        self.attn = Attention(spec, "pool", biases, qk_norm=False, rope=False, kv_heads=spec.heads)
        self.norm = norm_layer(spec, spec.dim, "pool")
        self.mlp = Mlp(spec, gated=False, biases=biases)

    def forward(self, x: torch.Tensor, taps: Taps = NO_TAPS,
                pool_mask: torch.Tensor | None = None) -> torch.Tensor:
        images = 1 if pool_mask is None else pool_mask.shape[1]  # a probe per image, over its own tokens
        probe = self.probe.expand(x.shape[0], images, -1)
        y = self.attn(x, taps, queries=probe, key_mask=pool_mask).to(x.dtype)
        # (B * images, D): the rows are the images
        return (y + self.mlp(self.norm(y))).flatten(0, 1)


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

    def forward(self, x: torch.Tensor, merge_index: torch.Tensor) -> torch.Tensor:
        h = torch.take_along_dim(x if self.postshuffle else self.norm(x), merge_index[..., None], dim=1)
        h = h.reshape(h.shape[0], -1, self.unit)
        x = self.fc2(self.act(self.fc1(self.norm(h) if self.postshuffle else h)))
        return x.to(self.fc2.weight.dtype)  # the new stream: the parameter dtype


class Head(nn.Module):
    """Hidden Linear + activation + dropout layers, then the class logits (none: num_classes 0)."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        widths = [spec.derived.pooled_dim, *spec.head_hidden]
        self.hidden = nn.ModuleList(nn.Linear(a, b) for a, b in pairwise(widths))
        self.act = activation(spec.head_activation)
        self.drop = nn.Dropout(spec.dropout_head)
        bias = spec.derived.has_bias["head.out"]
        self.out = nn.Linear(widths[-1], spec.num_classes, bias=bias) if spec.num_classes else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.hidden:
            x = self.drop(self.act(layer(x)))
        return x if self.out is None else self.out(x)


def resample_positions(spec: ModelSpec, table: torch.Tensor) -> torch.Tensor:
    """The used rows of a learned table with its patch rows resampled from the table's grid to the
    image's by RESAMPLE_OPS[spec.pos_resample], the prefix rows kept aside (as the reference's
    shared/core/positions.py resampled_table)."""
    d, k = spec.derived, positioned_prefix(spec)
    source, target = (d.pos_grid_rows, d.pos_grid_cols), (d.grid_rows, d.grid_cols)
    if spec.pos_resample == "none" or source == target:  # every library returns early at the same size
        return table
    grid = table[k:].reshape(1, *source, spec.dim).permute(0, 3, 1, 2)  # (1, D, rows, cols)
    if spec.pos_resample == "dinov2_legacy":
        factors = tuple(dinov2_legacy_factor(a, b) for a, b in zip(source, target, strict=True))
        grid = F.interpolate(grid, scale_factor=factors, **RESAMPLE_OPS[spec.pos_resample])
    else:
        grid = F.interpolate(grid, size=target, **RESAMPLE_OPS[spec.pos_resample])
    return torch.cat([table[:k], grid.permute(0, 2, 3, 1).reshape(d.num_patches, spec.dim)])


def image_positions(spec: ModelSpec, table: torch.Tensor, grids: torch.Tensor,
                    position_rows: torch.Tensor) -> torch.Tensor:
    """A naflex or packed batch's positions (B, seq_len, D): the table's grid resized to each
    image's own by RESAMPLE_OPS[spec.pos_resample] in float32 (SigLIP2's upcast), each image's
    in the spec's whole grid, the images one after another, and read by each token at its row
    (shared/core/batching.py's position_rows); zero rows on the prefix tokens and the padding,
    whose row is -1 (as the reference's shared/core/positions.py)."""
    d, options = spec.derived, RESAMPLE_OPS[spec.pos_resample]
    grid = table[: d.pos_rows_used].float().reshape(1, d.pos_grid_rows, d.pos_grid_cols, spec.dim)
    # (1, D, rows, cols) held channels-last with every stride dense: torch's antialiased resize to one
    # column repeats the first row of a contiguous NCHW grid, and of Transformers 4.x's
    # permute(2, 0, 1).unsqueeze(0) (its batch stride D) (measured, torch 2.14 CPU).
    grid = grid.permute(0, 3, 1, 2).contiguous(memory_format=torch.channels_last)
    sizes = grids.reshape(-1, 2).tolist()  # every image of every sequence
    resized = grid.new_zeros(len(sizes), d.grid_rows, d.grid_cols, spec.dim)
    for i, (rows, cols) in enumerate(sizes):  # a loop, as Siglip2VisionEmbeddings
        resized[i, :rows, :cols] = F.interpolate(grid, size=(rows, cols), **options)[0].permute(1, 2, 0)
    resized = resized.reshape(len(grids), -1, spec.dim)  # each sequence's images, one after another
    out = torch.take_along_dim(resized, position_rows.clamp(min=0)[..., None], dim=1)
    return torch.where(position_rows[..., None] >= 0, out, 0.0).to(table.dtype)


def masked_mean(x: torch.Tensor, pool_mask: torch.Tensor) -> torch.Tensor:
    """Each image's mean over its own tokens (shared/core/batching.py's pool_mask: (B, images, tokens)):
    the others selected out (never multiplied by 0, which keeps a NaN), divided by its count; the
    rows are the images, sequence by sequence."""
    valid = pool_mask[..., None]  # (B, images, tokens, 1)
    means = torch.where(valid, x[:, None], 0).sum(dim=2) / valid.sum(dim=2).to(x.dtype)
    return means.flatten(0, 1)


class VisionTransformer(nn.Module):
    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        d = spec.derived
        self.spec = spec
        self.patch_embed = PatchEmbed(spec)
        self.cls_token = nn.Parameter(torch.zeros(spec.dim)) if spec.class_token else None
        self.dist_token = nn.Parameter(torch.zeros(spec.dim)) if spec.distill_token else None
        self.reg_tokens = nn.Parameter(torch.zeros(spec.registers, spec.dim)) if spec.registers else None
        self.pos_embed = None
        if spec.pos_embed == "learned":  # the whole table; only the first rows are used
            self.pos_embed = nn.Parameter(torch.zeros(d.pos_rows_total, spec.dim))
        elif spec.pos_embed == "sincos":  # fixed, not a parameter
            table = torch.tensor(sequence_positions(spec), dtype=torch.float32)
            self.register_buffer("pos_table", table, persistent=False)
        self.pos_drop = nn.Dropout(spec.dropout_embed)
        self.norm_pre = norm_layer(spec, spec.dim, "pre") if spec.norm_before_blocks else None
        self.blocks = nn.ModuleList(Block(spec, i) for i in range(spec.depth))
        self.final_norm = None
        if spec.final_norm != "none":
            width = d.pooled_dim if spec.final_norm == "pooled" else spec.dim
            self.final_norm = norm_layer(spec, width, "final")
        self.merger = Merger(spec) if spec.merge_size > 1 else None
        self.deepstack = nn.ModuleList(Merger(spec, postshuffle=True) for _ in spec.deepstack_blocks)
        self.pool = AttentionPool(spec) if spec.pooling == "map" else None
        self.head = Head(spec)
        self.head_dist = nn.Linear(spec.dim, spec.num_classes) if spec.distill_token else None

    def prefix(self, batch: int) -> torch.Tensor | None:
        """The class, distillation and register tokens, in that order, for every image."""
        tokens = [t.reshape(-1, self.spec.dim) for t in (self.cls_token, self.dist_token, self.reg_tokens)
                  if t is not None]
        return torch.cat(tokens).expand(batch, -1, -1) if tokens else None

    def positions(self, grids: torch.Tensor | None = None,
                  position_rows: torch.Tensor | None = None) -> torch.Tensor | None:
        """The table added to the whole sequence: a learned table's grid resampled to the image's
        (resample_positions), then zero rows for the prefix tokens it has no row for
        (shared/core/positions.py's sequence_positions; adding zero is exact); a naflex or packed
        batch's resized to each image's grid (image_positions)."""
        if self.pos_embed is not None and grids is not None:
            return image_positions(self.spec, self.pos_embed, grids, position_rows)
        if self.pos_embed is None:
            return getattr(self, "pos_table", None)
        table = resample_positions(self.spec, self.pos_embed[: self.spec.derived.pos_rows_used])
        missing = unpositioned(self.spec)
        if not missing:
            return table
        k = positioned_prefix(self.spec)
        return torch.cat([table[:k], table.new_zeros(missing, self.spec.dim), table[k:]])

    def forward(self, x: torch.Tensor, taps: Taps = NO_TAPS, key_mask: torch.Tensor | None = None,
                pool_mask: torch.Tensor | None = None, grids: torch.Tensor | None = None,
                rope_rows: torch.Tensor | None = None,
                window_mask: torch.Tensor | None = None,
                merge_index: torch.Tensor | None = None,
                position_rows: torch.Tensor | None = None) -> torch.Tensor:
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
            x = torch.cat([prefix.to(x.dtype), x], dim=1)
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
            x = x[:, s.derived.prefix_tokens:].mean(dim=1)  # patch tokens only
        elif s.pooling == "mean_all":
            x = x.mean(dim=1)  # every token, class token included (keras-hub's gap)
        elif s.pooling == "map":
            x = self.pool(x, t, pool_mask)
        else:
            x = x.flatten(1)
        if s.final_norm == "pooled":
            x = self.final_norm(x)
        t["pooled"] = x
        x = self.head(x)
        if self.head_dist is not None:  # inference: the mean of the class and distillation heads
            x = (x + self.head_dist(tokens[:, 1])) / 2
        t["logits"] = x
        return x
