"""Why attention divides by sqrt(d_k): with standard-normal queries and keys, q.k has variance
d, so unscaled scores sharpen the softmax as the head width grows (`compare.py experiment sqrt-dk`
prints the statistics per width, scaled and unscaled)."""

from __future__ import annotations

import math

import numpy as np


def attention_statistics(dim: int, scaled: bool, keys: int = 16, queries: int = 2000,
                         seed: int = 0) -> tuple[float, float]:
    """Mean max weight and mean entropy (nats) of softmax(q.k [/ sqrt(d)]) for standard-normal q, k."""
    rng = np.random.default_rng([seed, dim])
    q = rng.standard_normal((queries, dim))
    k = rng.standard_normal((queries, keys, dim))
    scores = np.einsum("qd,qkd->qk", q, k) / (math.sqrt(dim) if scaled else 1.0)
    scores -= scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    entropy = -np.sum(weights * np.log(np.maximum(weights, 1e-300)), axis=-1)
    return float(weights.max(axis=-1).mean()), float(entropy.mean())
