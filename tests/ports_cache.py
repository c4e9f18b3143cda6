"""Build each (framework, spec) port once per test session: Keras and Flax model construction
dominates the run time of the equivalence tests otherwise."""

from __future__ import annotations

from functools import cache

import numpy as np

from ports import create_port
from shared.core import reference
from shared.core.inputs import probe_batch
from shared.core.presets import get_preset
from shared.core.spec import ModelSpec
from shared.core.weights import init_weights


@cache
def port(framework: str, spec: ModelSpec):
    return create_port(framework, spec)


def batch_for(spec: ModelSpec) -> int:
    # ViT-S/16 and ViT-B/16 at batch 1: MLX's Linux CPU wheel runs the reference BLAS (~30x NumPy)
    return 1 if spec.derived.params > 10_000_000 else 4


@cache
def case(preset: str) -> tuple[ModelSpec, dict, np.ndarray, np.ndarray]:
    """(spec, seed-0 weights, probe batch, float64 reference logits) for a preset."""
    spec = get_preset(preset)
    tensors = init_weights(spec, 0)
    images = probe_batch(spec, batch_for(spec))
    return spec, tensors, images, reference.forward(spec, tensors, images)


@cache
def port_logits(framework: str, preset: str) -> np.ndarray:
    spec, tensors, images, _ = case(preset)
    p = port(framework, spec)
    p.load(tensors)
    return p.logits(images)
