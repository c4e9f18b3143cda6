"""Transformers' ViT for image classification in Flax (linen underneath) and TensorFlow (tf_keras),
random-initialised on the spec, loaded by path as a user's `--model FILE.py:NAME` is. These classes
exist in Transformers 4.x only: the tests that load this file give their workers 4.x's side
directory (conftest.py's `transformers4`). Transformers hides them unless the worker starts for their
framework, so the tests pass `--framework flax` / `--framework keras`. Both take the model's own
input: the Flax module NHWC (its wrapper object's NCHW transpose is skipped: the linen reader applies
the module), the TF model NCHW."""

from __future__ import annotations

from typing import Any

import numpy as np


def _config(spec: Any) -> Any:
    from transformers import ViTConfig

    return ViTConfig(hidden_size=spec.dim, num_hidden_layers=spec.depth, num_attention_heads=spec.heads,
                     intermediate_size=spec.mlp_dim, image_size=spec.image_height,
                     patch_size=spec.patch_height, num_channels=spec.channels, num_labels=spec.num_classes,
                     layer_norm_eps=spec.layer_norm_eps)


def flax_vit(spec: Any) -> Any:
    from transformers import FlaxViTForImageClassification

    shape = (1, spec.image_height, spec.image_width, spec.channels)
    return FlaxViTForImageClassification(_config(spec), input_shape=shape, seed=0)


def tf_vit(spec: Any) -> Any:
    from transformers import TFViTForImageClassification

    model = TFViTForImageClassification(_config(spec))
    model(np.zeros((1, spec.channels, spec.image_height, spec.image_width), np.float32))  # builds it
    return model
