"""Keras 3's side of the divergence catalogue (shared/teaching/): the installed Keras' default for
each entry, the audit of a built Keras model against a spec, and the demonstrations that run in
Keras.

Parallel text with ports/torch/defaults.py and ports/flax/defaults.py: the same readers in the
same order (one per catalogue entry, named by its key), the same numeric defaults, `audit_model`
and `adam_step`; the other demonstrations exist only where the divergence lives in this
framework's API. Defaults are read (`inspect.signature`, a fresh layer's attributes, parameter
shapes, a measured call), never typed in. Loaded through `ports.load_port_part(name, "defaults")`.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from typing import Any

# The teaching tools run every framework in one process. Measured here: once TensorFlow is
# loaded, a later import of triton (pulled in by torch._dynamo, e.g. on a torch optimizer's first
# step) segfaults the process; imported first, both live together.
if "tensorflow" not in sys.modules and importlib.util.find_spec("torch") is not None:
    importlib.import_module("torch._dynamo")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's start-up log is noise here

import keras  # after the two set-up lines above, on purpose
import numpy as np

from shared.core.probes import Finding, close, default_of, expected_form, gelu_form, is_spec_rate
from shared.core.spec import ModelSpec


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
    return "MultiHeadAttention takes (B, T, E); no option"


def attention_scale() -> str:
    # the score scale
    return "MultiHeadAttention: 1/sqrt(key_dim)"


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
    return "LayerNormalization: moments (two-pass)"


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


# ---- numeric defaults the fast paths document (checked against these by the tests) --------------
def layer_norm_eps_values() -> dict[str, float]:
    return {"keras": float(default_of(keras.layers.LayerNormalization, "epsilon")),
            "keras.ops": float(keras.config.epsilon())}


def gelu_tanh_values() -> dict[str, bool]:
    """API -> True when its default GELU is the tanh approximation."""
    return {"keras.ops.gelu": bool(default_of(keras.ops.gelu, "approximate")),
            "keras.activations.gelu": bool(default_of(keras.activations.gelu, "approximate"))}


# ---- built-model audit ---------------------------------------------------------------------------
def audit_model(model: Any, spec: ModelSpec, label: str) -> list[Finding]:
    """What each layer of a built Keras model or layer holds, against what `spec` requires."""
    out: list[Finding] = []
    for path, layer in _named_layers(model):
        where = f"{label}:{path or '<root>'}"
        is_norm = isinstance(layer, keras.layers.LayerNormalization)
        if is_norm and not close(layer.epsilon, spec.layer_norm_eps):
            out.append(Finding(where, "layer_norm_eps",
                               f"LayerNormalization epsilon={layer.epsilon:g}, spec {spec.layer_norm_eps:g}"))
        if isinstance(layer, keras.layers.Activation):
            form = gelu_form(layer)
            expected = expected_form(where, spec)
            if form is not None and form != expected:
                out.append(Finding(where, "gelu", f"activation computes {form}, spec {expected}"))
        if isinstance(layer, keras.layers.MultiHeadAttention):
            if layer._key_dim != spec.head_dim:
                out.append(Finding(where, "head_width", f"key_dim={layer._key_dim} (per head), spec head_dim "
                                   f"{spec.head_dim}"))
            if not close(layer._dropout, spec.dropout_attn):
                out.append(Finding(where, "dropout_flags", f"attention dropout {layer._dropout:g}, spec "
                                   f"{spec.dropout_attn:g}"))
        if isinstance(layer, keras.layers.Dropout) and not is_spec_rate(layer.rate, spec):
            out.append(Finding(where, "dropout_flags",
                               f"Dropout rate={layer.rate:g} is none of the spec's rates"))
    return out


def _named_layers(root: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """(path, layer) for every sub-layer, named by the attribute holding it (an unbuilt layer has no
    `path` yet), else by its Keras name (Sequential): so an activation can be told apart by where it sits."""
    out, seen = [(prefix, root)], {id(root)}

    def visit(obj: Any, path: str) -> None:
        names: dict[int, str] = {}  # id(child) -> the public attribute (or list item) holding it
        for attr, value in ((a, v) for a, v in vars(obj).items() if not a.startswith("_")):
            listed = enumerate(value) if isinstance(value, (list, tuple)) else [(None, value)]
            names.update({id(v): attr if i is None else f"{attr}.{i}" for i, v in listed})
        for child in obj._flatten_layers(include_self=False, recursive=False):
            if isinstance(child, keras.layers.Layer) and id(child) not in seen:
                seen.add(id(child))
                name = names.get(id(child), child.name)
                child_path = f"{path}.{name}" if path else name
                out.append((child_path, child))
                visit(child, child_path)

    visit(root, prefix)
    return out


# ---- demonstrations -------------------------------------------------------------------------------
def adam_step(params: np.ndarray, grads: np.ndarray, lr: float, eps: float, weight_decay: float,
              decoupled: bool = True) -> np.ndarray:
    """One step of Keras' AdamW (decoupled=False: Adam with L2 weight decay, the decay added to
    the gradient, as Keras has no such option) from zero moments."""
    var = keras.Variable(np.array(params, copy=True))
    if decoupled:
        opt = keras.optimizers.AdamW(learning_rate=lr, epsilon=eps, weight_decay=weight_decay)
        grad = np.asarray(grads)
    else:
        opt = keras.optimizers.Adam(learning_rate=lr, epsilon=eps)
        grad = np.asarray(grads) + weight_decay * np.asarray(params)
    opt.apply_gradients([(keras.ops.convert_to_tensor(grad.astype(np.asarray(params).dtype)), var)])
    return np.asarray(keras.ops.convert_to_numpy(var))


def clipped_sgd_updates(grads: list[np.ndarray], clip: float, per_variable: bool) -> list[np.ndarray]:
    """The update SGD(learning_rate=1) applies to each variable with `clipnorm=clip`
    (per_variable) or `global_clipnorm=clip`."""
    variables = [keras.Variable(np.zeros_like(x, dtype=np.float32)) for x in grads]
    option = "clipnorm" if per_variable else "global_clipnorm"
    opt = keras.optimizers.SGD(learning_rate=1.0, **{option: clip})
    opt.apply_gradients([(keras.ops.convert_to_tensor(x.astype(np.float32)), v)
                         for x, v in zip(grads, variables, strict=True)])
    return [-np.asarray(keras.ops.convert_to_numpy(v)) for v in variables]


def sparse_cross_entropy(labels: np.ndarray, logits: np.ndarray, from_logits: bool | None) -> float:
    """SparseCategoricalCrossentropy on float32 logits; from_logits=None keeps Keras' default."""
    kwargs = {} if from_logits is None else {"from_logits": from_logits}
    loss_fn = keras.losses.SparseCategoricalCrossentropy(**kwargs)
    return float(loss_fn(labels, logits.astype(np.float32)))


def global_policy_port(spec: ModelSpec, precision: Any) -> Any:
    """The Keras port at a mixed `precision`, its model rebuilt under Keras' global policy (restored after):
    `compute=` is the computing layers' policy; with no `dtype=`, containers and LayerNorms take it too."""
    from ports.keras.model import VisionTransformer
    from ports.keras.port import Port

    port, previous = Port(spec, precision=precision), keras.config.dtype_policy()
    keras.config.set_dtype_policy(f"mixed_{precision.dtype}")
    try:
        port.model = VisionTransformer(spec, compute=keras.config.dtype_policy().name)
        port.model(np.zeros((1, spec.image_height, spec.image_width, spec.channels), np.float32))
    finally:
        keras.config.set_dtype_policy(previous)
    return port
