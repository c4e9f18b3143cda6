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

from shared.core.positions import fixed_table
from shared.core.spec import ModelSpec
from shared.core.taps import NO_TAPS, Taps

# The ways Attention computes the same softmax(q k^T) v: the library's fused kernel or the explicit
# path. Which one a run uses is a mode the port chooses (port.py's run_modes), never a constant.
ATTENTION_PATHS = ("fused", "explicit")


def activation(form: str) -> Callable[[jax.Array], jax.Array]:
    # Always pass the GELU form: jax.nn.gelu (and nnx.gelu) default to the tanh approximation.
    return partial(jax.nn.gelu, approximate=form != "gelu")


def layer_norm(spec: ModelSpec, width: int, rngs: nnx.Rngs) -> nnx.LayerNorm:
    # Always pass epsilon: torch and MLX 1e-5, Keras 1e-3 and Flax 1e-6 by default.
    # use_fast_variance=False: Flax's default E[x^2]-E[x]^2 loses precision when the residual
    # stream has a large mean.
    return nnx.LayerNorm(width, epsilon=spec.layer_norm_eps, use_fast_variance=False, rngs=rngs)


class FixedTable(nnx.Variable):
    """A constant (sincos positions): state, but not a trainable nnx.Param."""


# Precision (shared/core/precision.py): `dtype` is the compute dtype of the layers that compute
# (Conv, Linear, MultiHeadAttention): bfloat16 under mixed precision, beside float32 parameters
# (param_dtype); None elsewhere, where Flax computes in the inputs' and parameters' dtype.


