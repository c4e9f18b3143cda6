"""A user's own MLX (`mlx.nn`) model where portbench's port stands: read and write its parameters,
run it on canonical inputs, capture its intermediates and read its settings. Runs in the worker
process only (the user's file is imported there, never in the parent).

Names are mlx paths joined by "." ("layers.0.attention.query_proj.weight"), as
`tree_flatten(model.parameters())` spells them, in definition order. MLX has one memory for CPU
and GPU, so there is no device to check.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import mlx.core as mx
import numpy as np
from mlx import nn
from mlx.utils import tree_flatten, tree_unflatten

from shared.core.forward_io import (
    check_assignment,
    model_inputs,
    numpy_outputs,
    output_rows,
    pick_logits,
    token_layout,
)
from shared.core.layer import Layer
from shared.errors import InputError

# nn.GELU(approx=...) -> the form it computes; 'fast' (x * sigmoid(1.702 x)) is neither GELU form.
GELU_FORMS = {"none": "gelu", "precise": "gelu_tanh", "tanh": "gelu_tanh", "fast": "gelu_fast"}


def owns(obj: Any) -> bool:
    # True when obj is a model of this framework
    return isinstance(obj, nn.Module)


def parameters(model: Any) -> dict[str, np.ndarray]:
    # every parameter (and every buffer that changes the function) by its native name (the module
    # docstring's "Names"), float32 NumPy copies, in definition order
    return {name: np.array(value.astype(mx.float32)) for name, value in _arrays(model).items()}


def assign(model: Any, values: dict[str, np.ndarray]) -> None:
    # write native-named arrays into the model; unknown names and misshapen arrays are one-line WeightsErrors
    current = _arrays(model)
    check_assignment({n: tuple(v.shape) for n, v in current.items()}, values,  # every check before a write
                     f"mlx model {type(model).__name__}", "parameter")
    model.update(tree_unflatten([(name, mx.array(np.asarray(array, np.float32)).astype(current[name].dtype))
                                 for name, array in values.items()]), strict=False)


def layers(model: Any) -> list[Layer]:
    # the model's layers in definition order, each a shared.core.layer.Layer(path, kind, params,
    # settings): kind one of "linear", "conv", "layer_norm", "attention", "gelu", "dropout",
    # "embedding", "other"; params the native parameter names it owns; settings what the module says
    # (eps, approximate, batch_first, num_heads, head_dim, use_bias, rate, ...), read from the object
    out = []
    for path, module in _named_modules(model):
        kind, settings = _describe(module)
        # A module of a known kind owns every array under it (MultiHeadAttention's query_proj, ...);
        # a container owns only the arrays it holds itself.
        held = _arrays(module, path) if kind != "other" else _own_arrays(module, path)
        out.append(Layer(path, kind, tuple(held), settings))
    return out


def run(model: Any, images: np.ndarray, layout: str, output: str | None) -> np.ndarray:
    # canonical NHWC float32 images -> the model's own layout ("NHWC", "NCHW", "NHW") -> eval-mode,
    # no-grad forward -> the logits array (batch, classes); output picks the element of a tuple,
    # list or dict (an index or key); None means "the one array of shape (batch, classes)", else a
    # tower's final tokens (batch, tokens, dim) when it returns only those (forward_io.pick_logits)
    model.eval()
    return _logits(model, images, layout, output)


def compiled(model: Any, layout: str, output: str | None) -> Callable[[np.ndarray], np.ndarray]:
    # the same under the framework's compiler
    model.eval()
    # inputs=model.state, as the port: the parameters are inputs of the graph, not constants of
    # its first trace.
    forward = partial(mx.compile, inputs=model.state)(lambda *x: model(*x))
    return lambda images: _logits(forward, images, layout, output)


def capture(model: Any, images: np.ndarray, layout: str, paths: list[str]) -> dict[str, np.ndarray]:
    # outputs of the layers at `paths`, eval mode, as NumPy arrays in the canonical token layout
    # (B, N, D)
    modules = dict(_named_modules(model))
    missing = [p for p in paths if p not in modules]
    if missing:
        raise InputError(f"mlx model {type(model).__name__} has no module {missing[0]!r}")
    found: dict[str, Any] = {}
    # MLX has no hooks and calls a module through its class: each target runs as a subclass that
    # records its output, for one forward.
    classes = {p: type(modules[p]) for p in paths}
    try:
        for path, cls in classes.items():
            modules[path].__class__ = type(cls.__name__, (cls,), {"__call__": _recorder(cls, path, found)})
        model.eval()
        _logits(model, images, layout, None, check=False)
    finally:
        for path, cls in classes.items():
            modules[path].__class__ = cls
    return {p: token_layout(np.array(found[p]), len(images)) for p in paths if p in found}


def inference_mode(model: Any) -> str | None:
    # what running in inference mode took beyond the framework's own switch (a mode keyword
    # passed to the forward), in words for the run's notes; None when the framework's own switch
    # (torch's and MLX's eval(), Keras' training=False) did it all
    return None


def conventions(model: Any) -> tuple[str, str]:
    # (the image layout its forward takes by its library's convention, the family of parameter
    # layouts it keeps: a key of shared/your_model/structure_parts.py's FRAMEWORK_LAYOUTS)
    return ("NHWC", "mlx")


# ---- the walk ---------------------------------------------------------------------------------
def _named_modules(root: Any) -> list[tuple[str, Any]]:
    """(path, module) for `root` (path "") and every module under it, depth first in definition
    order (mlx's own named_modules lists them last first); a shared module under its first path.
    The modules inside a known kind (MultiHeadAttention's query_proj, ...) are part of it, not listed."""
    out: list[tuple[str, Any]] = [("", root)]
    seen = {id(root)}

    def visit(module: Any, prefix: str) -> None:
        for path, child in tree_flatten(module.children(), prefix=prefix, is_leaf=nn.Module.is_module):
            if isinstance(child, nn.Module) and id(child) not in seen:
                seen.add(id(child))
                out.append((path.lstrip("."), child))
                if _describe(child)[0] == "other":
                    visit(child, "." + path.lstrip("."))

    if _describe(root)[0] == "other":
        visit(root, "")
    return out


def _arrays(module: Any, prefix: str = "") -> dict[str, Any]:
    """path -> floating-point array under `module`, in definition order."""
    lead = f"{prefix}." if prefix else ""
    return {lead + name: value for name, value in tree_flatten(module.parameters())
            if mx.issubdtype(value.dtype, mx.floating)}


def _own_arrays(module: Any, prefix: str) -> dict[str, Any]:
    """The arrays a module holds as its own attributes, not its sub-modules'."""
    lead = f"{prefix}." if prefix else ""
    return {lead + k: v for k, v in module.items()
            if isinstance(v, mx.array) and mx.issubdtype(v.dtype, mx.floating)}


def _describe(module: Any) -> tuple[str, dict[str, Any]]:
    """(kind, settings) read from the module's attributes and parameter shapes."""
    if isinstance(module, nn.MultiHeadAttention):
        return "attention", {"num_heads": module.num_heads,
                             "head_dim": module.query_proj.weight.shape[0] // module.num_heads,
                             "use_bias": "bias" in module.query_proj, "batch_first": True}
    if isinstance(module, nn.LayerNorm):
        return "layer_norm", {"eps": float(module.eps), "affine": "weight" in module}
    if isinstance(module, (nn.Conv2d, nn.Conv3d)):  # Conv3d: a patch over frames (Qwen's)
        return "conv", {"kernel_size": tuple(module.weight.shape[1:-1]), "strides": tuple(module.stride),
                        "use_bias": "bias" in module}
    if isinstance(module, nn.Linear):
        out_features, in_features = module.weight.shape
        return "linear", {"in_features": in_features, "out_features": out_features,
                          "use_bias": "bias" in module}
    if isinstance(module, nn.GELU):
        form = GELU_FORMS.get(module._approx, module._approx)
        return "gelu", {"approximate": module._approx != "none", "form": form}
    if isinstance(module, nn.Dropout):
        return "dropout", {"rate": 1.0 - float(module._p_1)}
    if isinstance(module, nn.Embedding):
        return "embedding", {"num_embeddings": module.weight.shape[0]}
    if isinstance(module, nn.TransformerEncoderLayer):
        return "other", {"norm_first": module.norm_first}
    return "other", {}


# ---- running ------------------------------------------------------------------------------------
def _recorder(cls: type, path: str, found: dict[str, Any]) -> Callable[..., Any]:
    """A `__call__` that runs `cls`'s own and keeps its first output under `path`."""
    def record(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = cls.__call__(self, *args, **kwargs)
        found.setdefault(path, result[0] if isinstance(result, tuple) else result)
        return result
    return record


def _logits(forward: Callable[[Any], Any], images: np.ndarray, layout: str, output: str | None,
            check: bool = True) -> np.ndarray:
    """`forward` on the images in the model's layout (MLX records no gradients) -> the logits."""
    inputs = [mx.array(a) for a in model_inputs(images, layout)]
    result = numpy_outputs(forward(*inputs), _numpy)
    return pick_logits(result, output, output_rows(images)) if check else np.zeros(0)


def _numpy(array: mx.array) -> np.ndarray:
    """One of a forward's arrays as a float32 NumPy array."""
    return np.array(array.astype(mx.float32))
