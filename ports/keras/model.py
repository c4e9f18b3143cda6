"""The spec's model in Keras 3 (`keras.layers`), NHWC input.

Parallel text: every native port's model.py (ports/torch, keras, flax and mlx) has the same
classes in the same order; a diff between two of them shows only the framework idiom.
"""

from __future__ import annotations

from collections.abc import Callable

import keras
import numpy as np
from keras import layers, ops

from shared.core.positions import sequence_positions, unpositioned
from shared.core.resample import zoom_points
from shared.core.rotary import rotary_tables
from shared.core.spec import ModelSpec, positioned_prefix, projection_biases
from shared.core.taps import NO_TAPS, Taps

# The ways Attention computes the same softmax(q k^T) v: the library's fused kernel or the explicit
# path. Which one a run uses is a mode the port chooses (port.py's run_modes), never a constant.
ATTENTION_PATHS = ("fused", "explicit")

# Each pos_resample method this port computes, with the framework operation that computes it exactly
# (shared/core/resample.py defines each; keras.ops.image here, the same on every Keras backend). A method
# in RESAMPLE_MISSING has no such operation: ports.create_port refuses it with that reason, never a
# substitute.
RESAMPLE_OPS: dict[str, dict] = {
    # ops.image.resize: tf.image.resize / jax.image.resize / F.interpolate, antialiased: a = -0.5,
    # stretched when shrinking, outside taps dropped and renormalised (PIL's filter) on each backend
    "timm_bicubic_antialias": {"interpolation": "bicubic", "antialias": True},
    # ops.image.map_coordinates (scipy's, order 1) at scipy.ndimage.zoom's corners-on-corners grid
    "big_vision_zoom": {"order": 1, "fill_mode": "nearest"},
    "bilinear": {"interpolation": "bilinear", "antialias": False},
    # PIL's triangle: stretched when shrinking, outside taps dropped and renormalised
    "bilinear_antialias": {"interpolation": "bilinear", "antialias": True},
}
_KERAS_CUBIC = ("keras.ops.image.resize's bicubic without antialiasing is Keys' a = -0.5 on the TensorFlow "
                "and JAX backends (a = -0.75 on torch's only): Keras has no a = -0.75 cubic on every backend")
RESAMPLE_MISSING: dict[str, str] = {
    "timm_bicubic": _KERAS_CUBIC,
    "hf_bicubic": _KERAS_CUBIC,
    "dinov2_legacy": _KERAS_CUBIC + ", and ops.image.resize takes a size, not DINOv2's scale factor",
}


# A naflex batch's per-image resize (image_positions): no Keras resize takes a traced size (ops.image.resize
# needs a static one, and the compiled forward traces the grids), so each method's antialiased filter is built
# from its kernel here, as shared/core/resample.py's antialiased_weights (PIL's: triangle, Keys' a = -0.5).
IMAGE_RESIZE_KERNELS: dict[str, Callable] = {
    "bilinear_antialias": lambda x: ops.maximum(1.0 - ops.abs(x), 0.0),  # the triangle, half-width 1
    # Keys' cubic with a = -0.5 (PIL's), half-width 2
    "timm_bicubic_antialias": lambda x: ops.where(
        (t := ops.abs(x)) < 1.0, (1.5 * t - 2.5) * t * t + 1.0,
        ops.where(t < 2.0, ((-0.5 * t + 2.5) * t - 4.0) * t + 2.0, 0.0)),
}


def activation(form: str, dtype: str = "float32") -> layers.Layer:
    # Always pass the GELU form: keras.activations.gelu is exact, but keras.ops.gelu is tanh.
    if form in ("gelu", "gelu_tanh"):
        return layers.Activation(lambda x: keras.activations.gelu(x, approximate=form != "gelu"), dtype=dtype)
    # QuickGELU (OpenAI CLIP): x * sigmoid(1.702 x), no framework has it as a layer; SiLU: x * sigmoid(x).
    return QuickGELU(dtype=dtype) if form == "quick_gelu" else layers.Activation("silu", dtype=dtype)


class QuickGELU(layers.Layer):
    def call(self, x):
        return x * ops.sigmoid(1.702 * x)


def norm_layer(spec: ModelSpec, width: int, place: str,
               dtype: str = "float32") -> layers.LayerNormalization | layers.RMSNormalization:
    # Always pass epsilon, the one of the norm's place: torch and MLX 1e-5, Keras 1e-3 and Flax 1e-6
    # by default (RMSNorm: torch the dtype's machine epsilon, MLX 1e-5, Keras and Flax 1e-6).
    if spec.norm_type == "rms_norm":  # a scale, no bias, no mean subtracted
        return layers.RMSNormalization(epsilon=spec.derived.norm_eps[place], dtype=dtype)
    return layers.LayerNormalization(epsilon=spec.derived.norm_eps[place], dtype=dtype)


