"""The public implementations a user would pick instead of a port, for `compare.py peers`: the timm,
Transformers and keras-hub classes that compute the spec (Transformers' TensorFlow and Flax classes:
4.x's ViTForImageClassification only), timed in their own worker process. Each function sets its
framework's threads, builds the model with `make` (the library's plug-in's constructor, bound to
the spec by shared/measure/peer_timing.py: random-initialised, nothing downloaded) and returns a
synchronised forward call on the run's canonical NHWC images, and facts about it (parameter count,
mode).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from shared.core.spec import ModelSpec

Built = tuple[Callable[[], Any], dict[str, Any]]


def _nchw(images: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(images.transpose(0, 3, 1, 2))


def _torch_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)
    torch.set_float32_matmul_precision("highest")  # fp32 GEMMs, as the ports pin them


def timm_vit(spec: ModelSpec, images: np.ndarray, mode: str, threads: int,
             make: Callable[[], Any]) -> Built:
    """timm VisionTransformer (fused scaled_dot_product_attention); eager or torch.compile."""
    import torch

    _torch_threads(threads)
    model = make().eval()
    x = torch.from_numpy(_nchw(images))
    run = torch.compile(model) if mode == "compiled" else model

    def call() -> Any:
        with torch.no_grad():
            return run(x)

    return call, {"params": sum(p.numel() for p in model.parameters()), "mode": mode}


def hf_torch_vit(spec: ModelSpec, images: np.ndarray, mode: str, threads: int,
                 make: Callable[[], Any]) -> Built:
    """The Transformers PyTorch class that computes the spec (ViTForImageClassification, or the
    family's or tower's own: the hf exporter's choice), eager, its default attention."""
    import torch

    _torch_threads(threads)
    model = make().eval()
    x = torch.from_numpy(_nchw(images))

    def call() -> Any:
        with torch.no_grad():
            return model(pixel_values=x)  # logits, or a tower's pooled output and tokens

    return call, {"params": sum(p.numel() for p in model.parameters()), "mode": "eager",
                  "attention": str(model.config._attn_implementation)}


def hf_flax_vit(spec: ModelSpec, images: np.ndarray, mode: str, threads: int,
                make: Callable[[], Any]) -> Built:
    """Transformers FlaxViTForImageClassification under jax.jit (threads: the CPU affinity)."""
    import jax

    jax.config.update("jax_default_matmul_precision", "highest")
    model = make()
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
              make: Callable[[], Any]) -> Built:
    """Transformers TFViTForImageClassification (on tf_keras) in a tf.function."""
    import tensorflow as tf

    _tf_threads(threads)
    model = make()
    x = tf.constant(_nchw(images))
    forward = tf.function(lambda pixels: model(pixel_values=pixels, training=False).logits)
    forward(x)  # builds the weights, so that they can be counted
    return (lambda: forward(x).numpy()), {"params": int(model.count_params()), "mode": "tf.function"}


def keras_hub_vit(spec: ModelSpec, images: np.ndarray, mode: str, threads: int,
                  make: Callable[[], Any]) -> Built:
    """The keras-hub class that computes the spec (ViTImageClassifier, or the family's own: the
    keras_hub exporter's choice) on Keras 3 (TensorFlow backend): `predict_on_batch`, what a user
    calls (Keras' jit_compile="auto"), or `graph`, a tf.function like the Keras port's."""
    import tensorflow as tf

    _tf_threads(threads)
    model = make()
    x = tf.constant(images)
    # its trainable variables: count_params also counts an integer table (SigLIP's position_ids)
    count = sum(int(np.prod(v.shape)) for v in model.trainable_weights)
    facts = {"params": count, "mode": mode}
    if mode == "graph":
        forward = tf.function(lambda t: model(t, training=False), jit_compile=False)
        return (lambda: forward(x).numpy()), facts
    return (lambda: model.predict_on_batch(x)), {**facts, "jit_compile": str(model.jit_compile)}


def parameter_sizes(model: Any, names: tuple[str, ...]) -> dict[str, int]:
    """The size of each parameter of `model` named in `names`, a library's table's native names
    for a torch module's parameters (the other peers count their trainable variables: none)."""
    named = getattr(model, "named_parameters", None)
    if not callable(named):
        return {}
    return {name: int(p.numel()) for name, p in named() if name in names}


# (spec, images, mode, threads, make): make builds the library's model for the spec
BUILDERS: dict[str, Callable[[ModelSpec, np.ndarray, str, int, Callable[[], Any]], Built]] = {
    "timm": timm_vit, "hf-torch": hf_torch_vit, "hf-flax": hf_flax_vit, "hf-tf": hf_tf_vit,
    "keras-hub": keras_hub_vit,
}
