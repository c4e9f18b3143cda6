"""Transformers' ViT for image classification in Flax (linen underneath) and TensorFlow (tf_keras),
random-initialised on the spec as the hf plug-in builds a timing peer, loaded by path as a user's
`--model FILE.py:NAME` is. These classes exist in Transformers 4.x only: the tests that load this
file give their workers 4.x's side directory (conftest.py's `transformers4`). Transformers hides them
unless the worker starts for their framework, so the tests pass `--framework flax` / `--framework
keras`. Both take the model's own input: the Flax module NHWC (its wrapper object's NCHW transpose is
skipped: the linen reader applies the module), the TF model NCHW."""

from __future__ import annotations

from typing import Any

import numpy as np

from shared.checkpoints.libraries import hf


def flax_vit(spec: Any) -> Any:
    shape = (1, spec.image_height, spec.image_width, spec.channels)
    return hf.build_model(spec, "flax", input_shape=shape, seed=0)


def tf_vit(spec: Any) -> Any:
    model = hf.build_model(spec, "tf")
    model(np.zeros((1, spec.channels, spec.image_height, spec.image_width), np.float32))  # builds it
    return model
