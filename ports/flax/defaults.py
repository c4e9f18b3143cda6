"""Flax's (flax.nnx on JAX, optax) side of the divergence catalogue (shared/teaching/): the installed
Flax's default for each entry, the audit of a built nnx module against a spec, and the
demonstrations that run in Flax.

Parallel text with ports/torch/defaults.py and ports/keras/defaults.py: the same readers in the
same order (one per catalogue entry, named by its key), the same numeric defaults, `audit_model`
and `adam_step`; the other demonstrations exist only where the divergence lives in this
framework's API. Defaults are read (`inspect.signature`, a fresh layer's attributes, parameter
shapes, a measured call), never typed in. Loaded through `ports.load_port_part(name, "defaults")`.
"""

from __future__ import annotations

import inspect
import warnings
from typing import Any

import jax
import numpy as np
import optax
from flax import nnx

from shared.core.probes import Finding, close, default_of, expected_form, gelu_form, is_spec_rate
from shared.core.spec import ModelSpec


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
    return "no built-in encoder block: placement is whatever the model code writes"


def pooling() -> str:
    # the readout of the framework's (or its model zoo's) ViT
    return "no built-in pooling layer (big_vision's ViT: pool_type='gap')"


def batch_first() -> str:
    # the axis order attention takes
    return "nnx.MultiHeadAttention takes (..., T, E): leading axes are batch"


def attention_scale() -> str:
    # the score scale
    return "nnx.dot_product_attention: 1/sqrt(query.shape[-1]) (qkv_features / num_heads)"


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
    return "optax.softmax_cross_entropy_with_integer_labels returns one loss per example (no reduction)"


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


# ---- numeric defaults the fast paths document (checked against these by the tests) --------------
def layer_norm_eps_values() -> dict[str, float]:
    return {"flax": float(default_of(nnx.LayerNorm, "epsilon"))}


def gelu_tanh_values() -> dict[str, bool]:
    """API -> True when its default GELU is the tanh approximation."""
    return {"jax.nn.gelu": bool(default_of(jax.nn.gelu, "approximate"))}


# ---- built-model audit ---------------------------------------------------------------------------
def audit_model(model: Any, spec: ModelSpec, label: str) -> list[Finding]:
    """What each node of a built nnx module holds, against what `spec` requires."""
    out: list[Finding] = []
    for path, node in nnx.iter_graph(model):
        where = f"{label}:{'.'.join(str(p) for p in path) or '<root>'}"
        if isinstance(node, nnx.LayerNorm):
            if not close(node.epsilon, spec.layer_norm_eps):
                out.append(Finding(where, "layer_norm_eps", f"LayerNorm epsilon={node.epsilon:g}, spec "
                                   f"{spec.layer_norm_eps:g}"))
            if node.use_fast_variance:
                out.append(Finding(where, "layer_norm_variance", "use_fast_variance=True (Flax's default)"))
        if isinstance(node, nnx.MultiHeadAttention):
            if node.head_dim != spec.head_dim:
                out.append(Finding(where, "head_width", f"head width {node.head_dim}, spec {spec.head_dim}"))
            if node.broadcast_dropout and node.dropout_rate:
                out.append(Finding(where, "dropout_flags", "broadcast_dropout=True: one mask for every "
                                   "batch item and head"))
        if isinstance(node, nnx.Dropout) and not is_spec_rate(node.rate, spec):
            out.append(Finding(where, "dropout_flags",
                               f"Dropout rate={node.rate:g} is none of the spec's rates"))
        if isinstance(node, nnx.Module):
            for attr, value in vars(node).items():
                if callable(value) and not isinstance(value, nnx.Module) and attr.startswith("act"):
                    form = gelu_form(value)
                    expected = expected_form(where, spec)
                    if form is not None and form != expected:
                        out.append(Finding(f"{where}.{attr}", "gelu", f"activation computes {form}, "
                                           f"spec {expected}"))
    return out


# ---- demonstrations -------------------------------------------------------------------------------
def adam_step(params: np.ndarray, grads: np.ndarray, lr: float, eps: float, weight_decay: float,
              decoupled: bool = True) -> np.ndarray:
    """One step of optax.adamw (decoupled=False: Adam with L2 weight decay, the decay added to the
    gradient before the Adam scaling) from zero moments."""
    if decoupled:
        opt = optax.adamw(lr, eps=eps, weight_decay=weight_decay)
    else:
        opt = optax.chain(optax.add_decayed_weights(weight_decay), optax.adam(lr, eps=eps))
    p = jax.numpy.asarray(params)
    updates, _ = opt.update(jax.numpy.asarray(grads), opt.init(p), p)
    return np.asarray(optax.apply_updates(p, updates))


def layer_norm(x: np.ndarray, epsilon: float, fast_variance: bool) -> np.ndarray:
    """x through nnx.LayerNorm(use_fast_variance=fast_variance), unit scale and zero bias."""
    ln = nnx.LayerNorm(x.shape[-1], epsilon=epsilon, use_fast_variance=fast_variance, rngs=nnx.Rngs(0))
    return np.asarray(ln(jax.numpy.asarray(x)))
