"""A user's own ViT in flax.nnx, written the way a porter writes one: patches cut with reshapes
and projected by an `nnx.Linear` on flattened patches (no conv), `nnx.MultiHeadAttention`, an
encoder of `EncoderLayer`s held in an `nnx.List`, a class embedding and a position table stored
with a leading batch axis, and a `classifier` on the class token.

Written for the `mnist-vit-small` preset (28x28x1 input, 7x7 patches, a class token, learned
positions with a class row, post-norm blocks, exact GELU, LayerNorm epsilon 1e-5) and refused for
specs outside that family. `build_with_mistake` keeps `jax.nn.gelu`'s default form, the tanh
approximation, where the spec wants exact GELU, a mistake porters of torch models really make
(torch's nn.GELU is exact by default): it moves this model's logits by 3.5e-4 on the
project's seeded weights, 70 times the project tolerance of 5e-6.

    python compare.py verify --model examples/flax_nnx_vit.py:build --spec mnist-vit-small
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import jax
import jax.numpy as jnp
from flax import nnx

from shared.core.spec import ModelSpec
from shared.errors import SpecError

# What this example implements: field -> the value it must have.
SUPPORTED = {"remainder": "drop", "class_token": True, "pos_embed": "learned", "pos_embed_class_row": True,
             "final_norm": "none", "pooling": "cls", "head_hidden": ()}

Activation = Callable[[jax.Array], jax.Array]


class FeedForward(nnx.Module):
    def __init__(self, spec: ModelSpec, activation: Activation, rngs: nnx.Rngs) -> None:
        self.fc_in = nnx.Linear(spec.dim, spec.mlp_dim, rngs=rngs)
        self.activation = activation
        self.fc_out = nnx.Linear(spec.mlp_dim, spec.dim, rngs=rngs)
        self.dropout = nnx.Dropout(spec.dropout_mlp, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.dropout(self.fc_out(self.dropout(self.activation(self.fc_in(x)))))


class EncoderLayer(nnx.Module):
    def __init__(self, spec: ModelSpec, activation: Activation, rngs: nnx.Rngs) -> None:
        self.pre_norm = spec.norm == "pre"
        self.self_attention = nnx.MultiHeadAttention(
            num_heads=spec.heads, in_features=spec.dim, qkv_features=spec.heads * spec.head_dim,
            out_features=spec.dim, use_bias=spec.qkv_bias, dropout_rate=spec.dropout_attn,
            broadcast_dropout=False, decode=False, rngs=rngs)
        # use_fast_variance=False: the two-pass variance, as the float64 reference computes it.
        self.attention_norm = nnx.LayerNorm(spec.dim, epsilon=spec.layer_norm_eps, use_fast_variance=False,
                                            rngs=rngs)
        self.feed_forward = FeedForward(spec, activation, rngs)
        self.output_norm = nnx.LayerNorm(spec.dim, epsilon=spec.layer_norm_eps, use_fast_variance=False,
                                         rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        if self.pre_norm:  # x + f(LN(x))
            x = x + self.self_attention(self.attention_norm(x))
            return x + self.feed_forward(self.output_norm(x))
        x = self.attention_norm(x + self.self_attention(x))  # post: LN(x + f(x))
        return self.output_norm(x + self.feed_forward(x))


class PatchViT(nnx.Module):
    def __init__(self, spec: ModelSpec, activation: Activation, rngs: nnx.Rngs) -> None:
        for field, wanted in SUPPORTED.items():
            value = getattr(spec, field)
            if (tuple(value) if isinstance(value, list) else value) != wanted:
                raise SpecError(f"examples/flax_nnx_vit.py: {field}={value!r} is not implemented, "
                                f"expected {wanted!r}")
        d = spec.derived
        self.patch, self.grid = (spec.patch_height, spec.patch_width), (d.grid_rows, d.grid_cols)
        patch_features = spec.patch_height * spec.patch_width * spec.channels
        self.patch_projection = nnx.Linear(patch_features, spec.dim, rngs=rngs)
        self.class_embedding = nnx.Param(jnp.zeros((1, 1, spec.dim)))
        self.position_embedding = nnx.Param(jnp.zeros((1, d.num_patches + 1, spec.dim)))
        self.embedding_dropout = nnx.Dropout(spec.dropout_embed, rngs=rngs)
        self.layers = nnx.List([EncoderLayer(spec, activation, rngs) for _ in range(spec.depth)])
        self.classifier = nnx.Linear(spec.dim, spec.num_classes, rngs=rngs)

    def patches(self, images: jax.Array) -> jax.Array:
        """(B, H, W, C) -> (B, rows * cols, ph * pw * C), each patch flattened (ph, pw, C)."""
        (ph, pw), (rows, cols) = self.patch, self.grid
        x = images[:, : rows * ph, : cols * pw, :]  # the remainder is dropped
        x = x.reshape(x.shape[0], rows, ph, cols, pw, x.shape[-1]).transpose(0, 1, 3, 2, 4, 5)
        return x.reshape(x.shape[0], rows * cols, -1)

    def __call__(self, images: jax.Array) -> jax.Array:
        x = self.patch_projection(self.patches(images))
        cls = jnp.broadcast_to(self.class_embedding[...], (x.shape[0], 1, x.shape[-1]))
        x = jnp.concatenate([cls, x], axis=1) + self.position_embedding[...]
        x = self.embedding_dropout(x)
        for layer in self.layers:
            x = layer(x)
        return self.classifier(x[:, 0])


def build(spec: ModelSpec) -> PatchViT:
    """The spec's model, every setting pinned from the spec (the GELU form included)."""
    return PatchViT(spec, partial(jax.nn.gelu, approximate=spec.activation == "gelu_tanh"),
                    nnx.Rngs(0, dropout=1))


def build_with_mistake(spec: ModelSpec) -> PatchViT:
    """The same model on jax.nn.gelu as it is: its default is the tanh approximation."""
    return PatchViT(spec, jax.nn.gelu, nnx.Rngs(0, dropout=1))
