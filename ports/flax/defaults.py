"""Flax's side of the divergence catalogue (shared/teaching/): the installed Flax's default for
each entry, read from the framework.

Parallel text: every native port's defaults.py (ports/torch, keras, flax and mlx) has the same
readers in the same order (one per catalogue entry, named by its key) and the same numeric defaults.
Defaults are read (`inspect.signature`, a fresh layer's attributes, parameter shapes, a measured
call); where no attribute holds a value, one comment says where it comes from. A built model is read
by user.py (`layers()`), the demonstrations run in demos.py. Loaded through
`ports.load_port_part(name, "defaults")`.
"""

from __future__ import annotations

import inspect
import warnings

import jax
import numpy as np
import optax
from flax import nnx

from shared.core.probes import default_of


# ---- defaults, one reader per catalogue entry (catalogue order) ---------------------------------
def head_width() -> str:
    # what the integer in "heads=4, dim 32" becomes
    m = nnx.MultiHeadAttention(num_heads=4, in_features=32, decode=False, rngs=nnx.Rngs(0))
    return f"nnx.MultiHeadAttention(num_heads=4, in_features=32): head width {m.head_dim}"


def remainder() -> str:
    # pixels that do not fill a patch
    return f"nnx.Conv padding={default_of(nnx.Conv, 'padding')!r}"


def patch_layout() -> str:
    # the flatten order of one patch
    k = nnx.Conv(3, 8, (4, 2), rngs=nnx.Rngs(0)).kernel
    return f"kernel {tuple(k.shape)}: reshape(-1, D) flattens (ph, pw, C)"


def layer_norm_eps() -> str:
    # LayerNorm's epsilon
    return f"nnx.LayerNorm epsilon={default_of(nnx.LayerNorm, 'epsilon'):g}"


def gelu() -> str:
    # the GELU form
    value = default_of(jax.nn.gelu, "approximate")
    same = "nnx.gelu is jax.nn.gelu" if nnx.gelu is jax.nn.gelu else "nnx.gelu differs"
    return f"jax.nn.gelu approximate={value} ({'tanh' if value else 'exact'}); {same}"


def norm_placement() -> str:
    # the framework's own encoder block, if it has one
    blocks = [n for n in dir(nnx) if "Transformer" in n or "Encoder" in n]
    return f"encoder blocks in flax.nnx: {blocks or 'none'}; placement is whatever the model code writes"


def pooling() -> str:
    # the readout of the framework's (or its model zoo's) ViT
    pools = [n for n in dir(nnx) if n.endswith("_pool")]
    # big_vision is a repository, not an installed package: pool_type='gap' is its ViT's default
    # in big_vision/models/vit.py (_Model), read there, not here.
    return f"nnx {', '.join(pools)} pool windows, no token readout (big_vision's ViT: pool_type='gap')"


def batch_first() -> str:
    # the axis order attention takes
    m = nnx.MultiHeadAttention(num_heads=1, in_features=2, decode=False, rngs=nnx.Rngs(0))
    x = np.random.default_rng(0).standard_normal((2, 3, 2)).astype(np.float32)
    moved = x.copy()
    moved[1] += 1  # change the second item of axis 0 only
    alone = np.allclose(np.asarray(m(x))[0], np.asarray(m(moved))[0])
    order = "(..., T, E): leading axes are batch" if alone else "(T, B, E)"
    return f"nnx.MultiHeadAttention takes {order} (measured: axis 0 {'does not mix' if alone else 'mixes'})"


def attention_scale() -> str:
    # the score scale
    q, k, v = (jax.random.normal(jax.random.key(i), (1, 5, 1, 8)) for i in range(3))  # (B, T, H, hd)
    out = nnx.dot_product_attention(q, k, v)
    for label, scale in (("1/sqrt(head width)", 8**-0.5), ("1/head width", 1 / 8), ("none", 1.0)):
        probs = jax.nn.softmax(jax.numpy.einsum("bqhd,bkhd->bhqk", q, k) * scale)
        if np.allclose(out, jax.numpy.einsum("bhqk,bkhd->bqhd", probs, v), atol=1e-6):
            return f"nnx.dot_product_attention applies {label} (measured; qkv_features / num_heads wide)"
    return "nnx.dot_product_attention: scale not recognised"


def conv_kernel_layout() -> str:
    # the conv kernel's axis order
    k = nnx.Conv(3, 8, (4, 2), rngs=nnx.Rngs(0)).kernel
    return f"nnx.Conv(3, 8, (4, 2)).kernel {tuple(k.shape)} = HWIO, input NHWC"


