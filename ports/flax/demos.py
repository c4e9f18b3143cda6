"""Flax's demonstrations for the divergence catalogue (shared/teaching/*_demos.py): the framework's
own API run on the case a demonstration measures, so the gap it reports is the installed
framework's.

Parallel text: every native port's demos.py (ports/torch, keras, flax and mlx) has `adam_step`; the
other demonstrations exist only where the divergence lives in this framework's API. What the
framework's defaults are is read in defaults.py. Loaded through `ports.load_port_part(name, "demos")`.
"""

from __future__ import annotations

import jax
import numpy as np
import optax
from flax import nnx


def adam_step(params: np.ndarray, grads: np.ndarray, lr: float, eps: float, weight_decay: float,
              decoupled: bool = True) -> np.ndarray:
    """One step of Flax's AdamW (decoupled=False: Adam with L2 weight decay, the decay added to the
    gradient) from zero moments: optax.adamw, or optax.adam chained after add_decayed_weights."""
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
