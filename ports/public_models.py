"""The public implementations a user would pick instead of a port, for `compare.py peers`: timm's
VisionTransformer, Transformers 4.x ViTForImageClassification in PyTorch, TensorFlow and Flax, and
keras-hub's ViTImageClassifier. Each is built random-initialised (nothing is downloaded) on the
model the spec describes (shared/measure/peer_timing.py checks that the spec is one it can express:
timm builds the newer families too, from the timm exporter's `model_kwargs`), in its own worker
process; each function imports its own framework and returns a synchronised forward call on the
run's canonical NHWC images, and facts about it (parameter count, mode).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from shared.core.spec import ModelSpec

Built = tuple[Callable[[], Any], dict[str, Any]]


def _nchw(images: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(images.transpose(0, 3, 1, 2))


def _hf_config(spec: ModelSpec) -> Any:
    from transformers import ViTConfig

    return ViTConfig(
        hidden_size=spec.dim, num_hidden_layers=spec.depth, num_attention_heads=spec.heads,
        intermediate_size=spec.mlp_dim, hidden_act="gelu", layer_norm_eps=spec.layer_norm_eps,
        image_size=spec.image_height, patch_size=spec.patch_height, num_channels=spec.channels,
        qkv_bias=spec.qkv_bias, num_labels=spec.num_classes, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0)


def _torch_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)
    torch.set_float32_matmul_precision("highest")  # fp32 GEMMs, as the ports pin them


def timm_model(kwargs: dict[str, Any], distilled: bool = False) -> Any:
    """A timm ViT from keyword arguments in the spelling of the timm exporter's `model_kwargs`
    (shared/checkpoints/timm.py), where layers are named as strings a reader can copy."""
    from timm import layers
    from timm.models.deit import VisionTransformerDistilled
    from timm.models.vision_transformer import VisionTransformer

    kwargs = dict(kwargs)
    if isinstance(kwargs.get("mlp_layer"), str):  # "timm.layers.SwiGLUPacked"
        kwargs["mlp_layer"] = getattr(layers, kwargs["mlp_layer"].rsplit(".", 1)[-1])
    norm = kwargs.get("norm_layer")
    if isinstance(norm, str):  # "functools.partial(timm.layers.LayerNorm, eps=1e-05)"
        kwargs["norm_layer"] = partial(layers.LayerNorm, eps=float(norm.rstrip(")").split("eps=")[1]))
    return (VisionTransformerDistilled if distilled else VisionTransformer)(**kwargs)


def timm_vit(spec: ModelSpec, images: np.ndarray, mode: str, threads: int,
             options: dict[str, Any] | None = None) -> Built:
    """timm VisionTransformer (fused scaled_dot_product_attention); eager or torch.compile.
    `options["kwargs"]`: the exporter's model_kwargs for `spec` (the parent computes them)."""
    import torch

    _torch_threads(threads)
    model = timm_model((options or {})["kwargs"], spec.distill_token).eval()
    x = torch.from_numpy(_nchw(images))
    run = torch.compile(model) if mode == "compiled" else model

    def call() -> Any:
        with torch.no_grad():
            return run(x)

    return call, {"params": sum(p.numel() for p in model.parameters()), "mode": mode}


def hf_torch_vit(spec: ModelSpec, images: np.ndarray, mode: str, threads: int,
                 options: dict[str, Any] | None = None) -> Built:
    """Transformers ViTForImageClassification in PyTorch, eager (its default attention)."""
    import torch
    from transformers import ViTForImageClassification

    _torch_threads(threads)
    model = ViTForImageClassification(_hf_config(spec)).eval()
    x = torch.from_numpy(_nchw(images))

    def call() -> Any:
        with torch.no_grad():
            return model(pixel_values=x).logits

    return call, {"params": sum(p.numel() for p in model.parameters()), "mode": "eager",
                  "attention": str(model.config._attn_implementation)}


def hf_flax_vit(spec: ModelSpec, images: np.ndarray, mode: str, threads: int,
                options: dict[str, Any] | None = None) -> Built:
    """Transformers FlaxViTForImageClassification under jax.jit (threads: the CPU affinity)."""
    import jax
    from transformers import FlaxViTForImageClassification

    jax.config.update("jax_default_matmul_precision", "highest")
    shape = (1, spec.image_height, spec.image_width, spec.channels)
    model = FlaxViTForImageClassification(_hf_config(spec), input_shape=shape, seed=0)
    forward = jax.jit(lambda params, pixels: model(pixels, params=params).logits)
    params, x = model.params, _nchw(images)
    count = sum(int(np.prod(leaf.shape)) for leaf in jax.tree.leaves(params))
    return (lambda: forward(params, x).block_until_ready()), {"params": count, "mode": "jax.jit"}


def _tf_threads(threads: int) -> None:
    import tensorflow as tf

    try:  # only settable before the TF runtime starts
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    except RuntimeError:
        pass
    tf.config.experimental.enable_tensor_float_32_execution(False)


def hf_tf_vit(spec: ModelSpec, images: np.ndarray, mode: str, threads: int,
              options: dict[str, Any] | None = None) -> Built:
    """Transformers TFViTForImageClassification (on tf_keras) in a tf.function."""
    import tensorflow as tf
    from transformers import TFViTForImageClassification

    _tf_threads(threads)
    model = TFViTForImageClassification(_hf_config(spec))
    x = tf.constant(_nchw(images))
    forward = tf.function(lambda pixels: model(pixel_values=pixels, training=False).logits)
    forward(x)  # builds the weights, so that they can be counted
    return (lambda: forward(x).numpy()), {"params": int(model.count_params()), "mode": "tf.function"}


def keras_hub_vit(spec: ModelSpec, images: np.ndarray, mode: str, threads: int,
                  options: dict[str, Any] | None = None) -> Built:
    """keras-hub ViTImageClassifier on Keras 3 (TensorFlow backend): `predict_on_batch`, what a
    user calls (Keras' jit_compile="auto"), or `graph`, a tf.function like the Keras port's."""
    import keras_hub
    import tensorflow as tf

    _tf_threads(threads)
    backbone = keras_hub.models.ViTBackbone(
        image_shape=(spec.image_height, spec.image_width, spec.channels),
        patch_size=(spec.patch_height, spec.patch_width), num_layers=spec.depth, num_heads=spec.heads,
        hidden_dim=spec.dim, mlp_dim=spec.mlp_dim, layer_norm_epsilon=spec.layer_norm_eps,
        use_mha_bias=spec.qkv_bias, use_class_token=True)
    model = keras_hub.models.ViTImageClassifier(backbone=backbone, num_classes=spec.num_classes)
    x = tf.constant(images)
    facts = {"params": int(model.count_params()), "mode": mode}
    if mode == "graph":
        forward = tf.function(lambda t: model(t, training=False), jit_compile=False)
        return (lambda: forward(x).numpy()), facts
    return (lambda: model.predict_on_batch(x)), {**facts, "jit_compile": str(model.jit_compile)}


# (spec, images, mode, threads, options): options are what the parent worked out for this builder
BUILDERS: dict[str, Callable[[ModelSpec, np.ndarray, str, int, dict[str, Any] | None], Built]] = {
    "timm": timm_vit, "hf-torch": hf_torch_vit, "hf-flax": hf_flax_vit, "hf-tf": hf_tf_vit,
    "keras-hub": keras_hub_vit,
}