class PatchEmbed(nnx.Module):
    """Pad (or drop) the remainder, then one Conv with kernel = stride = patch size."""

    def __init__(self, spec: ModelSpec, rngs: nnx.Rngs, dtype: jnp.dtype | None = None) -> None:
        d = spec.derived
        # jnp.pad takes (before, after) per axis of NHWC: zeros at the bottom and right only.
        self.padding = ((0, 0), (0, d.rows_padded), (0, d.cols_padded), (0, 0))
        # `drop`: crop the remainder explicitly, so no conv kernel ever sees it (see Keras' port).
        self.used = (d.grid_rows * spec.patch_height, d.grid_cols * spec.patch_width)
        patch = (spec.patch_height, spec.patch_width)
        # padding="VALID": nnx.Conv defaults to "SAME", which would pad instead of drop.
        self.proj = nnx.Conv(spec.channels, spec.dim, kernel_size=patch, strides=patch,
                             padding="VALID", dtype=dtype, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        if any(sum(self.padding, ())):
            x = jnp.pad(x, self.padding)
        x = self.proj(x[:, : self.used[0], : self.used[1], :])  # NHWC
        x = x.reshape(x.shape[0], -1, x.shape[-1])  # (B, rows, cols, D) -> (B, tokens, D), row-major
        return x.astype(self.proj.kernel[...].dtype)  # the token stream is held in the parameter dtype


class Attention(nnx.Module):
    """Multi-head attention with its own head width.

    nnx.MultiHeadAttention takes the total width (qkv_features = heads * head_dim), like torch's
    embed_dim, so the spec's head_dim is multiplied out here. Its use_bias covers q, k, v and the
    output together, so without qkv bias the output bias is a parameter of its own.
    broadcast_dropout=False: Flax would otherwise share one dropout mask across batch and heads."""

    def __init__(self, spec: ModelSpec, index: int, rngs: nnx.Rngs, dtype: jnp.dtype | None = None) -> None:
        self.tag, self.heads, self.head_dim = f"block{index}", spec.heads, spec.head_dim
        self.mha = nnx.MultiHeadAttention(
            num_heads=spec.heads, in_features=spec.dim, qkv_features=spec.derived.attn_inner,
            out_features=spec.dim, use_bias=spec.qkv_bias, dropout_rate=spec.dropout_attn,
            broadcast_dropout=False, decode=False, dtype=dtype, rngs=rngs,
        )
        self.out_bias = None if spec.qkv_bias else nnx.Param(jnp.zeros((spec.dim,)))
        self.attention_path = "fused"  # one of ATTENTION_PATHS: the port's mode sets it (port.py's set_mode)

    def __call__(self, x: jax.Array, taps: Taps = NO_TAPS) -> jax.Array:
        # The scale is MultiHeadAttention's own 1/sqrt(qkv_features / num_heads): the head width.
        # Taps asked for: the explicit path, so the probabilities tapped are the ones applied.
        # Also when the mode asks for it (self.attention_path).
        explicit = taps is not NO_TAPS or self.attention_path == "explicit"
        y = self.explicit(x, taps) if explicit else self.mha(x)
        return y if self.out_bias is None else y + self.out_bias[...].astype(y.dtype)

    def explicit(self, x: jax.Array, taps: Taps) -> jax.Array:
        """softmax(q k^T) v with its probabilities materialised: the tapped `attn_probs` are the
        tensor that weighted v in this forward pass, never a recomputation beside a fused kernel."""
        # sow_weights=True: MultiHeadAttention leaves jax.nn.dot_product_attention for its own
        # einsum, softmax and einsum, and sows the probabilities it applied; nnx.capture collects
        # them (the model's state keeps parameters only).
        y, sown = nnx.capture(self.mha, nnx.Intermediate)(x, sow_weights=True)
        (probs,) = sown["attention_weights"].get_value()
        taps[f"{self.tag}.attn_probs"] = probs
        return y


class Mlp(nnx.Module):
    def __init__(self, spec: ModelSpec, rngs: nnx.Rngs, dtype: jnp.dtype | None = None) -> None:
        self.fc1 = nnx.Linear(spec.dim, spec.mlp_dim, dtype=dtype, rngs=rngs)
        self.act = activation(spec.activation)
        self.fc2 = nnx.Linear(spec.mlp_dim, spec.dim, dtype=dtype, rngs=rngs)
        self.drop = nnx.Dropout(spec.dropout_mlp, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.drop(self.fc2(self.drop(self.act(self.fc1(x)))))


class Block(nnx.Module):
    def __init__(self, spec: ModelSpec, index: int, rngs: nnx.Rngs, dtype: jnp.dtype | None = None) -> None:
        self.tag, self.pre_norm = f"block{index}", spec.norm == "pre"
        self.norm1 = layer_norm(spec, spec.dim, rngs)
        self.attn = Attention(spec, index, rngs, dtype)
        self.norm2 = layer_norm(spec, spec.dim, rngs)
        self.mlp = Mlp(spec, rngs, dtype)

    def __call__(self, x: jax.Array, taps: Taps = NO_TAPS) -> jax.Array:
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


class Head(nnx.Module):
    """Hidden Linear + activation + dropout layers, then the class logits."""

    def __init__(self, spec: ModelSpec, rngs: nnx.Rngs, dtype: jnp.dtype | None = None) -> None:
        widths = [spec.derived.pooled_dim, *spec.head_hidden]
        # nnx.List: Flax 0.12 rejects a plain list of submodules.
        self.hidden = nnx.List([nnx.Linear(a, b, dtype=dtype, rngs=rngs) for a, b in pairwise(widths)])
        self.act = activation(spec.head_activation)
        self.drop = nnx.Dropout(spec.dropout_head, rngs=rngs)
        self.out = nnx.Linear(widths[-1], spec.num_classes, dtype=dtype, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        for layer in self.hidden:
            x = self.drop(self.act(layer(x)))
        return self.out(x)


class VisionTransformer(nnx.Module):
    def __init__(self, spec: ModelSpec, rngs: nnx.Rngs, dtype: jnp.dtype | None = None) -> None:
        d = spec.derived
        self.spec = spec
        self.patch_embed = PatchEmbed(spec, rngs, dtype)
        self.cls_token = nnx.Param(jnp.zeros((spec.dim,))) if spec.class_token else None
        learned, sincos = spec.pos_embed == "learned", spec.pos_embed == "sincos"
        # the whole table; only the first rows are used
        self.pos_embed = nnx.Param(jnp.zeros((d.pos_rows_total, spec.dim))) if learned else None
        # fixed, not a parameter
        self.pos_table = FixedTable(jnp.asarray(fixed_table(spec), jnp.float32)) if sincos else None
        self.pos_drop = nnx.Dropout(spec.dropout_embed, rngs=rngs)
        self.blocks = nnx.List([Block(spec, i, rngs, dtype) for i in range(spec.depth)])
        width = d.pooled_dim if spec.final_norm == "pooled" else spec.dim
        self.final_norm = layer_norm(spec, width, rngs) if spec.final_norm != "none" else None
        self.head = Head(spec, rngs, dtype)

    def positions(self) -> jax.Array | None:
        if self.pos_embed is not None:
            return self.pos_embed[: self.spec.derived.pos_rows_used]
        return None if self.pos_table is None else self.pos_table[...]

    def __call__(self, x: jax.Array, taps: Taps = NO_TAPS) -> jax.Array:
        s, t = self.spec, taps
        x = t["patch_embed"] = self.patch_embed(x)
        table = self.positions()
        if table is not None and not s.pos_embed_class_row:
            x = x + table  # big_vision: patches only, before the class token
        if self.cls_token is not None:
            cls = jnp.broadcast_to(self.cls_token[...], (x.shape[0], 1, s.dim))
            x = jnp.concatenate([cls, x], axis=1)
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
