"""The spec's model in Keras 3 (`keras.layers`), NHWC input.

Parallel text: every native port's model.py (ports/torch, keras, flax and mlx) has the same
classes in the same order; a diff between two of them shows only the framework idiom.
"""

from __future__ import annotations

import keras
import numpy as np
from keras import layers, ops

from shared.core.positions import fixed_table
from shared.core.spec import ModelSpec
from shared.core.taps import NO_TAPS, Taps

# The ways Attention computes the same softmax(q k^T) v: the library's fused kernel or the explicit
# path. Which one a run uses is a mode the port chooses (port.py's run_modes), never a constant.
ATTENTION_PATHS = ("fused", "explicit")


def activation(form: str, dtype: str = "float32") -> layers.Layer:
    # Always pass the GELU form: keras.activations.gelu is exact, but keras.ops.gelu is tanh.
    return layers.Activation(lambda x: keras.activations.gelu(x, approximate=form != "gelu"), dtype=dtype)


def layer_norm(spec: ModelSpec, width: int, dtype: str = "float32") -> layers.LayerNormalization:
    # Always pass epsilon: torch and MLX 1e-5, Keras 1e-3 and Flax 1e-6 by default.
    return layers.LayerNormalization(epsilon=spec.layer_norm_eps, dtype=dtype)


# On every Keras backend alike. Dtype policies (shared/core/precision.py): each layer's own `dtype`
# is the token stream's policy ("float32" under mixed precision, the low dtype under pure);
# `compute` is the policy of the layers that compute (Conv2D, Dense, MultiHeadAttention, the
# activation, their dropout): "mixed_bfloat16" under mixed. Keras' one global mixed policy would
# also cast the stream.
# Block adds its branches with ops.add, which promotes a bfloat16 branch into a float32 stream;
# TF's `+` refuses mixed dtypes.


class PatchEmbed(layers.Layer):
    """Pad (or drop) the remainder, then one Conv2D with kernel = stride = patch size."""

    def __init__(self, spec: ModelSpec, compute: str = "float32", **kwargs) -> None:
        super().__init__(**kwargs)
        d = spec.derived
        # ZeroPadding2D takes ((top, bottom), (left, right)): zeros at the bottom and right only.
        self.padding = ((0, d.rows_padded), (0, d.cols_padded))
        self.pad = layers.ZeroPadding2D(self.padding, dtype=compute) if any(sum(self.padding, ())) else None
        # `drop`: crop the remainder explicitly. TF's oneDNN Conv2D returned wrong values when a
        # valid, strided conv had to skip it (3x3 image, 1x2 patches: off by 2.3; found by the
        # property test), so no conv kernel ever sees a remainder.
        self.used = (d.grid_rows * spec.patch_height, d.grid_cols * spec.patch_width)
        patch = (spec.patch_height, spec.patch_width)
        self.proj = layers.Conv2D(spec.dim, kernel_size=patch, strides=patch, padding="valid", dtype=compute)
        self.tokens, self.dim = d.num_patches, spec.dim

    def call(self, x):
        if self.pad is not None:
            x = self.pad(x)
        x = self.proj(x[:, : self.used[0], : self.used[1], :])  # NHWC
        x = ops.reshape(x, (-1, self.tokens, self.dim))  # (B, rows, cols, D) -> (B, tokens, D), row-major
        return ops.cast(x, self.compute_dtype)  # the token stream is held in the parameter dtype


class Attention(layers.Layer):
    """Multi-head attention with its own head width.

    Keras' MultiHeadAttention takes the per-head width (key_dim), so it expresses the spec's
    head_dim directly: key_dim=32 with 4 heads is 4 heads of width 32, not of width 8 as torch's
    embed_dim=32. Its use_bias covers q, k, v and the output together, so without qkv bias the
    output bias is a weight of its own."""

    def __init__(self, spec: ModelSpec, index: int, compute: str = "float32", **kwargs) -> None:
        super().__init__(**kwargs)
        self.tag, self.heads, self.head_dim = f"block{index}", spec.heads, spec.head_dim
        self.mha = layers.MultiHeadAttention(
            num_heads=spec.heads, key_dim=spec.head_dim, value_dim=spec.head_dim,
            dropout=spec.dropout_attn, use_bias=spec.qkv_bias, dtype=compute,
        )
        self.out_bias = None
        if not spec.qkv_bias:
            self.out_bias = self.add_weight(shape=(spec.dim,), initializer="zeros", name="out_bias")
        self.attention_path = "fused"  # one of ATTENTION_PATHS: the port's mode sets it (port.py's set_mode)

    def call(self, x, training=False, taps: Taps = NO_TAPS):
        # The scale is MultiHeadAttention's own 1/sqrt(key_dim), and key_dim is the head width.
        # Taps asked for: the explicit path, so the probabilities tapped are the ones applied.
        # Also when the mode asks for it (self.attention_path).
        explicit = taps is not NO_TAPS or self.attention_path == "explicit"
        y = self.explicit(x, training, taps) if explicit else self.mha(x, x, training=training)
        return y if self.out_bias is None else y + ops.cast(self.out_bias, y.dtype)

    def explicit(self, x, training: bool, taps: Taps):
        """softmax(q k^T) v with its probabilities materialised: the tapped `attn_probs` are the
        tensor that weighted v in this forward pass, never a recomputation beside a fused kernel."""
        # return_attention_scores=True: MultiHeadAttention leaves its fused dot-product kernel for
        # its own einsum, softmax and einsum, and returns the probabilities it applied.
        y, probs = self.mha(x, x, training=training, return_attention_scores=True)
        taps[f"{self.tag}.attn_probs"] = probs
        return y


