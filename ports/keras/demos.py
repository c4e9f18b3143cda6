"""Keras 3's demonstrations for the divergence catalogue (shared/teaching/*_demos.py): the
framework's own API run on the case a demonstration measures, so the gap it reports is the installed
framework's.

Parallel text: every native port's demos.py (ports/torch, keras, flax and mlx) has `adam_step`; the
other demonstrations exist only where the divergence lives in this framework's API. What the
framework's defaults are is read in defaults.py. Loaded through `ports.load_port_part(name, "demos")`.
"""

from __future__ import annotations

from typing import Any

# First: defaults.py prepares a process that runs every framework (the import order there).
import ports.keras.defaults  # noqa: F401  # isort: skip

import keras
import numpy as np

from shared.core.spec import ModelSpec


def adam_step(params: np.ndarray, grads: np.ndarray, lr: float, eps: float, weight_decay: float,
              decoupled: bool = True) -> np.ndarray:
    """One step of Keras 3's AdamW (decoupled=False: Adam with L2 weight decay, the decay added to
    the gradient) from zero moments. Keras' Adam has no L2 option: the decay is added here."""
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
