"""The spec's model in Flax (`flax.nnx`), NHWC input.

Parallel text: every native port's model.py (ports/torch, keras, flax and mlx) has the same
classes in the same order; a diff between two of them shows only the framework idiom.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from itertools import pairwise

import jax
import jax.numpy as jnp
from flax import nnx

from shared.core.positions import sequence_positions, unpositioned
from shared.core.resample import zoom_points
from shared.core.rotary import rotary_tables
from shared.core.spec import ModelSpec, positioned_prefix, projection_biases
from shared.core.taps import NO_TAPS, Taps

# The ways Attention computes the same softmax(q k^T) v: the library's fused kernel or the explicit
# path. Which one a run uses is a mode the port chooses (port.py's run_modes), never a constant.
ATTENTION_PATHS = ("fused", "explicit")

# Each pos_resample method this port computes, with the framework operation that computes it exactly
# (shared/core/resample.py defines each; jax.image and jax.scipy.ndimage here). A method in
# RESAMPLE_MISSING has no such operation: ports.create_port refuses it with that reason, never a
# substitute.
RESAMPLE_OPS: dict[str, dict] = {
    # jax.image.resize, antialiased: a = -0.5, stretched when shrinking, outside taps dropped and
    # renormalised (PIL's filter)
    "timm_bicubic_antialias": {"method": "cubic", "antialias": True},
    # jax.scipy.ndimage.map_coordinates (order 1) at scipy.ndimage.zoom's corners-on-corners grid
    "big_vision_zoom": {"order": 1, "mode": "nearest"},
    "bilinear": {"method": "linear", "antialias": False},
    # PIL's triangle: stretched when shrinking, outside taps dropped and renormalised
    "bilinear_antialias": {"method": "linear", "antialias": True},
}
_JAX_CUBIC = ("jax.image.resize's and scale_and_translate's only cubic is Keys' a = -0.5, its edge taps "
              "renormalised: JAX has no a = -0.75 cubic with clamped taps")
RESAMPLE_MISSING: dict[str, str] = {
    "timm_bicubic": _JAX_CUBIC,
    "hf_bicubic": _JAX_CUBIC,
    "dinov2_legacy": _JAX_CUBIC + " (scale_and_translate would take DINOv2's scale factor)",
}


# Each GELU form's function, made once (and nnx.identity, not a lambda, where a block has no
# LayerScale): nnx.jit compares a model's static attributes by equality, and two partials or lambdas
# never compare equal, so one made per model would compile a jitted step again for every new model
# of the same spec (every seed of a training run).
GELU_FORMS: dict[str, Callable[[jax.Array], jax.Array]] = {}


def activation(form: str) -> Callable[[jax.Array], jax.Array]:
    # Always pass the GELU form: jax.nn.gelu (and nnx.gelu) default to the tanh approximation.
    if form in ("gelu", "gelu_tanh"):
        return GELU_FORMS.setdefault(form, partial(jax.nn.gelu, approximate=form != "gelu"))
    # QuickGELU (OpenAI CLIP): x * sigmoid(1.702 x), no framework has it as a layer; SiLU: x * sigmoid(x).
    return QuickGELU() if form == "quick_gelu" else jax.nn.silu


class QuickGELU(nnx.Module):
    def __call__(self, x: jax.Array) -> jax.Array:
        return x * jax.nn.sigmoid(1.702 * x)


def norm_layer(spec: ModelSpec, width: int, place: str, rngs: nnx.Rngs) -> nnx.LayerNorm | nnx.RMSNorm:
    # Always pass epsilon, the one of the norm's place: torch and MLX 1e-5, Keras 1e-3 and Flax 1e-6
    # by default (RMSNorm: torch the dtype's machine epsilon, MLX 1e-5, Keras and Flax 1e-6).
    if spec.norm_type == "rms_norm":  # a scale, no bias, no mean subtracted
        return nnx.RMSNorm(width, epsilon=spec.derived.norm_eps[place], rngs=rngs)
    # use_fast_variance=False: Flax's default E[x^2]-E[x]^2 loses precision when the residual
    # stream has a large mean.
    return nnx.LayerNorm(width, epsilon=spec.derived.norm_eps[place], use_fast_variance=False, rngs=rngs)


class FixedTable(nnx.Variable):
    """A constant (sincos positions): state, but not a trainable nnx.Param."""


# Precision (shared/core/precision.py): `dtype` is the compute dtype of the layers that compute
# (Conv, Linear, MultiHeadAttention): bfloat16 under mixed precision, beside float32 parameters
# (param_dtype); None elsewhere, where Flax computes in the inputs' and parameters' dtype.


class PatchEmbed(nnx.Module):
    """Pad (or drop) the remainder, then one Conv with kernel = stride = patch size; optional
    LayerNorms on each flattened patch before it and on each token after it (vit-pytorch). A naflex
    batch arrives patchified: the conv kernel is applied as a matmul (SigLIP2's Linear). Over T > 1
    frames it is a 3-D conv (Qwen's) on the image repeated to fill them, as the processors do."""

    def __init__(self, spec: ModelSpec, rngs: nnx.Rngs, dtype: jnp.dtype | None = None) -> None:
        d = spec.derived
        # jnp.pad takes (before, after) per axis of NHWC: zeros at the bottom and right only.
        self.padding = ((0, 0), (0, d.rows_padded), (0, d.cols_padded), (0, 0))
        # `drop`: crop the remainder explicitly, so no conv kernel ever sees it (see Keras' port).
        self.used = (d.grid_rows * spec.patch_height, d.grid_cols * spec.patch_width)
        self.grid, self.patch = (d.grid_rows, d.grid_cols), (spec.patch_height, spec.patch_width)
        self.norm_in = norm_layer(spec, d.patch_features, "patch", rngs) if spec.patch_norm_in else None
        # padding="VALID": nnx.Conv defaults to "SAME", which would pad instead of drop.
        self.frames = spec.temporal_patch_size  # 1: an image's 2-D patch
        kernel = (self.frames, *self.patch) if self.frames > 1 else self.patch  # nnx.Conv: 2-D or 3-D by it
        self.proj = nnx.Conv(spec.channels, spec.dim, kernel_size=kernel, strides=kernel, padding="VALID",
                             use_bias=spec.patch_bias, dtype=dtype, rngs=rngs)
        self.norm_out = norm_layer(spec, spec.dim, "patch", rngs) if spec.patch_norm_out else None
        self.patchified = spec.batching != "fixed"  # (B, max_patches, ph*pw*C), not an image

    def __call__(self, x: jax.Array) -> jax.Array:
        if not self.patchified:
            if any(sum(self.padding, ())):
                x = jnp.pad(x, self.padding)
            x = x[:, : self.used[0], : self.used[1], :]  # NHWC
        if self.norm_in is None and not self.patchified:
            x = x if self.frames == 1 else jnp.repeat(x[:, None], self.frames, axis=1)  # (B, T, H, W, C)
            x = self.proj(x)
            x = x.reshape(x.shape[0], -1, x.shape[-1])  # (B, [1,] rows, cols, D) -> (B, tokens, D), row-major
        else:  # the patches as rows (a LayerNorm on each first): the conv kernel applied as a matmul
            x = x if self.patchified else self.unfold(x)
            x = x if self.norm_in is None else self.norm_in(x)
            x = x if self.frames == 1 else jnp.tile(x, (1, 1, self.frames))  # (T, ph, pw, C): a patch a frame
            kernel = self.proj.kernel[...]
            kernel = kernel.reshape(-1, kernel.shape[-1])  # [T]HWIO -> ([T*]ph*pw*C, D)
            # nnx.Conv's own dtype promotion, so the matmul computes in the dtype the conv would.
            bias = None if self.proj.bias is None else self.proj.bias[...]
            x, kernel, bias = self.proj.promote_dtype((x, kernel, bias), dtype=self.proj.dtype)
            x = x @ kernel if bias is None else x @ kernel + bias
        if self.norm_out is not None:
            x = self.norm_out(x)
        return x.astype(self.proj.kernel[...].dtype)  # the token stream is held in the parameter dtype

    def unfold(self, x: jax.Array) -> jax.Array:
        """(B, H, W, C) -> (B, tokens, ph*pw*C): patches row-major, each flattened (ph, pw, C)."""
        (rows, cols), (ph, pw) = self.grid, self.patch
        x = x.reshape(x.shape[0], rows, ph, cols, pw, x.shape[-1])
        return x.transpose(0, 1, 3, 2, 4, 5).reshape(x.shape[0], rows * cols, -1)


class Rotary(nnx.Module):
    """2-D rotary position embeddings on one head's queries or keys: x * cos + x[partner] * sin,
    with shared/core/rotary.py's tables (timm's apply_rot_embed in either layout). The prefix
    tokens' rows are cos 1 and sin 0: they pass through unrotated, as timm and DINOv3 split them off."""

    def __init__(self, spec: ModelSpec, norm: nnx.LayerNorm | nnx.RMSNorm | None) -> None:
        t = rotary_tables(spec)
        # Fixed, not parameters. Rows are tokens: q and k are (B, N, H, hd) here, so one row per token
        # broadcasts over the heads. It sits at normalize_qk's place, after the qk-norm it holds (if any).
        self.cos, self.sin = FixedTable(jnp.asarray(t.cos[:, None], jnp.float32)), FixedTable(
            jnp.asarray(t.sin[:, None], jnp.float32))
        self.partner = tuple(int(i) for i in t.partner)
        self.norm = norm
        # normalize_qk calls it with q or k alone: a naflex or packed batch's rows are the ones
        # Attention sets here for its call (pytree data, so a traced array may sit here under jax.jit).
        self.rows: jax.Array | None = nnx.data(None)

    def __call__(self, x: jax.Array, rows: jax.Array | None = None) -> jax.Array:
        x = x if self.norm is None else self.norm(x)
        rows = self.rows if rows is None else rows
        # In x's dtype (the compute dtype), as the product reads it. `rows` (B, N): a naflex or packed
        # batch's row of the table for each token (shared/core/rotary.py's token_rows), per sequence.
        cos, sin = self.cos[...], self.sin[...]
        if rows is not None:
            cos, sin = cos[rows], sin[rows]  # (B, N, 1, hd): broadcast over the heads
        partner = jnp.take(x, jnp.asarray(self.partner), axis=-1)
        return x * cos.astype(x.dtype) + partner * sin.astype(x.dtype)


class Attention(nnx.Module):
    """Multi-head attention with its own head width.

    nnx.MultiHeadAttention takes the total width (qkv_features = heads * head_dim), like torch's
    embed_dim, so the spec's head_dim is multiplied out here. Its use_bias covers q, k, v and the
    output together, so without qkv bias the output bias is a parameter of its own, and a projection
    without a bias of its own (`biases`, spec.projection_biases) is swapped for a bias-free one.
    broadcast_dropout=False: Flax would otherwise share one dropout mask across batch and heads.
    Its normalize_qk puts a LayerNorm over each head's width on the projected queries and keys,
    but one without a bias, at Flax's epsilon 1e-6 and with its fast variance: qk-norm keeps that
    place and replaces both with the spec's norms (`norm_layer`)."""

    def __init__(self, spec: ModelSpec, tag: str, biases: dict[str, bool], qk_norm: bool, rope: bool,
                 kv_heads: int, rngs: nnx.Rngs, dtype: jnp.dtype | None = None) -> None:
        self.tag, self.heads, self.head_dim = tag, spec.heads, spec.head_dim
        qkv_bias = any(biases[f"attn.{p}"] for p in ("query", "key", "value"))
        self.mha = nnx.MultiHeadAttention(
            num_heads=spec.heads, in_features=spec.dim, qkv_features=spec.derived.attn_inner,
            # Grouped-query attention: its num_kv_heads shares each k/v head with consecutive query heads.
            num_kv_heads=kv_heads, out_features=spec.dim, use_bias=qkv_bias, dropout_rate=spec.dropout_attn,
            broadcast_dropout=False, decode=False, normalize_qk=qk_norm or rope, dtype=dtype, rngs=rngs,
        )
        # qk-norm (timm's qk_norm): the spec's norm over each head's width, on queries and keys.
        q_norm = norm_layer(spec, spec.head_dim, "qk", rngs) if qk_norm else None
        k_norm = norm_layer(spec, spec.head_dim, "qk", rngs) if qk_norm else None
        # RoPE: each head's patch queries and keys rotated after qk-norm, before the product.
        if rope:
            q_norm, k_norm = Rotary(spec, q_norm), Rotary(spec, k_norm)
        if q_norm is not None:
            self.mha.query_ln, self.mha.key_ln = q_norm, k_norm
        heads = (spec.heads, spec.head_dim)
        # A part without a bias of its own: a bias-free projection in its place.
        for p in ("query", "key", "value") if qkv_bias else ():
            if not biases[f"attn.{p}"]:
                width = heads if p == "query" else (kv_heads, spec.head_dim)
                free = nnx.LinearGeneral(spec.dim, width, use_bias=False, dtype=dtype, rngs=rngs)
                setattr(self.mha, p, free)
        if qkv_bias and not biases["attn.out"]:
            self.mha.out = nnx.LinearGeneral(heads, spec.dim, axis=(-2, -1), use_bias=False, dtype=dtype,
                                             rngs=rngs)
        own_out = not qkv_bias and biases["attn.out"]
        self.out_bias = nnx.Param(jnp.zeros((spec.dim,))) if own_out else None
        self.attention_path = "fused"  # one of ATTENTION_PATHS: the port's mode sets it (port.py's set_mode)

    def __call__(self, x: jax.Array, taps: Taps = NO_TAPS, queries: jax.Array | None = None,
                 key_mask: jax.Array | None = None, rope_rows: jax.Array | None = None) -> jax.Array:
        inputs = self.project(x, queries)  # (inputs_q, inputs_k)
        # The scale is MultiHeadAttention's own 1/sqrt(qkv_features / num_heads): the head width.
        # A naflex batch's key padding (B, keys) or a packed batch's block-diagonal mask (B, queries,
        # keys) -> (B, 1, 1 or queries, keys), True = attend, as its boolean mask reads it.
        # No row is fully masked (a padding query attends to valid keys or to the padding), so none
        # becomes NaN.
        keys = None if key_mask is None else key_mask.reshape(key_mask.shape[0], 1, -1, key_mask.shape[-1])
        # Taps asked for: the explicit path, so the probabilities tapped are the ones applied.
        # Also when the mode asks for it (self.attention_path).
        explicit = taps is not NO_TAPS or self.attention_path == "explicit"
        # RoPE rows: nnx.MultiHeadAttention calls its normalize_qk hook (the Rotary) with q or k alone,
        # so they are set on each Rotary for this call and cleared after it (the compiled forward merges
        # the model inside the trace, so the traced rows never outlive it).
        rotaries = [m for m in (self.mha.query_ln, self.mha.key_ln) if isinstance(m, Rotary)]
        for rotary in rotaries:
            rotary.rows = rope_rows
        try:
            y = self.explicit(inputs, taps, keys) if explicit else self.mha(*inputs, mask=keys)
        finally:
            for rotary in rotaries:
                rotary.rows = None
        return y if self.out_bias is None else y + self.out_bias[...].astype(y.dtype)

    def project(self, x: jax.Array, queries: jax.Array | None) -> tuple[jax.Array, jax.Array]:
        """nnx.MultiHeadAttention projects q, k, v itself from its inputs_q and inputs_k (inputs_v
        defaults to inputs_k): this says which tensor each reads. `queries` (the attention pool's
        probe) attend over `x`: its query projection projects them, its key and value ones `x`."""
        return (x if queries is None else queries), x

    def explicit(self, inputs: tuple[jax.Array, jax.Array], taps: Taps,
                 keys: jax.Array | None = None) -> jax.Array:
        """softmax(q k^T) v with its probabilities materialised: the tapped `attn_probs` are the
        tensor that weighted v in this forward pass, never a recomputation beside a fused kernel."""
        # sow_weights=True: MultiHeadAttention leaves jax.nn.dot_product_attention for its own
        # einsum, softmax and einsum, and sows the probabilities it applied; nnx.capture collects
        # them (the model's state keeps parameters only).
        # A masked key is selected out by its dot_product_attention_weights (where, at the dtype's
        # lowest finite value): no -inf added.
        y, sown = nnx.capture(self.mha, nnx.Intermediate)(*inputs, mask=keys, sow_weights=True)
        (probs,) = sown["attention_weights"].get_value()
        taps[f"{self.tag}.attn_probs"] = probs
        return y


class Mlp(nnx.Module):
    """fc2(act(fc1 x)), or gated: fc2(act(gate x) * fc1 x) (SwiGLU when the activation is SiLU)."""

    def __init__(self, spec: ModelSpec, gated: bool, biases: dict[str, bool], rngs: nnx.Rngs,
                 dtype: jnp.dtype | None = None) -> None:
        gate_bias, fc1_bias, fc2_bias = biases["mlp.gate"], biases["mlp.fc1"], biases["mlp.fc2"]
        self.gate = (nnx.Linear(spec.dim, spec.mlp_dim, use_bias=gate_bias, dtype=dtype, rngs=rngs)
                     if gated else None)
        self.fc1 = nnx.Linear(spec.dim, spec.mlp_dim, use_bias=fc1_bias, dtype=dtype, rngs=rngs)
        self.act = activation(spec.activation)
        self.fc2 = nnx.Linear(spec.mlp_dim, spec.dim, use_bias=fc2_bias, dtype=dtype, rngs=rngs)
        self.drop = nnx.Dropout(spec.dropout_mlp, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        h = self.act(self.fc1(x)) if self.gate is None else self.act(self.gate(x)) * self.fc1(x)
        return self.drop(self.fc2(self.drop(h)))


class LayerScale(nnx.Module):
    """A learned per-channel gamma on a residual branch (DINOv2, DeiT-III; timm's ls1 / ls2)."""

    def __init__(self, spec: ModelSpec) -> None:
        self.gamma = nnx.Param(jnp.ones((spec.dim,)))

    def __call__(self, x: jax.Array) -> jax.Array:
        return x * self.gamma[...]


class Block(nnx.Module):
    def __init__(self, spec: ModelSpec, index: int, rngs: nnx.Rngs, dtype: jnp.dtype | None = None) -> None:
        self.tag, self.pre_norm = f"block{index}", spec.norm == "pre"
        # Window attention (Qwen2.5-VL's): this block reads the window mask, not the batch's.
        self.windowed = spec.window_size > 0 and index not in spec.full_attention_blocks
        self.norm1 = norm_layer(spec, spec.dim, "blocks", rngs)
        biases = projection_biases(spec, "blocks")
        kv_heads = spec.derived.kv_heads  # grouped-query attention: the blocks' key/value heads
        self.attn = Attention(spec, self.tag, biases, spec.qk_norm, spec.rope != "none", kv_heads, rngs,
                              dtype)
        self.ls1 = LayerScale(spec) if spec.layer_scale else nnx.identity
        self.norm2 = norm_layer(spec, spec.dim, "blocks", rngs)
        self.mlp = Mlp(spec, spec.mlp == "gated", biases, rngs, dtype)
        self.ls2 = LayerScale(spec) if spec.layer_scale else nnx.identity

    def __call__(self, x: jax.Array, taps: Taps = NO_TAPS, key_mask: jax.Array | None = None,
                 rope_rows: jax.Array | None = None) -> jax.Array:
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


class AttentionPool(nnx.Module):
    """big_vision's MAPHead (timm's attention pool, SigLIP's head): a learned probe attends over
    every token, then y + MLP(LN(y)); the probe's row is the pooled vector."""

    def __init__(self, spec: ModelSpec, rngs: nnx.Rngs, dtype: jnp.dtype | None = None) -> None:
        self.probe = nnx.Param(jnp.zeros((spec.dim,)))
        biases = projection_biases(spec, "pool")
        self.attn = Attention(spec, "pool", biases, qk_norm=False, rope=False, kv_heads=spec.heads,
                              rngs=rngs, dtype=dtype)
        self.norm = norm_layer(spec, spec.dim, "pool", rngs)
        self.mlp = Mlp(spec, gated=False, biases=biases, rngs=rngs, dtype=dtype)

    def __call__(self, x: jax.Array, taps: Taps = NO_TAPS,
                 pool_mask: jax.Array | None = None) -> jax.Array:
        images = 1 if pool_mask is None else pool_mask.shape[1]  # a probe per image, over its own tokens
        probe = jnp.broadcast_to(self.probe[...].astype(x.dtype), (x.shape[0], images, x.shape[-1]))
        y = self.attn(x, taps, queries=probe, key_mask=pool_mask).astype(x.dtype)
        # (B * images, D): the rows are the images
        return (y + self.mlp(self.norm(y))).reshape(-1, x.shape[-1])


class Merger(nnx.Module):
    """Qwen's patch merger: each token normed, each merge unit's tokens side by side (the batch's
    merge index, shared/core/batching.py's merge_index), then fc2(GELU(fc1 x)) with exact GELU. A
    deepstack merger (Qwen3-VL's) norms each unit's concatenated tokens instead (`postshuffle`)."""

    def __init__(self, spec: ModelSpec, rngs: nnx.Rngs, dtype: jnp.dtype | None = None,
                 postshuffle: bool = False) -> None:
        self.unit = spec.derived.merge_unit  # a merge unit's tokens, concatenated
        self.postshuffle = postshuffle
        self.norm = norm_layer(spec, self.unit if postshuffle else spec.dim, "merger", rngs)
        self.fc1 = nnx.Linear(self.unit, self.unit, dtype=dtype, rngs=rngs)
        self.act = activation("gelu")
        self.fc2 = nnx.Linear(self.unit, spec.merger_dim, dtype=dtype, rngs=rngs)

    def __call__(self, x: jax.Array, merge_index: jax.Array) -> jax.Array:
        h = jnp.take_along_axis(x if self.postshuffle else self.norm(x), merge_index[..., None], axis=1)
        h = h.reshape(h.shape[0], -1, self.unit)
        x = self.fc2(self.act(self.fc1(self.norm(h) if self.postshuffle else h)))
        return x.astype(self.fc2.kernel[...].dtype)  # the new stream: the parameter dtype


class Head(nnx.Module):
    """Hidden Linear + activation + dropout layers, then the class logits (none: num_classes 0)."""

    def __init__(self, spec: ModelSpec, rngs: nnx.Rngs, dtype: jnp.dtype | None = None) -> None:
        widths = [spec.derived.pooled_dim, *spec.head_hidden]
        # nnx.List: Flax 0.12 rejects a plain list of submodules.
        self.hidden = nnx.List([nnx.Linear(a, b, dtype=dtype, rngs=rngs) for a, b in pairwise(widths)])
        self.act = activation(spec.head_activation)
        self.drop = nnx.Dropout(spec.dropout_head, rngs=rngs)
        bias = spec.derived.has_bias["head.out"]
        self.out = (nnx.Linear(widths[-1], spec.num_classes, use_bias=bias, dtype=dtype, rngs=rngs)
                    if spec.num_classes else None)

    def __call__(self, x: jax.Array) -> jax.Array:
        for layer in self.hidden:
            x = self.drop(self.act(layer(x)))
        return x if self.out is None else self.out(x)


def resample_positions(spec: ModelSpec, table: jax.Array) -> jax.Array:
    """The used rows of a learned table with its patch rows resampled from the table's grid to the
    image's by RESAMPLE_OPS[spec.pos_resample], the prefix rows kept aside (as the reference's
    shared/core/positions.py resampled_table)."""
    d, k = spec.derived, positioned_prefix(spec)
    source, target = (d.pos_grid_rows, d.pos_grid_cols), (d.grid_rows, d.grid_cols)
    if spec.pos_resample == "none" or source == target:  # every library returns early at the same size
        return table
    grid, options = table[k:].reshape(*source, spec.dim), RESAMPLE_OPS[spec.pos_resample]
    if spec.pos_resample == "big_vision_zoom":
        points = jnp.asarray(zoom_points(source, target, spec.dim), jnp.float32)
        grid = jax.scipy.ndimage.map_coordinates(grid, list(points), **options)
    else:
        grid = jax.image.resize(grid, (*target, spec.dim), **options)
    # In the table's dtype: map_coordinates' float32 weights promote a narrower table.
    grid = grid.reshape(d.num_patches, spec.dim).astype(table.dtype)
    return jnp.concatenate([table[:k], grid])


def image_positions(spec: ModelSpec, table: jax.Array, grids: jax.Array,
                    position_rows: jax.Array) -> jax.Array:
    """A naflex or packed batch's positions (B, seq_len, D): the table's grid resized to each
    image's own by RESAMPLE_OPS[spec.pos_resample] in float32 (SigLIP2's upcast), each image's
    in the spec's whole grid, the images one after another, and read by each token at its row
    (shared/core/batching.py's position_rows); zero rows on the prefix tokens and the padding,
    whose row is -1 (as the reference's shared/core/positions.py)."""
    d, options = spec.derived, RESAMPLE_OPS[spec.pos_resample]
    grid = table[: d.pos_rows_used].astype(jnp.float32).reshape(d.pos_grid_rows, d.pos_grid_cols, spec.dim)
    source = jnp.asarray([d.pos_grid_rows, d.pos_grid_cols], jnp.float32)

    def resize(size: jax.Array) -> jax.Array:
        # Fixed shapes (the grids are traced under the compiled forward): every image's resize fills the
        # spec's whole (grid_rows, grid_cols) grid at its own scale (scale_and_translate takes it traced,
        # jax.image.resize only a Python shape), and its patches are read from it.
        if spec.pos_resample == "big_vision_zoom":  # corners on corners, at each image's own coordinates
            ratio = (source - 1.0) / jnp.maximum(size.astype(jnp.float32) - 1.0, 1.0)
            rows, cols = (jnp.arange(n) * r for n, r in zip((d.grid_rows, d.grid_cols), ratio, strict=True))
            points = jnp.meshgrid(rows, cols, jnp.arange(spec.dim), indexing="ij")
            return jax.scipy.ndimage.map_coordinates(grid, points, **options)
        return jax.image.scale_and_translate(grid, (d.grid_rows, d.grid_cols, spec.dim), (0, 1),
                                             size.astype(jnp.float32) / source, jnp.zeros(2), **options)

    resized = jax.vmap(resize)(grids.reshape(-1, 2))  # every image of every sequence
    resized = resized.reshape(grids.shape[0], -1, spec.dim)  # each sequence's images, one after another
    out = jnp.take_along_axis(resized, jnp.maximum(position_rows, 0)[..., None], axis=1)
    return jnp.where(position_rows[..., None] >= 0, out, 0.0).astype(table.dtype)


def masked_mean(x: jax.Array, pool_mask: jax.Array) -> jax.Array:
    """Each image's mean over its own tokens (shared/core/batching.py's pool_mask: (B, images, tokens)):
    the others selected out (never multiplied by 0, which keeps a NaN), divided by its count; the
    rows are the images, sequence by sequence."""
    valid = pool_mask[..., None]  # (B, images, tokens, 1)
    means = jnp.where(valid, x[:, None], 0).sum(axis=2) / valid.sum(axis=2).astype(x.dtype)
    return means.reshape(-1, x.shape[-1])


class VisionTransformer(nnx.Module):
    def __init__(self, spec: ModelSpec, rngs: nnx.Rngs, dtype: jnp.dtype | None = None) -> None:
        d = spec.derived
        self.spec = spec
        self.patch_embed = PatchEmbed(spec, rngs, dtype)
        self.cls_token = nnx.Param(jnp.zeros((spec.dim,))) if spec.class_token else None
        self.dist_token = nnx.Param(jnp.zeros((spec.dim,))) if spec.distill_token else None
        self.reg_tokens = nnx.Param(jnp.zeros((spec.registers, spec.dim))) if spec.registers else None
        learned, sincos = spec.pos_embed == "learned", spec.pos_embed == "sincos"
        # the whole table; only the first rows are used
        self.pos_embed = nnx.Param(jnp.zeros((d.pos_rows_total, spec.dim))) if learned else None
        # fixed, not a parameter
        self.pos_table = FixedTable(jnp.asarray(sequence_positions(spec), jnp.float32)) if sincos else None
        self.pos_drop = nnx.Dropout(spec.dropout_embed, rngs=rngs)
        self.norm_pre = norm_layer(spec, spec.dim, "pre", rngs) if spec.norm_before_blocks else None
        self.blocks = nnx.List([Block(spec, i, rngs, dtype) for i in range(spec.depth)])
        width = d.pooled_dim if spec.final_norm == "pooled" else spec.dim
        self.final_norm = norm_layer(spec, width, "final", rngs) if spec.final_norm != "none" else None
        self.merger = Merger(spec, rngs, dtype) if spec.merge_size > 1 else None
        self.deepstack = nnx.List([Merger(spec, rngs, dtype, postshuffle=True)
                                   for _ in spec.deepstack_blocks])
        self.pool = AttentionPool(spec, rngs, dtype) if spec.pooling == "map" else None
        self.head = Head(spec, rngs, dtype)
        self.head_dist = (nnx.Linear(spec.dim, spec.num_classes, dtype=dtype, rngs=rngs)
                          if spec.distill_token else None)

    def prefix(self, batch: int) -> jax.Array | None:
        """The class, distillation and register tokens, in that order, for every image."""
        parts = [t[...].reshape(-1, self.spec.dim) for t in (self.cls_token, self.dist_token, self.reg_tokens)
                 if t is not None]
        if not parts:
            return None
        tokens = jnp.concatenate(parts)
        return jnp.broadcast_to(tokens, (batch, *tokens.shape))

    def positions(self, grids: jax.Array | None = None,
                  position_rows: jax.Array | None = None) -> jax.Array | None:
        """The table added to the whole sequence: a learned table's grid resampled to the image's
        (resample_positions), then zero rows for the prefix tokens it has no row for
        (shared/core/positions.py's sequence_positions; adding zero is exact); a naflex or packed
        batch's resized to each image's grid (image_positions)."""
        if self.pos_embed is not None and grids is not None:
            return image_positions(self.spec, self.pos_embed[...], grids, position_rows)
        if self.pos_embed is None:
            return None if self.pos_table is None else self.pos_table[...]
        table = resample_positions(self.spec, self.pos_embed[: self.spec.derived.pos_rows_used])
        missing = unpositioned(self.spec)
        if not missing:
            return table
        k = positioned_prefix(self.spec)
        return jnp.concatenate([table[:k], jnp.zeros((missing, self.spec.dim), table.dtype), table[k:]])

    def __call__(self, x: jax.Array, taps: Taps = NO_TAPS, key_mask: jax.Array | None = None,
                 pool_mask: jax.Array | None = None, grids: jax.Array | None = None,
                 rope_rows: jax.Array | None = None, window_mask: jax.Array | None = None,
                 merge_index: jax.Array | None = None, position_rows: jax.Array | None = None) -> jax.Array:
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
            x = jnp.concatenate([prefix.astype(x.dtype), x], axis=1)
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
