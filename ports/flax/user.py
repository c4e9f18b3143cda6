"""A user's own Flax (`flax.nnx`) model where portbench's port stands: read and write its
parameters, run it on canonical inputs, capture its intermediates and read its settings. Runs in the
worker process only (the user's file is imported there, never in the parent). A linen model (a
`(module, variables)` pair, a Transformers Flax object, an `nnx.bridge.ToNNX`) is read by
ports/flax/linen.py, its names linen's "/"-joined paths.

Names are nnx paths joined by "." ("layers.0.self_attention.query.kernel"), as `nnx.state` spells
them, but listed in definition order (nnx.state sorts them). Eval mode is `nnx.view(model,
deterministic=True)`: a view sharing the model's arrays, so the user's model keeps its own mode; a
`__call__` that takes its mode as a keyword (`train`, `deterministic`) is passed its inference value
(`linen.INFERENCE`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from ports.flax import equinox_modules, linen, linen_layers
from shared.core.forward_io import (
    check_assignment,
    forward_logits,
    model_inputs,
    token_layout,
)
from shared.core.layer import Layer
from shared.core.probes import gelu_form
from shared.errors import InputError


def owns(obj: Any) -> bool:
    # True when obj is a model of this framework
    return isinstance(obj, nnx.Module) or linen.unwrap(obj) is not None or equinox_modules.owns(obj)


def parameters(model: Any) -> dict[str, np.ndarray]:
    # every parameter (and every buffer that changes the function) by its native name (the module
    # docstring's "Names"), float32 NumPy copies, in definition order
    if (held := linen.unwrap(model)) is not None:
        return linen.parameters(held)
    if equinox_modules.owns(model):
        return equinox_modules.parameters(model)
    return {name: np.array(v[...], dtype=np.float32) for name, v in _variables(model).items()}


def assign(model: Any, values: dict[str, np.ndarray]) -> None:
    # write native-named arrays into the model; unknown names and misshapen arrays are one-line WeightsErrors
    if (held := linen.unwrap(model)) is not None:
        linen.assign(held, values)
        return
    if equinox_modules.owns(model):
        equinox_modules.assign(model, values)
        return
    variables = _variables(model)
    check_assignment({n: v.shape for n, v in variables.items()}, values,  # every check before a write
                     f"nnx model {type(model).__name__}", "variable")
    for name, array in values.items():
        variables[name].set_value(jnp.asarray(array, dtype=variables[name].dtype))


def layers(model: Any) -> list[Layer]:
    # the model's layers in definition order, each a shared.core.layer.Layer(path, kind, params,
    # settings): kind one of "linear", "conv", "layer_norm", "attention", "gelu", "dropout",
    # "embedding", "other"; params the native parameter names it owns; settings what the module says
    # (eps, approximate, batch_first, num_heads, head_dim, use_bias, rate, ...), read from the object
    if (held := linen.unwrap(model)) is not None:
        return linen_layers.layers(held)
    if equinox_modules.owns(model):
        return equinox_modules.layers(model)
    out = []
    for path, node in _named_nodes(model):
        kind, settings = _describe(node)
        # A module of a known kind owns every variable under it (MultiHeadAttention's query, key,
        # value and out); a container owns only the variables it holds itself.
        if not isinstance(node, nnx.Module):  # an activation function holds nothing
            held: dict[str, Any] = {}
        else:
            held = _variables(node, path) if kind != "other" else _own_variables(node, path)
        out.append(Layer(path, kind, tuple(held), settings))
    return out


def run(model: Any, images: np.ndarray, layout: str, output: str | None) -> np.ndarray:
    # canonical NHWC float32 images -> the model's own layout ("NHWC", "NCHW", "NHW") -> eval-mode,
    # no-grad forward -> the logits array (batch, classes); output picks the element of a tuple,
    # list or dict (an index or key); None means "the one array of shape (batch, classes)", else a
    # tower's final tokens (batch, tokens, dim) when it returns only those (forward_io.pick_logits)
    if (held := linen.unwrap(model)) is not None:
        return linen.run(held, images, layout, output)
    if equinox_modules.owns(model):
        return equinox_modules.run(model, images, layout, output)
    return forward_logits(_eval_forward(model), images, layout, output, jnp.asarray, np.asarray)


def compiled(model: Any, layout: str, output: str | None) -> Callable[[np.ndarray], np.ndarray]:
    # the same under the framework's compiler
    if (held := linen.unwrap(model)) is not None:
        return linen.compiled(held, layout, output)
    if equinox_modules.owns(model):
        return equinox_modules.compiled(model, layout, output)
    graphdef, state = nnx.split(_eval_view(model))
    flags = linen.inference_flags(model)
    # jax.jit on the split (graph, state) pair, as the port: nnx.jit would redo the split and merge
    # in Python on every call, which a timing would count against the user's model.
    forward = jax.jit(lambda state, *x: nnx.merge(graphdef, state)(*x, **flags))
    return lambda images: forward_logits(lambda *x: forward(state, *x), images, layout, output,
                                         jnp.asarray, np.asarray)


def capture(model: Any, images: np.ndarray, layout: str, paths: list[str]) -> dict[str, np.ndarray]:
    # outputs of the layers at `paths`, eval mode, as NumPy arrays in the canonical token layout
    # (B, N, D)
    if (held := linen.unwrap(model)) is not None:
        return linen.capture(held, images, layout, paths)
    if equinox_modules.owns(model):
        return equinox_modules.capture(model, images, layout, paths)
    nodes = dict(_named_nodes(model))
    for path in paths:
        if not isinstance(nodes.get(path), nnx.Module):
            raise InputError(f"nnx model {type(model).__name__} has no module {path!r} (its modules: "
                             f"{', '.join(list(nodes)[:8])}{', ...' if len(nodes) > 8 else ''})")
    # nnx.capture's method_outputs records every module's __call__ output, keyed by its path.
    inputs = [jnp.asarray(a) for a in model_inputs(images, layout)]
    _, recorded = nnx.capture(_eval_view(model), nnx.Intermediate,
                              method_outputs=nnx.Intermediate)(*inputs, **linen.inference_flags(model))
    found = {".".join(str(k) for k in key[:-1]): value.get_value()
             for key, value in nnx.to_flat_state(recorded) if key[-1] == "__call__"}
    missing = [p for p in paths if p not in found]
    if missing:
        raise InputError(f"nnx module {missing[0]!r} was not called by the model's forward")
    return {p: token_layout(found[p][0]) for p in paths}  # its first call, when called twice


def inference_mode(model: Any) -> str | None:
    # what running in inference mode took beyond the framework's own switch (a mode keyword
    # passed to the forward), in words for the run's notes; None when the framework's own switch
    # (torch's and MLX's eval(), Keras' training=False) did it all
    if equinox_modules.owns(model):
        return None
    held = linen.unwrap(model)
    flags = linen.inference_flags(held.module if held is not None else model)
    return "its forward was passed " + ", ".join(f"{k}={v}" for k, v in flags.items()) if flags else None


def conventions(model: Any) -> tuple[str, str]:
    # (the image layout its forward takes by its library's convention, the family of parameter
    # layouts it keeps: a key of shared/your_model/structure_parts.py's FRAMEWORK_LAYOUTS)
    return ("NCHW", "equinox") if equinox_modules.owns(model) else ("NHWC", "flax")


# ---- the walk ---------------------------------------------------------------------------------
def _variables(model: Any, prefix: str = "") -> dict[str, Any]:
    """path -> variable under `model`, float variables only (RNG keys and counts are not part of
    the function)."""
    return {path: v for path, v in _walk(model, prefix) if isinstance(v, nnx.Variable) and _is_float(v)}


def _is_float(variable: Any) -> bool:
    return not isinstance(variable, nnx.RngState) and jnp.issubdtype(variable.dtype, jnp.floating)


def _children(node: Any) -> list[tuple[str, Any]]:
    """A module's attributes (or an nnx.List's items) in the order they were set."""
    if isinstance(node, (list, tuple)):
        return [(str(i), v) for i, v in enumerate(node)]
    if isinstance(node, dict):
        return [(str(k), v) for k, v in node.items()]
    return [(k, v) for k, v in vars(node).items() if not k.startswith("_")]


def _walk(node: Any, prefix: str, seen: set[int] | None = None) -> list[tuple[str, Any]]:
    """(path, value) for every variable, module and callable under `node`, depth first; a module
    or variable reached twice (shared, tied) under its first path only."""
    out: list[tuple[str, Any]] = []
    seen = {id(node)} if seen is None else seen
    for key, value in _children(node):
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(value, nnx.Rngs):
            continue
        if isinstance(value, (nnx.Module, nnx.Variable)):
            if id(value) in seen:
                continue
            seen.add(id(value))
        out.append((path, value))
        if isinstance(value, (nnx.Module, list, tuple, dict)):
            out.extend(_walk(value, path, seen))
    return out


def _named_nodes(root: Any) -> list[tuple[str, Any]]:
    """(path, module or activation function) for `root` (path "") and everything under it, in
    definition order; each once. The modules inside a known kind (MultiHeadAttention's query, ...)
    are part of it, not listed."""
    out: list[tuple[str, Any]] = [("", root)]
    if _describe(root)[0] != "other":
        return out
    inside: list[str] = []
    for path, value in _walk(root, ""):
        if any(path.startswith(p + ".") for p in inside):
            continue
        if isinstance(value, nnx.Module):
            out.append((path, value))
            if _describe(value)[0] != "other":
                inside.append(path)
        elif callable(value) and not isinstance(value, (type, nnx.Variable)) and gelu_form(value):
            out.append((path, value))  # an activation held as an attribute (self.act = nnx.gelu)
    return out


def _own_variables(node: Any, prefix: str) -> dict[str, Any]:
    """The variables a module holds as its own attributes, not its sub-modules'."""
    return {f"{prefix}.{k}" if prefix else k: v for k, v in _children(node)
            if isinstance(v, nnx.Variable) and _is_float(v)}


def _describe(node: Any) -> tuple[str, dict[str, Any]]:
    """(kind, settings) read from the module's attributes; GELU forms by probing."""
    if isinstance(node, nnx.MultiHeadAttention):
        return "attention", {"num_heads": node.num_heads, "head_dim": node.head_dim,
                             "qkv_features": node.qkv_features, "in_features": node.in_features,
                             "out_features": node.out_features, "use_bias": node.use_bias,
                             "rate": float(node.dropout_rate), "broadcast_dropout": node.broadcast_dropout,
                             "batch_first": True}
    if isinstance(node, nnx.LayerNorm):
        return "layer_norm", {"eps": float(node.epsilon), "use_fast_variance": node.use_fast_variance,
                              "use_bias": node.use_bias, "use_scale": node.use_scale}
    if isinstance(node, nnx.Conv):  # a 3-D kernel: a patch over frames (Qwen's)
        return "conv", {"in_features": node.in_features, "out_features": node.out_features,
                        "kernel_size": tuple(node.kernel_size), "strides": node.strides,
                        "padding": node.padding, "use_bias": node.use_bias}
    if isinstance(node, (nnx.Linear, nnx.LinearGeneral, nnx.Einsum)):
        return "linear", {"in_features": getattr(node, "in_features", None),
                          "out_features": getattr(node, "out_features", None),
                          "use_bias": getattr(node, "bias", None) is not None}
    if isinstance(node, nnx.Dropout):
        return "dropout", {"rate": float(node.rate), "deterministic": node.deterministic}
    if isinstance(node, nnx.Embed):
        return "embedding", {"num_embeddings": node.num_embeddings, "features": node.features}
    form = None if isinstance(node, nnx.Module) else gelu_form(node)
    if form is not None:
        return "gelu", {"approximate": form == "gelu_tanh", "form": form}
    return "other", {}


# ---- running ------------------------------------------------------------------------------------
def _eval_view(model: Any) -> Any:
    """The model with dropout off and batch statistics frozen, sharing its arrays."""
    return nnx.view(model, deterministic=True, use_running_average=True, raise_if_not_found=False)


def _eval_forward(model: Any) -> Callable[[Any], Any]:
    """The eval view's forward, with the mode keywords its `__call__` takes at inference values."""
    view, flags = _eval_view(model), linen.inference_flags(model)
    return (lambda *x: view(*x, **flags)) if flags else view
