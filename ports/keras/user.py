"""A user's own Keras 3 (`keras.layers`) model where portbench's port stands: read and write its
parameters, run it on canonical inputs, capture its intermediates and read its settings. Runs in the
worker process only (the user's file is imported there, never in the parent).

Functional, Sequential and subclassed models and bare layers, on any Keras backend. Names are
variable paths ("encoder_0_attention/query/kernel"); a layer without variables has no path, so
it is named by its parent's path and its Keras name.

Keras 2 models (`tf_keras`, what Transformers' TF classes such as `TFViTForImageClassification`
are built on) are read by the same functions: their variables are named by their TensorFlow
names without the ":0" suffix ("tf_vi_t_for_image_classification/vit/embeddings/cls_token"),
their layers are matched against tf_keras' own classes, an activation function a layer holds as
an attribute (Transformers' `intermediate_act_fn`) is listed as a layer, and they are compiled
with tf.function whatever the Keras 3 backend. tf_keras is never imported here: an object is one
of its models only when the user's code has imported it.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Callable
from typing import Any

import keras
import numpy as np
from keras import layers as kl
from keras import ops

from shared.core.forward_io import (
    check_assignment,
    model_inputs,
    numpy_outputs,
    output_rows,
    pick_logits,
    token_layout,
)
from shared.core.layer import Layer
from shared.core.probes import gelu_form
from shared.errors import InputError, WeightsError

BACKEND = keras.backend.backend()


def owns(obj: Any) -> bool:
    # True when obj is a model of this framework
    return isinstance(obj, keras.layers.Layer) or _is_tf_keras(obj)


def parameters(model: Any) -> dict[str, np.ndarray]:
    # every parameter (and every buffer that changes the function) by its native name (the module
    # docstring's "Names"), float32 NumPy copies, in definition order
    return {name: np.array(_numpy(v), np.float32) for name, v in _variables(model).items()}


def assign(model: Any, values: dict[str, np.ndarray]) -> None:
    # write native-named arrays into the model; unknown names and misshapen arrays are one-line WeightsErrors
    variables = _variables(model)
    check_assignment({n: v.shape for n, v in variables.items()}, values,  # every check before a write
                     f"keras model {model.name!r}", "variable")
    for name, array in values.items():
        variables[name].assign(np.asarray(array, dtype=variables[name].dtype))


def layers(model: Any) -> list[Layer]:
    # the model's layers in definition order, each a shared.core.layer.Layer(path, kind, params,
    # settings): kind one of "linear", "conv", "layer_norm", "attention", "gelu", "dropout",
    # "embedding", "other"; params the native parameter names it owns; settings what the module says
    # (eps, approximate, batch_first, num_heads, head_dim, use_bias, rate, ...), read from the object
    out = []
    for path, node in _named_nodes(model):
        kind, settings = _describe(node)
        # A layer of a known kind owns every variable under it (MultiHeadAttention's query, key,
        # value and attention_output); a container owns only the variables it created itself.
        held = getattr(node, "weights", []) if kind != "other" else _own_weights(node)
        params = tuple(_path(v) for v in held if _is_float(v))
        out.append(Layer(path, kind, params, settings))
    return out


def run(model: Any, images: np.ndarray, layout: str, output: str | None) -> np.ndarray:
    # canonical NHWC float32 images -> the model's own layout ("NHWC", "NCHW", "NHW") -> eval-mode,
    # no-grad forward -> the logits array (batch, classes); output picks the element of a tuple,
    # list or dict (an index or key); None means "the one array of shape (batch, classes)", else a
    # tower's final tokens (batch, tokens, dim) when it returns only those (forward_io.pick_logits)
    return _logits(lambda *x: model(*x, training=False), images, layout, output)


def compiled(model: Any, layout: str, output: str | None) -> Callable[[np.ndarray], np.ndarray]:
    # the same under the framework's compiler
    if BACKEND == "tensorflow" or _is_tf_keras(model):
        import tensorflow as tf

        # XLA off on CPU, as the port's default mode and Keras' jit_compile="auto" (one mode only:
        # a user's model is not measured in several)
        forward = tf.function(lambda *x: model(*x, training=False), jit_compile=False)
    elif BACKEND == "jax":
        import jax

        jitted = jax.jit(lambda tv, ntv, *x: model.stateless_call(tv, ntv, *x, training=False)[0])
        forward = lambda *x: jitted([v.value for v in model.trainable_variables],  # noqa: E731
                                    [v.value for v in model.non_trainable_variables], *x)
    else:
        import torch

        forward = torch.compile(lambda *x: model(*x, training=False))
    return lambda images: _logits(forward, images, layout, output)


def capture(model: Any, images: np.ndarray, layout: str, paths: list[str]) -> dict[str, np.ndarray]:
    # outputs of the layers at `paths`, eval mode, as NumPy arrays in the canonical token layout
    # (B, N, D)
    nodes = dict(_named_nodes(model))
    for path in paths:
        if path not in nodes:
            raise InputError(f"keras model {model.name!r} has no layer {path!r} (its layers: "
                             f"{', '.join(list(nodes)[:8])}{', ...' if len(nodes) > 8 else ''})")
    inputs = [ops.convert_to_tensor(a) for a in model_inputs(images, layout)]
    targets = [nodes[p] for p in paths]
    outputs = _functional_outputs(model, targets)
    with _no_grad():
        if outputs is not None:  # a functional model: a sub-model returning those outputs
            values = keras.Model(model.inputs, outputs)(inputs if len(inputs) > 1 else inputs[0],
                                                        training=False)
            found = dict(zip(paths, values if len(paths) > 1 else [values], strict=True))
        else:  # anything else: wrap each layer's call for one forward pass
            found = _wrapped_call(model, inputs, dict(zip(paths, targets, strict=True)))
    return {p: token_layout(found[p]) for p in paths}


def inference_mode(model: Any) -> str | None:
    # what running in inference mode took beyond the framework's own switch (a mode keyword
    # passed to the forward), in words for the run's notes; None when the framework's own switch
    # (torch's and MLX's eval(), Keras' training=False) did it all
    return None


def conventions(model: Any) -> tuple[str, str]:
    # (the image layout its forward takes by its library's convention, the family of parameter
    # layouts it keeps: a key of shared/your_model/structure_parts.py's FRAMEWORK_LAYOUTS)
    return ("NHWC", "keras")


# ---- the walk ---------------------------------------------------------------------------------
def _variables(model: Any) -> dict[str, Any]:
    """path -> variable, float variables only (a Dropout's seed state is not part of the function)."""
    out: dict[str, Any] = {}
    for v in model.weights:
        if not _is_float(v):
            continue
        path = _path(v)
        if path in out and out[path] is not v:
            raise WeightsError(f"keras model {model.name!r} has two variables named {path!r}; "
                               "give its layers distinct names")
        out[path] = v
    if not out and not model.built:
        raise WeightsError(f"keras model {model.name!r} is not built (no variables yet): build it in "
                           "the factory (model.build(input_shape) or one call on a batch)")
    return out


def _is_float(variable: Any) -> bool:
    return "float" in str(variable.dtype)


def _tf_keras_layers() -> Any:
    """tf_keras.layers when the user's code imported tf_keras, else None."""
    module = sys.modules.get("tf_keras")
    return getattr(module, "layers", None) if module is not None else None


def _is_tf_keras(obj: Any) -> bool:
    layers = _tf_keras_layers()
    return layers is not None and isinstance(obj, layers.Layer)


def _classes(node: Any) -> Any:
    """The layer classes `node` is an instance of: Keras 3's, or tf_keras' for a Keras 2 object."""
    return _tf_keras_layers() if _is_tf_keras(node) else kl


def _path(variable: Any) -> str:
    """A Keras 3 variable's path; a tf_keras (tf.Variable) one's name without its ':0'."""
    path = getattr(variable, "path", None)
    return path if path is not None else variable.name.removesuffix(":0")


def _numpy(variable: Any) -> np.ndarray:
    return variable.numpy() if getattr(variable, "path", None) is None else ops.convert_to_numpy(variable)


def _is_functional(obj: Any) -> bool:
    return isinstance(obj, keras.Model) and hasattr(obj, "operations") and hasattr(obj, "_run_through_graph")


def _named_nodes(root: Any) -> list[tuple[str, Any]]:
    """(path, layer or functional op) for `root` and all under it, in definition order; each once."""
    prefix = "" if _is_functional(root) else (getattr(root, "path", None) or root.name)
    out: list[tuple[str, Any]] = [(prefix, root)]
    seen = {id(root)}

    def visit(node: Any, prefix: str) -> None:
        children = node.operations if _is_functional(node) else \
            node._flatten_layers(include_self=False, recursive=False)
        for child in children:
            if isinstance(child, _classes(child).InputLayer) or id(child) in seen:
                continue
            seen.add(id(child))
            path = getattr(child, "path", None) or (f"{prefix}/{child.name}" if prefix else child.name)
            out.append((path, child))
            if isinstance(child, _classes(child).Layer) and _describe(child)[0] == "other":
                if _is_tf_keras(child):  # an activation held as an attribute (intermediate_act_fn)
                    out.extend((f"{path}/{name}", fn) for name, fn in vars(child).items()
                               if _is_function(fn) and gelu_form(fn))
                visit(child, path)

    if _describe(root)[0] == "other":
        visit(root, prefix)
    return out


def _is_function(value: Any) -> bool:
    return callable(value) and not isinstance(value, type) and not hasattr(value, "weights") \
        and not hasattr(value, "__self__")  # a layer or a bound method is no activation


def _own_weights(layer: Any) -> list[Any]:
    """The variables a layer created itself (add_weight), not its sub-layers'."""
    inner = {id(v) for child in getattr(layer, "_flatten_layers", lambda **_: [])(include_self=False)
             for v in child.weights}
    return [v for v in getattr(layer, "weights", []) if id(v) not in inner]


def _describe(node: Any) -> tuple[str, dict[str, Any]]:
    """(kind, settings) read from the layer's attributes; GELU forms by probing."""
    kl = _classes(node)  # Keras 3's layer classes, or tf_keras' for a Keras 2 layer
    if isinstance(node, kl.MultiHeadAttention):
        return "attention", {"num_heads": node._num_heads, "head_dim": node._key_dim,
                             "value_dim": node._value_dim or node._key_dim, "use_bias": node._use_bias,
                             "rate": float(node._dropout), "batch_first": True}
    if isinstance(node, kl.LayerNormalization):
        return "layer_norm", {"eps": float(node.epsilon), "center": node.center, "scale": node.scale,
                              "rms_scaling": getattr(node, "rms_scaling", False)}
    if isinstance(node, (kl.Conv1D, kl.Conv2D, kl.Conv3D)):  # Conv3D: a patch over frames (Qwen's)
        return "conv", {"filters": node.filters, "kernel_size": tuple(node.kernel_size),
                        "strides": tuple(node.strides), "padding": node.padding, "use_bias": node.use_bias,
                        "data_format": node.data_format, "activation": _activation(node.activation)}
    if isinstance(node, (kl.Dense, kl.EinsumDense)):
        return "linear", {"units": getattr(node, "units", None), "use_bias": node.bias is not None,
                          "activation": _activation(node.activation)}
    if isinstance(node, kl.Dropout):
        return "dropout", {"rate": float(node.rate)}
    if isinstance(node, kl.Embedding):
        return "embedding", {"input_dim": node.input_dim, "output_dim": node.output_dim}
    # An Activation layer, or an op called on a KerasTensor (keras.ops.gelu(x, approximate=...)).
    form = gelu_form(node) if isinstance(node, kl.Activation) or not isinstance(node, kl.Layer) else None
    if form is not None:
        return "gelu", {"approximate": form == "gelu_tanh", "form": form}
    return "other", {}


def _activation(fn: Any) -> str | None:
    """None for the identity, the GELU form when it is one, else the activation's name."""
    if fn is None or fn is keras.activations.linear or getattr(fn, "__name__", "") == "linear":
        return None
    return gelu_form(fn) or getattr(fn, "__name__", type(fn).__name__)


# ---- running ------------------------------------------------------------------------------------
def _no_grad() -> contextlib.AbstractContextManager:
    """torch tracks gradients of Keras variables on its backend; the others never do eagerly."""
    return importlib.import_module("torch").no_grad() if BACKEND == "torch" else contextlib.nullcontext()


def _logits(forward: Callable[[Any], Any], images: np.ndarray, layout: str, output: str | None) -> np.ndarray:
    """`forward` on the images in the model's layout, without gradients -> the logits."""
    inputs = [ops.convert_to_tensor(a) for a in model_inputs(images, layout)]
    with _no_grad():
        result = forward(*inputs)
    return pick_logits(numpy_outputs(result, ops.convert_to_numpy), output, output_rows(images))


def _functional_outputs(model: Any, targets: list[Any]) -> list[Any] | None:
    """The symbolic outputs of `targets` when all are operations of a functional `model` called
    once each; None otherwise (the caller wraps their calls instead)."""
    if not _is_functional(model) or any(t not in model.operations for t in targets):
        return None
    try:
        return [t.output for t in targets]
    except (AttributeError, ValueError, RuntimeError):  # a layer called more than once
        return None


def _wrapped_call(model: Any, inputs: list[Any], targets: dict[str, Any]) -> dict[str, Any]:
    """Run `model` once with each target layer's `call` replaced by one that records its output."""
    found: dict[str, Any] = {}
    try:
        for path, layer in targets.items():
            def record(*args: Any, _path: str = path, _call: Any = layer.call, **kwargs: Any) -> Any:
                result = _call(*args, **kwargs)
                found.setdefault(_path, result)  # the first call, when a layer is called twice
                return result
            object.__setattr__(layer, "call", record)
        model(*inputs, training=False)
    finally:
        for layer in targets.values():
            with contextlib.suppress(AttributeError):
                object.__delattr__(layer, "call")
    return found