def dense_kernel_layout() -> str:
    # the dense kernel's axis order
    return f"nnx.Linear(3, 5).kernel {tuple(nnx.Linear(3, 5, rngs=nnx.Rngs(0)).kernel.shape)} = (in, out)"


def adamw_epsilon() -> str:
    # where AdamW adds epsilon, and its defaults
    return f"optax.adamw eps={default_of(optax.adamw, 'eps'):g} (added to sqrt(v_hat)), " \
           f"weight_decay={default_of(optax.adamw, 'weight_decay'):g}, mask={default_of(optax.adamw, 'mask')}"


def weight_decay() -> str:
    # what weight decay decays, and how
    return f"optax.adamw mask={default_of(optax.adamw, 'mask')}: decays every leaf"


def clipnorm() -> str:
    # per-variable or global gradient clipping
    return "optax.clip_by_global_norm (global); optax.clip (per element)" if hasattr(
        optax, "clip_by_global_norm") else "no global clipping"


def cross_entropy() -> str:
    # the loss's reduction and input
    losses = optax.softmax_cross_entropy_with_integer_labels(jax.numpy.zeros((2, 3)), jax.numpy.array([0, 1]))
    return f"optax.softmax_cross_entropy_with_integer_labels on 2 examples returns shape {losses.shape} " \
           f"({'no reduction' if losses.shape == (2,) else 'reduced'}), takes logits"


def dropout_flags() -> str:
    # whether dropout is on by default
    det = default_of(nnx.Dropout, "deterministic")
    bcast = default_of(nnx.MultiHeadAttention, "broadcast_dropout")
    return f"nnx.Dropout deterministic={det} ({'inactive' if det else 'active'} until .eval()); " \
           f"MultiHeadAttention broadcast_dropout={bcast} (one mask for all batch items and heads)"


def cpu_precision() -> str:
    # the float32 precision actually used on CPU
    return f"jax_default_matmul_precision={jax.config.jax_default_matmul_precision} (no effect on CPU)"


def layer_norm_variance() -> str:
    # LayerNorm's variance formula
    return f"nnx.LayerNorm use_fast_variance={default_of(nnx.LayerNorm, 'use_fast_variance')} " \
           "(E[x^2] - E[x]^2)"


def attention_bias() -> str:
    # whether attention's projections carry a bias by default
    return f"nnx.MultiHeadAttention use_bias={default_of(nnx.MultiHeadAttention, 'use_bias')}"


def gelu_names() -> str:
    # what the GELU variants are called
    value = default_of(jax.nn.gelu, "approximate")
    return f"jax.nn.gelu approximate={value} (a bool: True tanh, False exact)"


def adam_bias_correction() -> str:
    # whether Adam divides by (1 - beta^t)
    switch = "bias correction switchable" if "bias_correction" in inspect.signature(
        optax.adamw).parameters else "bias correction always on"
    return f"optax.adamw {switch}, weight_decay={default_of(optax.adamw, 'weight_decay'):g}"


def float64_devices() -> str:
    # where float64 runs
    with warnings.catch_warnings():  # JAX warns that it truncates: that truncation is the finding
        warnings.simplefilter("ignore", UserWarning)
        made = jax.numpy.zeros(1, dtype=jax.numpy.float64).dtype
    return f"jax_enable_x64={jax.config.jax_enable_x64}: jnp.float64 makes {made} " \
           f"(float64 only with x64 on; platform {jax.devices()[0].platform})"


def mixed_precision_stream() -> str:
    # the dtype mixed precision holds the residual stream in
    x, bf16 = jax.numpy.zeros((1, 2), jax.numpy.float32), jax.numpy.bfloat16
    y = nnx.Linear(2, 2, dtype=bf16, param_dtype=jax.numpy.float32, rngs=nnx.Rngs(0))(x)
    return f"compute dtype per layer: nnx.Linear dtype={default_of(nnx.Linear, 'dtype')} (inferred); " \
           f"dtype=bfloat16 with float32 params gives {y.dtype}, + float32 gives {(x + y).dtype}: " \
           "type promotion decides the stream"


def rms_norm_eps() -> str:
    # RMSNorm's epsilon
    return f"nnx.RMSNorm epsilon={default_of(nnx.RMSNorm, 'epsilon'):g}"


# ---- numeric defaults the fast paths document (checked against these by the tests) --------------
def layer_norm_eps_values() -> dict[str, float]:
    return {"flax": float(default_of(nnx.LayerNorm, "epsilon"))}


def rms_norm_eps_values() -> dict[str, float]:
    return {"flax": float(default_of(nnx.RMSNorm, "epsilon"))}
