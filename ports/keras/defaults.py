"""Keras 3's side of the divergence catalogue (shared/teaching/): the installed Keras's default for
each entry, read from the framework.

Parallel text: every native port's defaults.py (ports/torch, keras, flax and mlx) has the same
readers in the same order (one per catalogue entry, named by its key) and the same numeric defaults.
Defaults are read (`inspect.signature`, a fresh layer's attributes, parameter shapes, a measured
call); where no attribute holds a value, one comment says where it comes from. A built model is read
by user.py (`layers()`), the demonstrations run in demos.py. Loaded through
`ports.load_port_part(name, "defaults")`.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys

# The teaching tools run every framework in one process. Measured here: once TensorFlow is
# loaded, a later import of triton (pulled in by torch._dynamo, e.g. on a torch optimizer's first
# step) segfaults the process; imported first, both live together.
if "tensorflow" not in sys.modules and importlib.util.find_spec("torch") is not None:
    importlib.import_module("torch._dynamo")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's start-up log is noise here

import keras  # after the two set-up lines above, on purpose
import numpy as np

from shared.core.probes import default_of


# ---- defaults, one reader per catalogue entry (catalogue order) ---------------------------------
def head_width() -> str:
    # what the integer in "heads=4, dim 32" becomes
    m = keras.layers.MultiHeadAttention(num_heads=4, key_dim=32)
    m(x := np.zeros((1, 3, 32), np.float32), x)
    shape = tuple(m._query_dense.kernel.shape)
    return f"MultiHeadAttention(num_heads=4, key_dim=32): head width {shape[-1]}, {m.count_params():,} params"


def remainder() -> str:
    # pixels that do not fill a patch
    return (f"Conv2D padding={default_of(keras.layers.Conv2D, 'padding')!r}; "
            f"ops.image.extract_patches padding={default_of(keras.ops.image.extract_patches, 'padding')!r}")


def patch_layout() -> str:
    # the flatten order of one patch
    x = np.arange(8, dtype=np.float32).reshape(1, 2, 2, 2)  # NHWC, 2x2, C=2
    flat = np.asarray(keras.ops.image.extract_patches(x, 2))[0, 0, 0].tolist()
    order = "(ph, pw, C)" if flat == [float(i) for i in range(8)] else str(flat)
    return f"ops.image.extract_patches / Conv2D.kernel.reshape(-1, D) flatten {order}"


def layer_norm_eps() -> str:
    # LayerNorm's epsilon
    return (f"layers.LayerNormalization epsilon={default_of(keras.layers.LayerNormalization, 'epsilon'):g}"
            f"; ops.layer_normalization uses backend.epsilon()={keras.config.epsilon():g}")


def gelu() -> str:
    # the GELU form
    ops = default_of(keras.ops.gelu, "approximate")
    act = default_of(keras.activations.gelu, "approximate")
    return f"keras.ops.gelu approximate={ops} ({'tanh' if ops else 'exact'}); " \
           f"activations.gelu approximate={act} ({'tanh' if act else 'exact'})"


def norm_placement() -> str:
    # the framework's own encoder block, if it has one
    if importlib.util.find_spec("keras_hub") is None:
        return "no built-in encoder block (keras_hub's TransformerEncoder: not installed)"
    keras_hub = importlib.import_module("keras_hub")
    first = default_of(keras_hub.layers.TransformerEncoder, "normalize_first")
    return f"keras_hub TransformerEncoder normalize_first={first}"


def pooling() -> str:
    # the readout of the framework's (or its model zoo's) ViT
    return f"GlobalAveragePooling1D data_format=" \
           f"{default_of(keras.layers.GlobalAveragePooling1D, 'data_format')!r}: averages every token"


def batch_first() -> str:
    # the axis order attention takes
    m = keras.layers.MultiHeadAttention(num_heads=1, key_dim=2)
    x = np.random.default_rng(0).standard_normal((2, 3, 2)).astype(np.float32)
    moved = x.copy()
    moved[1] += 1  # change the second item of axis 0 only
    alone = np.allclose(np.asarray(m(x, x))[0], np.asarray(m(moved, moved))[0])
    option = "batch_first" in inspect.signature(keras.layers.MultiHeadAttention).parameters
    return f"MultiHeadAttention takes {'(B, T, E)' if alone else '(T, B, E)'} (measured: axis 0 " \
           f"{'does not mix' if alone else 'mixes'}); batch_first option: {option}"


def attention_scale() -> str:
    # the score scale
    m = keras.layers.MultiHeadAttention(num_heads=1, key_dim=8)
    m(x := np.zeros((1, 3, 8), np.float32), x)  # the scale is set when the layer builds
    # _inverse_sqrt_key_dim is the attribute _compute_attention multiplies the query by
    scale = float(m._inverse_sqrt_key_dim)
    label = "1/sqrt(key_dim)" if abs(scale - 8**-0.5) < 1e-12 else f"{scale:g} for key_dim 8"
    return f"MultiHeadAttention: {label} (its _inverse_sqrt_key_dim)"


def conv_kernel_layout() -> str:
    # the conv kernel's axis order
    layer = keras.layers.Conv2D(8, (4, 2))
    layer.build((None, 8, 8, 3))
    return (f"Conv2D(8, (4, 2)).kernel {tuple(layer.kernel.shape)} = HWIO, "
            f"image_data_format {keras.config.image_data_format()!r}")


def dense_kernel_layout() -> str:
    # the dense kernel's axis order
    layer = keras.layers.Dense(5)
    layer.build((None, 3))
    return f"Dense(5) on 3 features: kernel {tuple(layer.kernel.shape)} = (in, out)"


def adamw_epsilon() -> str:
    # where AdamW adds epsilon, and its defaults
    a = keras.optimizers.AdamW
    return f"optimizers.AdamW epsilon={default_of(a, 'epsilon'):g} (added to sqrt(v), 'epsilon hat'), " \
           f"weight_decay={default_of(a, 'weight_decay'):g}"


def weight_decay() -> str:
    # what weight decay decays, and how
    has = hasattr(keras.optimizers.AdamW, "exclude_from_weight_decay")
    return "AdamW decays every variable" + (" unless exclude_from_weight_decay() is called" if has else "")


def clipnorm() -> str:
    # per-variable or global gradient clipping
    o = keras.optimizers.SGD
    return f"clipnorm={default_of(o, 'clipnorm')} clips each variable separately; " \
           f"global_clipnorm={default_of(o, 'global_clipnorm')} clips the global norm"


def cross_entropy() -> str:
    # the loss's reduction and input
    c = keras.losses.SparseCategoricalCrossentropy
    return f"SparseCategoricalCrossentropy from_logits={default_of(c, 'from_logits')}, " \
           f"reduction={default_of(c, 'reduction')!r}"


def dropout_flags() -> str:
    # whether dropout is on by default
    layer = keras.layers.Dropout(0.5)
    x = np.ones((1, 64), np.float32)
    changed = bool(np.any(np.asarray(layer(x)) != x))
    return f"Dropout(0.5)(x) without training=: {'active' if changed else 'inactive (inference)'}"


def cpu_precision() -> str:
    # the float32 precision actually used on CPU
    onednn = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "unset (on)")
    return f"dtype_policy={keras.config.dtype_policy().name!r}, TF_ENABLE_ONEDNN_OPTS={onednn}"


def layer_norm_variance() -> str:
    # LayerNorm's variance formula
    y = float(np.asarray(keras.layers.LayerNormalization()(np.array([[1e4 + 1, 1e4 - 1]], np.float32)))[0, 0])
    form = "two-pass variance" if abs(y) > 0.5 else "E[x^2] - E[x]^2"
    return f"LayerNormalization: {form} (measured: 1e4 +- 1 in float32 normalises to {y:.3g}; " \
           "one pass cancels to 0)"


def attention_bias() -> str:
    # whether attention's projections carry a bias by default
    return f"MultiHeadAttention use_bias={default_of(keras.layers.MultiHeadAttention, 'use_bias')}"


def gelu_names() -> str:
    # what the GELU variants are called
    return f"keras.activations.gelu approximate={default_of(keras.activations.gelu, 'approximate')} " \
           "(a bool: False exact, True tanh)"


def adam_bias_correction() -> str:
    # whether Adam divides by (1 - beta^t)
    a = keras.optimizers.AdamW
    switch = "bias correction switchable" if "bias_correction" in inspect.signature(a).parameters \
        else "bias correction always on"
    return f"optimizers.AdamW {switch}, weight_decay={default_of(a, 'weight_decay'):g}"


def float64_devices() -> str:
    # where float64 runs
    return f"floatx={keras.config.floatx()!r}: layers build float32 unless dtype='float64'; " \
           f"backend {keras.backend.backend()} runs float64 on the CPU"


def mixed_precision_stream() -> str:
    # the dtype mixed precision holds the residual stream in
    layer = keras.layers.Identity(dtype="mixed_bfloat16")
    seen = keras.backend.standardize_dtype(layer(np.zeros((1, 2), np.float32)).dtype)
    return f"global dtype policy {keras.config.dtype_policy().name!r}; a 'mixed_bfloat16' layer " \
           f"(autocast={layer.autocast}) casts float32 inputs to {seen}: under the global one, the stream too"


def rms_norm_eps() -> str:
    # RMSNorm's epsilon
    return (f"layers.RMSNormalization epsilon={default_of(keras.layers.RMSNormalization, 'epsilon'):g}"
            f"; ops.rms_normalization epsilon={default_of(keras.ops.rms_normalization, 'epsilon')}: "
            f"backend.epsilon()={keras.config.epsilon():g}")


# ---- numeric defaults the fast paths document (checked against these by the tests) --------------
def layer_norm_eps_values() -> dict[str, float]:
    return {"keras": float(default_of(keras.layers.LayerNormalization, "epsilon")),
            "keras.ops": float(keras.config.epsilon())}


def rms_norm_eps_values() -> dict[str, float]:
    return {"keras": float(default_of(keras.layers.RMSNormalization, "epsilon")),
            "keras.ops": float(keras.config.epsilon())}