# On every Keras backend alike. Dtype policies (shared/core/precision.py): each layer's own `dtype`
# is the token stream's policy ("float32" under mixed precision, the low dtype under pure);
# `compute` is the policy of the layers that compute (Conv2D, Dense, MultiHeadAttention, the
# activation, their dropout): "mixed_bfloat16" under mixed. Keras' one global mixed policy would
# also cast the stream.
# Block adds its branches with ops.add, which promotes a bfloat16 branch into a float32 stream;
# TF's `+` refuses mixed dtypes.


class PatchEmbed(layers.Layer):
    """Pad (or drop) the remainder, then one Conv2D with kernel = stride = patch size; optional
    LayerNorms on each flattened patch before it and on each token after it (vit-pytorch). A naflex
    batch arrives patchified: the conv kernel is applied as a matmul (SigLIP2's Linear). Over T > 1
    frames it is a 3-D conv (Qwen's) on the image repeated to fill them, as the processors do."""

    def __init__(self, spec: ModelSpec, compute: str = "float32", **kwargs) -> None:
        super().__init__(**kwargs)
        d, stream = spec.derived, self.dtype_policy
        # ZeroPadding2D takes ((top, bottom), (left, right)): zeros at the bottom and right only.
        self.padding = ((0, d.rows_padded), (0, d.cols_padded))
        self.pad = layers.ZeroPadding2D(self.padding, dtype=stream) if any(sum(self.padding, ())) else None
        # `drop`: crop the remainder explicitly. TF's oneDNN Conv2D returned wrong values when a
        # valid, strided conv had to skip it (3x3 image, 1x2 patches: off by 2.3; found by the
        # property test), so no conv kernel ever sees a remainder.
        self.used = (d.grid_rows * spec.patch_height, d.grid_cols * spec.patch_width)
        self.grid, self.patch = (d.grid_rows, d.grid_cols), (spec.patch_height, spec.patch_width)
        self.norm_in = norm_layer(spec, d.patch_features, "patch", stream) if spec.patch_norm_in else None
        self.frames = spec.temporal_patch_size  # 1: an image's 2-D patch
        conv, kernel = ((layers.Conv3D, (self.frames, *self.patch)) if self.frames > 1
                        else (layers.Conv2D, self.patch))
        self.proj = conv(spec.dim, kernel_size=kernel, strides=kernel, padding="valid",
                         use_bias=spec.patch_bias, dtype=compute)
        self.patchified = spec.batching != "fixed"  # (B, max_patches, ph*pw*C), not an image
        if self.norm_in is not None or self.patchified:  # the conv is never called then: built here
            self.proj.build((None, *kernel[:-2], *self.used, spec.channels))
        self.norm_out = norm_layer(spec, spec.dim, "patch", stream) if spec.patch_norm_out else None
        self.tokens, self.dim, self.features = d.num_patches, spec.dim, d.patch_features

    def call(self, x):
        if not self.patchified:
            if self.pad is not None:
                x = self.pad(x)
            x = x[:, : self.used[0], : self.used[1], :]  # NHWC
        if self.norm_in is None and not self.patchified:
            x = x if self.frames == 1 else ops.repeat(x[:, None], self.frames, axis=1)  # (B, T, H, W, C)
            # (B, [1,] rows, cols, D) -> (B, tokens, D), row-major
            x = ops.reshape(self.proj(x), (-1, self.tokens, self.dim))
        else:  # the patches as rows (a LayerNorm on each first): the conv kernel applied as a matmul
            x = x if self.patchified else self.unfold(x)
            x = x if self.norm_in is None else self.norm_in(x)
            x = x if self.frames == 1 else ops.tile(x, (1, 1, self.frames))  # (T, ph, pw, C): a patch a frame
            kernel = ops.reshape(self.proj.kernel, (-1, self.dim))  # [T]HWIO -> ([T*]ph*pw*C, D)
            dtype = self.proj.compute_dtype  # the conv's compute dtype, as its own call would cast
            x = ops.matmul(ops.cast(x, dtype), ops.cast(kernel, dtype))
            x = x if self.proj.bias is None else ops.add(x, ops.cast(self.proj.bias, dtype))
        if self.norm_out is not None:
            x = self.norm_out(x)
        return ops.cast(x, self.compute_dtype)  # the token stream is held in the parameter dtype

    def unfold(self, x):
        """(B, H, W, C) -> (B, tokens, ph*pw*C): patches row-major, each flattened (ph, pw, C)."""
        (rows, cols), (ph, pw) = self.grid, self.patch
        x = ops.reshape(x, (-1, rows, ph, cols, pw, self.features // (ph * pw)))
        return ops.reshape(ops.transpose(x, (0, 1, 3, 2, 4, 5)), (-1, rows * cols, self.features))


class Rotary(layers.Layer):
    """2-D rotary position embeddings on one head's queries or keys: x * cos + x[partner] * sin,
    with shared/core/rotary.py's tables (timm's apply_rot_embed in either layout). The prefix
    tokens' rows are cos 1 and sin 0: they pass through unrotated, as timm and DINOv3 split them off."""

    def __init__(self, spec: ModelSpec, **kwargs) -> None:
        super().__init__(**kwargs)
        t = rotary_tables(spec)
        # Fixed, not weights. Rows are tokens: q and k are (B, N, H, hd) here, so one row per token
        # broadcasts over the heads.
        self.cos, self.sin = t.cos[:, None].astype(np.float32), t.sin[:, None].astype(np.float32)
        self.partner = t.partner

    def call(self, x, rows=None):
        # In x's dtype (the compute dtype), as the product reads it. `rows` (B, N): a naflex or packed
        # batch's row of the table for each token (shared/core/rotary.py's token_rows), per sequence.
        cos, sin = ops.convert_to_tensor(self.cos, x.dtype), ops.convert_to_tensor(self.sin, x.dtype)
        if rows is not None:  # (B, N, 1, hd): broadcast over the heads
            cos, sin = ops.take(cos, rows, axis=0), ops.take(sin, rows, axis=0)
        return ops.add(ops.multiply(x, cos), ops.multiply(ops.take(x, self.partner, axis=-1), sin))


class Attention(layers.Layer):
    """Multi-head attention with its own head width.

    Keras' MultiHeadAttention takes the per-head width (key_dim), so it expresses the spec's
    head_dim directly: key_dim=32 with 4 heads is 4 heads of width 32, not of width 8 as torch's
    embed_dim=32. Its use_bias covers q, k, v and the output together, so with any of them without
    a bias (`biases`, spec.projection_biases) it has none, and each that has one is a weight of its
    own. Its call has no place for qk-norm between the projections
    and the product, so this module calls its parts: the query, key and value projections, its
    `_compute_attention` (the override point its docstring names) and the output projection."""

    def __init__(self, spec: ModelSpec, tag: str, biases: dict[str, bool], qk_norm: bool, rope: bool,
                 kv_heads: int, compute: str = "float32", **kwargs) -> None:
        super().__init__(**kwargs)
        self.tag, self.heads, self.head_dim = tag, spec.heads, spec.head_dim
        shared = all(biases[f"attn.{p}"] for p in ("query", "key", "value", "out"))
        self.mha = layers.MultiHeadAttention(
            num_heads=spec.heads, key_dim=spec.head_dim, value_dim=spec.head_dim,
            dropout=spec.dropout_attn, use_bias=shared, dtype=compute,
        )
        # Its own call, which would build it, is never used: built here, for (B, tokens, D) inputs.
        self.mha.build((None, None, spec.dim), (None, None, spec.dim))
        # Grouped-query attention: its key and value projections swapped for ones of kv_heads heads
        # (its projections are built with every head), each repeated to its query heads in `call`.
        if kv_heads != spec.heads:
            self.mha._tracker.unlock()
            for name in ("_key_dense", "_value_dense"):
                built = getattr(self.mha, name)
                own = layers.EinsumDense("abc,cde->abde", output_shape=(None, kv_heads, spec.head_dim),
                                         bias_axes="de" if shared else None, name=built.name, dtype=compute)
                own.build((None, None, spec.dim))
                self.mha._layers.remove(built)
                setattr(self.mha, name, own)
            self.mha._tracker.lock()
        # qk-norm (timm's qk_norm): the spec's norm over each head's width, on queries and keys.
        self.q_norm = norm_layer(spec, spec.head_dim, "qk", compute) if qk_norm else None
        self.k_norm = norm_layer(spec, spec.head_dim, "qk", compute) if qk_norm else None
        # RoPE: each head's patch queries and keys rotated after qk-norm, before the product.
        self.rope = Rotary(spec, dtype=compute) if rope else None
        self.query_bias, self.key_bias, self.value_bias, self.out_bias = (
            self.add_weight(shape=shape, initializer="zeros", name=f"{p}_bias")
            if biases[f"attn.{p}"] and not shared else None
            for p, shape in (("query", (spec.heads, spec.head_dim)), ("key", (kv_heads, spec.head_dim)),
                             ("value", (kv_heads, spec.head_dim)), ("out", (spec.dim,))))
        self.attention_path = "fused"  # one of ATTENTION_PATHS: the port's mode sets it (port.py's set_mode)

    def call(self, x, training=False, taps: Taps = NO_TAPS, queries=None, key_mask=None, rope_rows=None):
        q, k, v = self.project(x, queries)  # each (B, N, H, hd)
        if self.q_norm is not None:  # in the compute dtype, as the product reads them
            q, k = self.q_norm(q), self.k_norm(k)
        if self.rope is not None:
            q, k = self.rope(q, rope_rows), self.rope(k, rope_rows)
        group = self.heads // k.shape[2]  # grouped-query attention: each k/v head, consecutively
        if group > 1:
            k, v = ops.repeat(k, group, axis=2), ops.repeat(v, group, axis=2)
        # The scale is MultiHeadAttention's own 1/sqrt(key_dim), and key_dim is the head width.
        # A naflex batch's key padding (B, keys) or a packed batch's block-diagonal mask (B, queries,
        # keys) -> (B, 1 or queries, keys), True = attend, as its boolean attention_mask reads it.
        # No row is fully masked (a padding query attends to valid keys or to the padding), so none
        # becomes NaN.
        keys = None if key_mask is None else ops.reshape(key_mask, (ops.shape(key_mask)[0], -1,
                                                                     ops.shape(key_mask)[-1]))
        # Taps asked for: the explicit path, so the probabilities tapped are the ones applied.
        # Also when the mode asks for it (self.attention_path).
        explicit = taps is not NO_TAPS or self.attention_path == "explicit"
        if explicit:
            context = self.explicit(q, k, v, training, taps, keys)
        else:
            context, _ = self.mha._compute_attention(q, k, v, attention_mask=keys, training=training)
        y = self.mha.output_dense(context)
        return y if self.out_bias is None else y + ops.cast(self.out_bias, y.dtype)

    def project(self, x, queries) -> tuple:
        """q, k, v as (B, N, H, hd). `queries` (the attention pool's probe) attend over `x`: the
        MultiHeadAttention's query projection takes them, its key and value projections `x`."""
        queries = x if queries is None else queries
        projected = self.mha.query_dense(queries), self.mha.key_dense(x), self.mha.value_dense(x)
        own = (self.query_bias, self.key_bias, self.value_bias)
        return tuple(y if b is None else ops.add(y, ops.cast(b, y.dtype))
                     for y, b in zip(projected, own, strict=True))

    def explicit(self, q, k, v, training: bool, taps: Taps, keys=None):
        """softmax(q k^T) v with its probabilities materialised: the tapped `attn_probs` are the
        tensor that weighted v in this forward pass, never a recomputation beside a fused kernel."""
        # return_attention_scores=True: MultiHeadAttention leaves its fused dot-product kernel for
        # its own einsum, softmax and einsum, and returns the probabilities it applied.
        # A masked key is selected out by its Softmax layer (where, at -1e9; -3e4 in float16): no -inf added.
        context, probs = self.mha._compute_attention(q, k, v, attention_mask=keys, training=training,
                                                     return_attention_scores=True)
        taps[f"{self.tag}.attn_probs"] = probs
        return context


class Mlp(layers.Layer):
    """fc2(act(fc1 x)), or gated: fc2(act(gate x) * fc1 x) (SwiGLU when the activation is SiLU)."""

    def __init__(self, spec: ModelSpec, gated: bool, biases: dict[str, bool], compute: str = "float32",
                 **kwargs) -> None:
        super().__init__(**kwargs)
        self.gate = layers.Dense(spec.mlp_dim, use_bias=biases["mlp.gate"], dtype=compute) if gated else None
        self.fc1 = layers.Dense(spec.mlp_dim, use_bias=biases["mlp.fc1"], dtype=compute)
        self.act = activation(spec.activation, compute)
        self.fc2 = layers.Dense(spec.dim, use_bias=biases["mlp.fc2"], dtype=compute)
        self.drop = layers.Dropout(spec.dropout_mlp, dtype=compute)

    def call(self, x, training=False):
        h = self.act(self.fc1(x)) if self.gate is None else ops.multiply(self.act(self.gate(x)), self.fc1(x))
        return self.drop(self.fc2(self.drop(h, training=training)), training=training)


class LayerScale(layers.Layer):
    """A learned per-channel gamma on a residual branch (DINOv2, DeiT-III; timm's ls1 / ls2)."""

    def __init__(self, spec: ModelSpec, **kwargs) -> None:
        super().__init__(**kwargs)
        self.gamma = self.add_weight(shape=(spec.dim,), initializer="ones", name="gamma")

    def call(self, x):
        return ops.multiply(x, self.gamma)


class Block(layers.Layer):
    def __init__(self, spec: ModelSpec, index: int, compute: str = "float32", **kwargs) -> None:
        super().__init__(**kwargs)
        self.tag, self.pre_norm, stream = f"block{index}", spec.norm == "pre", self.dtype_policy
        # Window attention (Qwen2.5-VL's): this block reads the window mask, not the batch's.
        self.windowed = spec.window_size > 0 and index not in spec.full_attention_blocks
        self.norm1 = norm_layer(spec, spec.dim, "blocks", stream)
        biases = projection_biases(spec, "blocks")
        kv_heads = spec.derived.kv_heads  # grouped-query attention: the blocks' key/value heads
        self.attn = Attention(spec, self.tag, biases, spec.qk_norm, spec.rope != "none", kv_heads, compute,
                              dtype=stream)
        self.ls1 = LayerScale(spec, dtype=stream) if spec.layer_scale else layers.Identity(dtype=compute)
        self.norm2 = norm_layer(spec, spec.dim, "blocks", stream)
        self.mlp = Mlp(spec, spec.mlp == "gated", biases, compute, dtype=compute)
        self.ls2 = LayerScale(spec, dtype=stream) if spec.layer_scale else layers.Identity(dtype=compute)

    def call(self, x, training=False, taps: Taps = NO_TAPS, key_mask=None, rope_rows=None):
        t = taps
        if self.pre_norm:  # x + f(LN(x))
            h = t[f"{self.tag}.norm1"] = self.norm1(x)
            x = ops.add(x, a := self.ls1(self.attn(h, training=training, taps=t, key_mask=key_mask,
                                                   rope_rows=rope_rows)))
            t[f"{self.tag}.attn"] = a
            h = t[f"{self.tag}.norm2"] = self.norm2(x)
            x = ops.add(x, m := self.ls2(self.mlp(h, training=training)))
            t[f"{self.tag}.mlp"] = m
        else:  # post: LN(x + f(x))
            t[f"{self.tag}.attn"] = a = self.ls1(self.attn(x, training=training, taps=t, key_mask=key_mask,
                                                           rope_rows=rope_rows))
            x = t[f"{self.tag}.norm1"] = self.norm1(ops.add(x, a))
            t[f"{self.tag}.mlp"] = m = self.ls2(self.mlp(x, training=training))
            x = t[f"{self.tag}.norm2"] = self.norm2(ops.add(x, m))
        t[f"{self.tag}.out"] = x
        return x


class AttentionPool(layers.Layer):
    """big_vision's MAPHead (timm's attention pool, SigLIP's head): a learned probe attends over
    every token, then y + MLP(LN(y)); the probe's row is the pooled vector."""

    def __init__(self, spec: ModelSpec, compute: str = "float32", **kwargs) -> None:
        super().__init__(**kwargs)
        stream = self.dtype_policy
        self.probe = self.add_weight(shape=(spec.dim,), initializer="zeros", name="probe")
        biases = projection_biases(spec, "pool")
        self.attn = Attention(spec, "pool", biases, qk_norm=False, rope=False, kv_heads=spec.heads,
                              compute=compute, dtype=stream)
        self.norm = norm_layer(spec, spec.dim, "pool", stream)
        self.mlp = Mlp(spec, gated=False, biases=biases, compute=compute, dtype=compute)

    def call(self, x, training=False, taps: Taps = NO_TAPS, pool_mask=None):
        images = 1 if pool_mask is None else ops.shape(pool_mask)[1]  # a probe per image, over its own tokens
        probe = ops.broadcast_to(ops.reshape(self.probe, (1, 1, -1)),
                                 (ops.shape(x)[0], images, ops.shape(x)[2]))
        y = self.attn(x, training=training, taps=taps, queries=probe, key_mask=pool_mask)
        # The residual sum in the token stream's dtype (the oracle's): ops.add of the two bfloat16
        # branches under mixed precision would round it to bfloat16.
        y = ops.add(ops.cast(y, self.compute_dtype), self.mlp(self.norm(y), training=training))
        # (B * images, D): the rows are the images
        return ops.reshape(y, (-1, ops.shape(y)[-1]))


class Merger(layers.Layer):
    """Qwen's patch merger: each token normed, each merge unit's tokens side by side (the batch's
    merge index, shared/core/batching.py's merge_index), then fc2(GELU(fc1 x)) with exact GELU. A
    deepstack merger (Qwen3-VL's) norms each unit's concatenated tokens instead (`postshuffle`)."""

    def __init__(self, spec: ModelSpec, compute: str = "float32", postshuffle: bool = False,
                 **kwargs) -> None:
        super().__init__(**kwargs)
        self.unit = spec.derived.merge_unit  # a merge unit's tokens, concatenated
        self.postshuffle = postshuffle
        self.norm = norm_layer(spec, self.unit if postshuffle else spec.dim, "merger", self.dtype_policy)
        self.fc1 = layers.Dense(self.unit, dtype=compute)
        self.act = activation("gelu", compute)
        self.fc2 = layers.Dense(spec.merger_dim, dtype=compute)
        if postshuffle:  # called only when taps are asked for, not by the port's first call: built here
            for layer in (self.norm, self.fc1, self.fc2):
                layer.build((None, None, self.unit))
            self.built = True

    def call(self, x, merge_index):
        h = x if self.postshuffle else self.norm(x)
        h = ops.take_along_axis(h, ops.expand_dims(merge_index, -1), axis=1)
        h = ops.reshape(h, (ops.shape(h)[0], -1, self.unit))
        x = self.fc2(self.act(self.fc1(self.norm(h) if self.postshuffle else h)))
        return ops.cast(x, self.compute_dtype)  # the new stream: the parameter dtype


class Head(layers.Layer):
    """Hidden Dense + activation + dropout layers, then the class logits (none: num_classes 0)."""

    def __init__(self, spec: ModelSpec, compute: str = "float32", **kwargs) -> None:
        super().__init__(**kwargs)
        self.hidden = [layers.Dense(width, dtype=compute) for width in spec.head_hidden]
        self.act = activation(spec.head_activation, compute)
        self.drop = layers.Dropout(spec.dropout_head, dtype=compute)
        bias = spec.derived.has_bias["head.out"]
        self.out = layers.Dense(spec.num_classes, use_bias=bias, dtype=compute) if spec.num_classes else None

    def call(self, x, training=False):
        for layer in self.hidden:
            x = self.drop(self.act(layer(x)), training=training)
        return x if self.out is None else self.out(x)


def resample_positions(spec: ModelSpec, table):
    """The used rows of a learned table with its patch rows resampled from the table's grid to the
    image's by RESAMPLE_OPS[spec.pos_resample], the prefix rows kept aside (as the reference's
    shared/core/positions.py resampled_table)."""
    d, k = spec.derived, positioned_prefix(spec)
    source, target = (d.pos_grid_rows, d.pos_grid_cols), (d.grid_rows, d.grid_cols)
    if spec.pos_resample == "none" or source == target:  # every library returns early at the same size
        return table
    grid, options = ops.reshape(table[k:], (*source, spec.dim)), RESAMPLE_OPS[spec.pos_resample]
    if spec.pos_resample == "big_vision_zoom":
        points = ops.convert_to_tensor(zoom_points(source, target, spec.dim), "float32")
        grid = ops.image.map_coordinates(grid, points, **options)
    else:
        grid = ops.image.resize(grid, target, **options)
    # In the table's dtype: tf.image.resize answers float32 for every input dtype.
    grid = ops.cast(ops.reshape(grid, (d.num_patches, spec.dim)), table.dtype)
    return ops.concatenate([table[:k], grid], axis=0)


def resize_weights(size_in: int, sizes_out, length: int, method: str):
    """(B, length, size_in): each image's weights along one axis, from the table's size_in rows to its
    own size (sizes_out (B,), traced). Antialiased: output i centred at (i + 0.5) * in / out, the kernel
    stretched by in / out when shrinking, renormalised over the table's taps (shared/core/resample.py's
    antialiased_weights); big_vision_zoom: output i at i * (in - 1) / (out - 1), corners on corners
    (Qwen3-VL's aligned bilinear), the triangle unstretched. Rows from an image's own size on are never
    read."""
    index = ops.arange(length, dtype="float32")[None, :, None]
    if method == "big_vision_zoom":  # corners on corners: the last output row on the last table row
        ratio = (size_in - 1) / ops.maximum(ops.cast(sizes_out, "float32") - 1.0, 1.0)[:, None, None]
        taps = ops.arange(size_in, dtype="float32")[None, None, :]
        return ops.maximum(1.0 - ops.abs(taps - index * ratio), 0.0)
    step = ops.divide(float(size_in), ops.cast(sizes_out, "float32"))[:, None, None]  # (B, 1, 1)
    centre = (index + 0.5) * step
    taps = ops.arange(size_in, dtype="float32")[None, None, :] + 0.5
    weights = IMAGE_RESIZE_KERNELS[method]((taps - centre) / ops.maximum(step, 1.0))
    total = ops.sum(weights, axis=-1, keepdims=True)
    # a zero sum (an output row past the table's reach) gives zero weights, never 0 / 0
    return ops.where(total > 0, weights / ops.where(total > 0, total, 1.0), 0.0)


def image_positions(spec: ModelSpec, table, grids, position_rows):
    """A naflex or packed batch's positions (B, seq_len, D): the table's grid resized to each
    image's own by resize_weights (spec.pos_resample's) in float32 (SigLIP2's upcast), each
    image's in the spec's whole grid, the images one after another, and read by each token at
    its row (shared/core/batching.py's position_rows); zero rows on the prefix tokens and the
    padding, whose row is -1 (as the reference's shared/core/positions.py)."""
    d, method = spec.derived, spec.pos_resample
    grid = ops.cast(table[: d.pos_rows_used], "float32")
    grid = ops.reshape(grid, (d.pos_grid_rows, d.pos_grid_cols, spec.dim))
    # Fixed shapes (the grids are traced under the compiled forward): every image's resize fills the
    # spec's whole (grid_rows, grid_cols) grid, each by its own weights, and its patches are read from it.
    sizes = ops.reshape(grids, (-1, 2))  # every image of every sequence
    rows_w = resize_weights(d.pos_grid_rows, sizes[:, 0], d.grid_rows, method)
    cols_w = resize_weights(d.pos_grid_cols, sizes[:, 1], d.grid_cols, method)
    resized = ops.einsum("bri,ijd,bcj->brcd", rows_w, grid, cols_w)  # (images, rows, cols, D)
    resized = ops.reshape(resized, (ops.shape(grids)[0], -1, spec.dim))  # each sequence's images in turn
    out = ops.take_along_axis(resized, ops.maximum(position_rows, 0)[..., None], axis=1)
    out = ops.where(position_rows[..., None] >= 0, out, 0.0)
    return ops.cast(out, table.dtype)


def masked_mean(x, pool_mask):
    """Each image's mean over its own tokens (shared/core/batching.py's pool_mask: (B, images, tokens)):
    the others selected out (never multiplied by 0, which keeps a NaN), divided by its count; the
    rows are the images, sequence by sequence."""
    valid = pool_mask[..., None]  # (B, images, tokens, 1)
    total = ops.sum(ops.where(valid, x[:, None], ops.zeros_like(x[:, None])), axis=2)
    means = total / ops.cast(ops.sum(ops.cast(valid, "int32"), axis=2), x.dtype)
    return ops.reshape(means, (-1, ops.shape(x)[-1]))


class VisionTransformer(keras.Model):
    def __init__(self, spec: ModelSpec, compute: str = "float32", **kwargs) -> None:
        super().__init__(**kwargs)
        d, stream = spec.derived, self.dtype_policy
        self.spec = spec
        self.patch_embed = PatchEmbed(spec, compute, dtype=stream)
        self.cls_token, self.dist_token, self.reg_tokens = None, None, None
        if spec.class_token:
            self.cls_token = self.add_weight(shape=(spec.dim,), initializer="zeros", name="cls_token")
        if spec.distill_token:
            self.dist_token = self.add_weight(shape=(spec.dim,), initializer="zeros", name="dist_token")
        if spec.registers:
            self.reg_tokens = self.add_weight(shape=(spec.registers, spec.dim), initializer="zeros",
                                              name="reg_tokens")
        self.pos_embed, self.pos_table = None, None
        if spec.pos_embed == "learned":  # the whole table; only the first rows are used
            self.pos_embed = self.add_weight(
                shape=(d.pos_rows_total, spec.dim), initializer="zeros", name="pos_embed"
            )
        elif spec.pos_embed == "sincos":  # fixed, not a weight
            self.pos_table = sequence_positions(spec).astype(np.float32)
        self.pos_drop = layers.Dropout(spec.dropout_embed, dtype=stream)
        self.norm_pre = norm_layer(spec, spec.dim, "pre", stream) if spec.norm_before_blocks else None
        self.blocks = [Block(spec, i, compute, dtype=stream) for i in range(spec.depth)]
        self.final_norm = None
        if spec.final_norm != "none":
            width = d.pooled_dim if spec.final_norm == "pooled" else spec.dim
            self.final_norm = norm_layer(spec, width, "final", stream)
        self.merger = Merger(spec, compute, dtype=stream) if spec.merge_size > 1 else None
        self.deepstack = [Merger(spec, compute, postshuffle=True, dtype=stream)
                          for _ in spec.deepstack_blocks]
        self.pool = AttentionPool(spec, compute, dtype=stream) if spec.pooling == "map" else None
        # Without a classifier the head passes the pooled vector on, so it takes the stream's policy:
        # a compute policy would cast the model's output to bfloat16 under mixed precision.
        self.head = Head(spec, compute, dtype=compute if spec.num_classes else stream)
        self.head_dist = layers.Dense(spec.num_classes, dtype=compute) if spec.distill_token else None

    def prefix(self, batch):
        """The class, distillation and register tokens, in that order, for every image."""
        tokens = [ops.reshape(t, (-1, self.spec.dim))
                  for t in (self.cls_token, self.dist_token, self.reg_tokens) if t is not None]
        if not tokens:
            return None
        shape = (batch, self.spec.derived.prefix_tokens, self.spec.dim)
        return ops.broadcast_to(ops.concatenate(tokens, axis=0)[None], shape)

    def positions(self, grids=None, position_rows=None):
        """The table added to the whole sequence: a learned table's grid resampled to the image's
        (resample_positions), then zero rows for the prefix tokens it has no row for
        (shared/core/positions.py's sequence_positions; adding zero is exact); a naflex or packed
        batch's resized to each image's grid (image_positions)."""
        if self.pos_embed is not None and grids is not None:
            return image_positions(self.spec, self.pos_embed, grids, position_rows)
        if self.pos_embed is None:
            fixed = self.pos_table
            return None if fixed is None else ops.convert_to_tensor(fixed, self.compute_dtype)
        table = resample_positions(self.spec, self.pos_embed[: self.spec.derived.pos_rows_used])
        missing = unpositioned(self.spec)
        if not missing:
            return table
        k = positioned_prefix(self.spec)
        zeros = ops.zeros((missing, self.spec.dim), table.dtype)
        return ops.concatenate([table[:k], zeros, table[k:]], axis=0)

    def call(self, x, training=False, taps: Taps = NO_TAPS, key_mask=None, pool_mask=None, grids=None,
             rope_rows=None, window_mask=None, merge_index=None, position_rows=None):
        """`key_mask`: a naflex batch's key-padding mask (B, tokens) or a packed batch's block-diagonal
        (B, tokens, tokens); `pool_mask` (B, images, tokens): the tokens each image pools (both
        shared/core/batching.py's); `grids`: each sequence's image grids (its `grid` field);
        `rope_rows` (B, tokens): each token's rotary row (shared/core/rotary.py's token_rows);
        `window_mask` (B, tokens, tokens): the window blocks' mask (batching.py's window_mask);
        `merge_index` (B, tokens): the merger's gather (batching.py's merge_index); `position_rows`
        (B, tokens): the row of the resized tables each token reads (batching.py's position_rows)."""
        s, t = self.spec, taps
        x = t["patch_embed"] = self.patch_embed(x)
        prefix = self.prefix(ops.shape(x)[0])
        if prefix is not None:  # [class, distillation, registers] then the patches
            x = ops.concatenate([ops.cast(prefix, x.dtype), x], axis=1)
        table = self.positions(grids, position_rows)
        if table is not None:
            x = x + table
        x = t["pos_embed"] = self.pos_drop(x, training=training)
        if self.norm_pre is not None:  # CLIP's ln_pre
            x = t["norm_pre"] = self.norm_pre(x)
        for i, blk in enumerate(self.blocks):  # a window block attends within each image's windows
            mask = window_mask if blk.windowed else key_mask
            x = blk(x, training=training, taps=taps, key_mask=mask, rope_rows=rope_rows)
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
            x = ops.mean(x[:, s.derived.prefix_tokens:], axis=1)  # patch tokens only
        elif s.pooling == "mean_all":
            x = ops.mean(x, axis=1)  # every token, class token included (keras-hub's gap)
        elif s.pooling == "map":
            x = self.pool(x, training=training, taps=t, pool_mask=pool_mask)
        else:
            x = ops.reshape(x, (-1, s.derived.pooled_dim))
        if s.final_norm == "pooled":
            x = self.final_norm(x)
        t["pooled"] = x
        x = self.head(x, training=training)
        if self.head_dist is not None:  # inference: the mean of the class and distillation heads
            x = (x + self.head_dist(tokens[:, 1])) / 2
        t["logits"] = x
        return x
