"""A user's own ViT in Keras 3, written the way a porter writes one: a functional model on
`keras.Input`, a strided Conv2D patchify, `keras.layers.MultiHeadAttention`, `Add` +
`LayerNormalization` residuals, a class token from a small custom layer, and class-token pooling.

Written for the `mnist-vit-small` preset (28x28x1 input, 7x7 patches, a class token, learned
positions with a class row, post-norm blocks, exact GELU, LayerNorm epsilon 1e-5) and refused for
specs outside that family. `build_with_mistake` leaves LayerNormalization's default epsilon
(1e-3) in place, a mistake porters of torch models really make: it moves this model's logits by
2.5e-3 on the project's seeded weights, 500 times the project tolerance of 5e-6.

    python compare.py verify --model examples/keras_functional_vit.py:build --spec mnist-vit-small
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import keras
from keras import layers, ops

from shared.core.spec import ModelSpec
from shared.errors import SpecError

# What this example implements: field -> the value it must have.
SUPPORTED = {"remainder": "drop", "class_token": True, "pos_embed": "learned", "pos_embed_class_row": True,
             "final_norm": "none", "pooling": "cls", "head_hidden": ()}


class ClassToken(layers.Layer):
    """Prepends one learned token, stored as (1, 1, dim) as most Keras ViTs store it."""

    def build(self, input_shape: tuple) -> None:
        self.token = self.add_weight(shape=(1, 1, input_shape[-1]), initializer="zeros", name="token")

    def call(self, x):
        return ops.concatenate([ops.tile(self.token, (ops.shape(x)[0], 1, 1)), x], axis=1)


class AddPositions(layers.Layer):
    """Adds a learned (1, tokens, dim) table, class row first."""

    def build(self, input_shape: tuple) -> None:
        self.table = self.add_weight(shape=(1, *input_shape[1:]), initializer="zeros", name="table")

    def call(self, x):
        return x + self.table


def build(spec: ModelSpec) -> keras.Model:
    """The spec's model, every setting pinned from the spec."""
    return _model(spec, lambda name: layers.LayerNormalization(epsilon=spec.layer_norm_eps, name=name))


def build_with_mistake(spec: ModelSpec) -> keras.Model:
    """The same model with LayerNormalization's default epsilon (1e-3) instead of the spec's."""
    return _model(spec, lambda name: layers.LayerNormalization(name=name))


def _model(spec: ModelSpec, norm: Callable[[str], layers.Layer]) -> keras.Model:
    for field, wanted in SUPPORTED.items():
        value = getattr(spec, field)
        if (tuple(value) if isinstance(value, list) else value) != wanted:
            raise SpecError(f"examples/keras_functional_vit.py: {field}={value!r} is not implemented, "
                            f"expected {wanted!r}")
    d = spec.derived
    patch = (spec.patch_height, spec.patch_width)
    images = keras.Input((spec.image_height, spec.image_width, spec.channels), name="images")
    x = images
    if d.grid_rows * patch[0] != spec.image_height or d.grid_cols * patch[1] != spec.image_width:
        x = layers.Cropping2D(((0, spec.image_height - d.grid_rows * patch[0]),
                               (0, spec.image_width - d.grid_cols * patch[1])), name="crop")(x)
    x = layers.Conv2D(spec.dim, patch, strides=patch, name="patchify")(x)
    x = layers.Reshape((d.num_patches, spec.dim), name="flatten_patches")(x)
    x = ClassToken(name="class_token")(x)
    x = AddPositions(name="positions")(x)
    x = layers.Dropout(spec.dropout_embed, name="embedding_dropout")(x)
    for i in range(spec.depth):
        x = _encoder_block(spec, x, f"encoder_{i}", norm)
    x = x[:, 0]  # the class token
    logits = layers.Dense(spec.num_classes, name="classifier")(x)
    return keras.Model(images, logits, name="functional_vit")


def _encoder_block(spec: ModelSpec, x: Any, name: str, norm: Callable[[str], layers.Layer]) -> Any:
    attention = layers.MultiHeadAttention(spec.heads, key_dim=spec.head_dim, value_dim=spec.head_dim,
                                          dropout=spec.dropout_attn, use_bias=spec.qkv_bias,
                                          name=f"{name}_attention")
    if spec.norm == "pre":  # x + f(LN(x))
        h = norm(f"{name}_norm_attention")(x)
        x = layers.Add(name=f"{name}_add_attention")([x, attention(h, h)])
        h = _feed_forward(spec, norm(f"{name}_norm_mlp")(x), name)
        return layers.Add(name=f"{name}_add_mlp")([x, h])
    # post: LN(x + f(x))
    x = norm(f"{name}_norm_attention")(layers.Add(name=f"{name}_add_attention")([x, attention(x, x)]))
    return norm(f"{name}_norm_mlp")(layers.Add(name=f"{name}_add_mlp")([x, _feed_forward(spec, x, name)]))


def _feed_forward(spec: ModelSpec, x: Any, name: str) -> Any:
    h = layers.Dense(spec.mlp_dim, name=f"{name}_mlp_in")(x)
    h = ops.gelu(h, approximate=spec.activation == "gelu_tanh")  # keras.ops.gelu defaults to tanh
    h = layers.Dropout(spec.dropout_mlp, name=f"{name}_mlp_dropout")(h)
    h = layers.Dense(spec.dim, name=f"{name}_mlp_out")(h)
    return layers.Dropout(spec.dropout_mlp, name=f"{name}_out_dropout")(h)
