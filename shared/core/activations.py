"""The spec's activation forms (`shared.core.spec.ACTIVATIONS`) as float64 NumPy functions: the
reference's MLP and head activation (shared/core/reference.py), and what `probes.activation_form`
compares a framework's activation with when it reads a built model's layers (each
`ports/<fw>/user.py`, in the worker). Their own module because reading a layer's form needs the
forms, not the whole oracle."""

from __future__ import annotations

import numpy as np
from scipy.special import erf


def activation(x: np.ndarray, form: str) -> np.ndarray:
    if form == "gelu":  # exact: x * Phi(x)
        return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))
    if form == "gelu_tanh":  # tanh approximation (jax.nn.gelu's and keras.ops.gelu's default)
        return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))
    if form == "quick_gelu":  # OpenAI CLIP's x * sigmoid(1.702 x)
        return x / (1.0 + np.exp(-1.702 * x))
    return x / (1.0 + np.exp(-x))  # silu: x * sigmoid(x)