class Mlp(layers.Layer):
    def __init__(self, spec: ModelSpec, compute: str = "float32", **kwargs) -> None:
        super().__init__(**kwargs)
        self.fc1 = layers.Dense(spec.mlp_dim, dtype=compute)
        self.act = activation(spec.activation, compute)
        self.fc2 = layers.Dense(spec.dim, dtype=compute)
        self.drop = layers.Dropout(spec.dropout_mlp, dtype=compute)

    def call(self, x, training=False):
        return self.drop(self.fc2(self.drop(self.act(self.fc1(x)), training=training)), training=training)


class Block(layers.Layer):
    def __init__(self, spec: ModelSpec, index: int, compute: str = "float32", **kwargs) -> None:
        super().__init__(**kwargs)
        self.tag, self.pre_norm, stream = f"block{index}", spec.norm == "pre", self.dtype_policy
        self.norm1 = layer_norm(spec, spec.dim, stream)
        self.attn = Attention(spec, index, compute, dtype=stream)
        self.norm2 = layer_norm(spec, spec.dim, stream)
        self.mlp = Mlp(spec, compute, dtype=compute)

    def call(self, x, training=False, taps: Taps = NO_TAPS):
        t = taps
        if self.pre_norm:  # x + f(LN(x))
            h = t[f"{self.tag}.norm1"] = self.norm1(x)
            x = ops.add(x, a := self.attn(h, training=training, taps=t))
            t[f"{self.tag}.attn"] = a
            h = t[f"{self.tag}.norm2"] = self.norm2(x)
            x = ops.add(x, m := self.mlp(h, training=training))
            t[f"{self.tag}.mlp"] = m
        else:  # post: LN(x + f(x))
            t[f"{self.tag}.attn"] = a = self.attn(x, training=training, taps=t)
            x = t[f"{self.tag}.norm1"] = self.norm1(ops.add(x, a))
            t[f"{self.tag}.mlp"] = m = self.mlp(x, training=training)
            x = t[f"{self.tag}.norm2"] = self.norm2(ops.add(x, m))
        t[f"{self.tag}.out"] = x
        return x


class Head(layers.Layer):
    """Hidden Dense + activation + dropout layers, then the class logits."""

    def __init__(self, spec: ModelSpec, compute: str = "float32", **kwargs) -> None:
        super().__init__(**kwargs)
        self.hidden = [layers.Dense(width, dtype=compute) for width in spec.head_hidden]
        self.act = activation(spec.head_activation, compute)
        self.drop = layers.Dropout(spec.dropout_head, dtype=compute)
        self.out = layers.Dense(spec.num_classes, dtype=compute)

    def call(self, x, training=False):
        for layer in self.hidden:
            x = self.drop(self.act(layer(x)), training=training)
        return self.out(x)


class VisionTransformer(keras.Model):
    def __init__(self, spec: ModelSpec, compute: str = "float32", **kwargs) -> None:
        super().__init__(**kwargs)
        d, stream = spec.derived, self.dtype_policy
        self.spec = spec
        self.patch_embed = PatchEmbed(spec, compute, dtype=stream)
        self.cls_token = None
        if spec.class_token:
            self.cls_token = self.add_weight(shape=(spec.dim,), initializer="zeros", name="cls_token")
        self.pos_embed, self.pos_table = None, None
        if spec.pos_embed == "learned":  # the whole table; only the first rows are used
            self.pos_embed = self.add_weight(
                shape=(d.pos_rows_total, spec.dim), initializer="zeros", name="pos_embed"
            )
        elif spec.pos_embed == "sincos":  # fixed, not a weight
            self.pos_table = fixed_table(spec).astype(np.float32)
        self.pos_drop = layers.Dropout(spec.dropout_embed, dtype=stream)
        self.blocks = [Block(spec, i, compute, dtype=stream) for i in range(spec.depth)]
        self.final_norm = None
        if spec.final_norm != "none":
            width = d.pooled_dim if spec.final_norm == "pooled" else spec.dim
            self.final_norm = layer_norm(spec, width, stream)
        self.head = Head(spec, compute, dtype=compute)

    def positions(self):
        if self.pos_embed is not None:
            return self.pos_embed[: self.spec.derived.pos_rows_used]
        return None if self.pos_table is None else ops.convert_to_tensor(self.pos_table, self.compute_dtype)

    def call(self, x, training=False, taps: Taps = NO_TAPS):
        s, t = self.spec, taps
        x = t["patch_embed"] = self.patch_embed(x)
        table = self.positions()
        if table is not None and not s.pos_embed_class_row:
            x = x + table  # big_vision: patches only, before the class token
        if self.cls_token is not None:
            cls = ops.broadcast_to(ops.reshape(self.cls_token, (1, 1, -1)), (ops.shape(x)[0], 1, s.dim))
            x = ops.concatenate([cls, x], axis=1)
        if table is not None and s.pos_embed_class_row:
            x = x + table  # timm/torchvision: the table has a class-token row
        x = t["pos_embed"] = self.pos_drop(x, training=training)
        for blk in self.blocks:
            x = blk(x, training=training, taps=taps)
        if s.final_norm == "tokens":
            x = t["final_norm"] = self.final_norm(x)
        if s.pooling == "cls":
            x = x[:, 0]
        elif s.pooling == "mean":
            x = ops.mean(x[:, int(s.class_token):], axis=1)  # patch tokens only
        else:
            x = ops.reshape(x, (-1, s.derived.pooled_dim))
        if s.final_norm == "pooled":
            x = self.final_norm(x)
        t["pooled"] = x
        x = t["logits"] = self.head(x, training=training)
        return x
