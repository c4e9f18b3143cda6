"""A big_vision-style ViT in Flax linen (big_vision/models/vit.py's names and structure, cut to
what the tests need), loaded by path as a user's `--model FILE.py:NAME` is: `build(spec)` returns
the `(module, variables)` pair a linen user holds. Compact modules throughout, so every submodule
exists only inside a call (what the linen reader has to trace); `nn.gelu` (tanh) called as a
function in the MLP, as big_vision does; positions without a class row, added before the class
token; `pool_type='tok'`. `build_with_mistake`: the LayerNorms at linen's default epsilon 1e-6
while the spec says 1e-5 (the case built with `layer_norm_eps=1e-5`)."""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp


class MlpBlock(nn.Module):
    mlp_dim: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        d = x.shape[-1]
        x = nn.Dense(self.mlp_dim)(x)
        x = nn.gelu(x)
        return nn.Dense(d)(x)


class Encoder1DBlock(nn.Module):
    mlp_dim: int
    num_heads: int
    epsilon: float

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        y = nn.LayerNorm(epsilon=self.epsilon)(x)
        y = nn.MultiHeadDotProductAttention(num_heads=self.num_heads, deterministic=True)(y, y)
        x = x + y
        y = nn.LayerNorm(epsilon=self.epsilon)(x)
        return x + MlpBlock(mlp_dim=self.mlp_dim)(y)


class Encoder(nn.Module):
    depth: int
    mlp_dim: int
    num_heads: int
    epsilon: float

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        for i in range(self.depth):
            x = Encoder1DBlock(self.mlp_dim, self.num_heads, self.epsilon, name=f"encoderblock_{i}")(x)
        return nn.LayerNorm(epsilon=self.epsilon, name="encoder_norm")(x)


class VisionTransformer(nn.Module):
    num_classes: int
    patch_size: tuple[int, int]
    width: int
    depth: int
    mlp_dim: int
    num_heads: int
    epsilon: float = 1e-6

    @nn.compact
    def __call__(self, image: jax.Array, *, train: bool = False) -> tuple[jax.Array, dict[str, Any]]:
        x = nn.Conv(self.width, self.patch_size, strides=self.patch_size, padding="VALID",
                    name="embedding")(image)
        n, h, w, c = x.shape
        x = jnp.reshape(x, (n, h * w, c))
        x = x + self.param("pos_embedding", nn.initializers.normal(stddev=0.02), (1, h * w, c))
        cls = self.param("cls", nn.initializers.normal(stddev=0.02), (1, 1, c))
        x = jnp.concatenate([jnp.tile(cls, (n, 1, 1)), x], axis=1)
        x = Encoder(self.depth, self.mlp_dim, self.num_heads, self.epsilon, name="Transformer")(x)
        encoded = x
        x = nn.Dense(self.num_classes, name="head")(x[:, 0])
        return x, {"encoded": encoded}  # big_vision's (logits, out) form


def _pair(spec: Any, epsilon: float) -> tuple[nn.Module, Any]:
    module = VisionTransformer(spec.num_classes, (spec.patch_height, spec.patch_width), spec.dim,
                               spec.depth, spec.mlp_dim, spec.heads, epsilon)
    image = jnp.zeros((1, spec.image_height, spec.image_width, spec.channels))
    return module, module.init(jax.random.PRNGKey(0), image)


def build(spec: Any) -> tuple[nn.Module, Any]:
    return _pair(spec, spec.layer_norm_eps)


def build_with_mistake(spec: Any) -> tuple[nn.Module, Any]:
    return _pair(spec, 1e-6)
