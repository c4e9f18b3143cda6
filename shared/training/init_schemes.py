"""Initialisation schemes for training, drawn once in NumPy and transferred to every port.

A port is always loaded from canonical tensors, so "the framework's default init" here means the
distribution that framework's own layers would draw, reproduced in NumPy for the canonical
layout (shared/core/weights.py), not the framework's random stream. Every tensor has its own
stream keyed by (seed, name), as `init_weights`. Fans are those of the layer the tensor belongs
to, on its flattened (in, out) matrix: attention kernels (D, H, hd) have fan_in D and fan_out
H*hd (Keras' EinsumDense passes these input/output axes to its initializer, Flax's LinearGeneral
draws the flat matrix, torch's packed qkv Linear has in_features D); the output kernel (H, hd, D)
has fan_in H*hd; the patch kernel (ph, pw, C, D) has fan_in ph*pw*C.

- `canonical`: `shared.core.weights.init_weights` (the test init: kernels N(0, 1/fan_in); class
  token, positions and biases N(0, 0.1^2); norm scales 1 + N(0, 0.1^2): non-zero on purpose).
- `torch`: nn.Linear and nn.Conv2d reset_parameters: kaiming_uniform(a=sqrt 5), i.e. bound
  gain*sqrt(3/fan_in) with gain sqrt(2/(1+5)), = U(+-1/sqrt(fan_in)); bias U(+-1/sqrt(fan_in)).
- `keras`: Dense, EinsumDense, Conv2D: glorot_uniform U(+-sqrt(6/(fan_in+fan_out))) (Conv2D's
  fan_out is ph*pw*D: Keras multiplies both fans by the receptive field), zero bias.
- `flax`: nnx.Linear, LinearGeneral, Conv: lecun_normal = variance_scaling(1, fan_in,
  truncated_normal): a normal truncated at +-2 of its std, that std being
  sqrt(1/fan_in) / 0.87962566103423978 so the truncated draw has std sqrt(1/fan_in); zero bias.
- `vit`: the common ViT init (timm/DeiT): kernels and position table truncated normal 0.02,
  class token zero, biases zero. Truncation at +-2 std (jax.nn.initializers.truncated_normal(0.02),
  torch trunc_normal_(std=0.02, a=-0.04, b=0.04)), so the draw's std is 0.02 * 0.8796 = 0.0176.

In `torch`, `keras`, `flax` and `mlx`, LayerNorm is scale 1 and bias 0 (all four libraries'
default), and the class token and position table are zero: none of the four has a default for a
bare parameter, and each port builds them with zeros (torch.zeros, add_weight("zeros"), jnp.zeros,
mx.zeros).

Two knobs act on any scheme: `kernel_gain` multiplies every kernel, and `pos_std` (when not None)
replaces the position table by N(0, pos_std^2), so scale can be varied without a new scheme.
"""

from __future__ import annotations

import math
import zlib

import numpy as np

from shared.core.spec import ModelSpec
from shared.core.train_spec import INIT_SCHEMES, TrainSpec
from shared.core.weights import Tensors, _fan_in, init_weights
from shared.errors import SpecError

TRUNCATION = 2.0  # truncated normals are cut at +-2 of the underlying std
TRUNCATED_STD = 0.87962566103423978  # std of a standard normal truncated to [-2, 2]
VIT_STD = 0.02


def truncated_normal(rng: np.random.Generator, shape: tuple[int, ...], std: float) -> np.ndarray:
    """N(0, std^2) cut at +-2 std by redrawing what falls outside (the draw's std is 0.8796 std)."""
    values = rng.standard_normal(shape)
    outside = np.abs(values) > TRUNCATION
    while outside.any():
        values[outside] = rng.standard_normal(int(outside.sum()))
        outside = np.abs(values) > TRUNCATION
    return std * values


def kernel_fans(name: str, shape: tuple[int, ...]) -> tuple[int, int]:
    """(fan_in, fan_out) of a canonical kernel, as the module docstring states."""
    fan_in = _fan_in(name, shape)
    if name == "patch_embed.kernel":
        return fan_in, shape[0] * shape[1] * shape[3]
    return fan_in, math.prod(shape) // fan_in


def _kernel(scheme: str, rng: np.random.Generator, name: str, shape: tuple[int, ...]) -> np.ndarray:
    fan_in, fan_out = kernel_fans(name, shape)
    if scheme == "torch":
        bound = 1.0 / math.sqrt(fan_in)
        return rng.uniform(-bound, bound, shape)
    if scheme == "keras":
        limit = math.sqrt(6.0 / (fan_in + fan_out))
        return rng.uniform(-limit, limit, shape)
    if scheme == "flax":
        return truncated_normal(rng, shape, math.sqrt(1.0 / fan_in) / TRUNCATED_STD)
    return truncated_normal(rng, shape, VIT_STD)  # vit


def _bias(scheme: str, rng: np.random.Generator, name: str, shape: tuple[int, ...],
          shapes: dict[str, tuple[int, ...]]) -> np.ndarray:
    kernel = name.removesuffix(".bias") + ".kernel"
    if scheme == "torch" and kernel in shapes:  # a layer's bias: U(+-1/sqrt(fan_in)) of its layer
        bound = 1.0 / math.sqrt(kernel_fans(kernel, shapes[kernel])[0])
        return rng.uniform(-bound, bound, shape)
    return np.zeros(shape)  # LayerNorm bias, and every bias in keras, flax and vit


def _draw(scheme: str, spec: ModelSpec, seed: int) -> Tensors:
    if scheme == "canonical":
        return init_weights(spec, seed)
    shapes = spec.derived.tensor_shapes
    out: Tensors = {}
    for name, shape in shapes.items():
        rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
        if name.endswith(".kernel"):
            values = _kernel(scheme, rng, name, shape)
        elif name.endswith(".scale"):
            values = np.ones(shape)
        elif name == "pos_embed" and scheme == "vit":
            values = truncated_normal(rng, shape, VIT_STD)
        elif name in ("pos_embed", "cls_token"):
            values = np.zeros(shape)
        else:
            values = _bias(scheme, rng, name, shape, shapes)
        out[name] = values.astype(np.float32)
    return out


def initial_weights(spec: ModelSpec, seed: int, scheme: str = "canonical", kernel_gain: float = 1.0,
                    pos_std: float | None = None) -> Tensors:
    """The canonical tensors a training run starts from (canonical with the knobs at their
    defaults is exactly `init_weights`)."""
    if scheme not in INIT_SCHEMES:
        raise SpecError(f"init scheme {scheme!r}: expected one of {', '.join(INIT_SCHEMES)}")
    out = _draw(scheme, spec, seed)
    if kernel_gain != 1.0:
        out = {n: (v * np.float32(kernel_gain) if n.endswith(".kernel") else v) for n, v in out.items()}
    if pos_std is not None and "pos_embed" in out:
        rng = np.random.default_rng([seed, zlib.crc32(b"pos_embed"), 0x9057])
        out["pos_embed"] = (pos_std * rng.standard_normal(out["pos_embed"].shape)).astype(np.float32)
    return out


def recipe_weights(spec: ModelSpec, recipe: TrainSpec, seed: int) -> Tensors:
    """`initial_weights` with the recipe's init, init_kernel_gain and init_pos_std."""
    return initial_weights(spec, seed, recipe.init, recipe.init_kernel_gain, recipe.init_pos_std)
