"""A user's equinox model where ports/flax/user.py reads an nnx one: the same functions' equinox
halves, in the worker process only. equinox is JAX's other module library: a model is an
immutable pytree (a frozen dataclass) whose layers take ONE example, the batch being a `jax.vmap`
the caller writes; its `Conv2d` takes channels-first (C, H, W) images.

- Names are the pytree paths joined by "." ("blocks.0.attn.query_proj.weight"), in definition
  order (the dataclass fields' order, which is the pytree's).
- Its layouts are torch's: a `Linear` keeps (out, in), a `Conv2d` OIHW with a bias of shape
  (out, 1, 1) (the parameter-layout family "equinox", shared/your_model/structure_parts.py).
- Weights cannot be written into an immutable module: the model is held in a `Held` box
  (`hold`, called where a model is bound), and new weights make a new module the box holds.
- The forward is `jax.vmap(eqx.nn.inference_mode(model))(x)`: equinox's own switch turns every
  `Dropout` off.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from shared.core.forward_io import (
    check_assignment,
    forward_logits,
    model_inputs,
    output_rows,
    token_layout,
)
from shared.core.layer import Layer
from shared.core.probes import activation_form
from shared.errors import InputError, WeightsError


@dataclasses.dataclass
class Held:
    """An equinox module in a box portbench can write into (the module docstring)."""

    model: Any


def _eqx() -> Any:
    return sys.modules.get("equinox")  # imported by the user's file when its model is one


def owns(obj: Any) -> bool:
    eqx = _eqx()
    return isinstance(obj, Held) or (eqx is not None and isinstance(obj, eqx.Module))


def hold(obj: Any) -> Any:
    """An equinox module in its `Held` box; anything else as it is."""
    eqx = _eqx()
    return Held(obj) if eqx is not None and isinstance(obj, eqx.Module) else obj


def _module(obj: Any) -> Any:
    return obj.model if isinstance(obj, Held) else obj


# ---- parameters -----------------------------------------------------------------------------------
def parameters(obj: Any) -> dict[str, np.ndarray]:
    return {name: np.array(leaf, dtype=np.float32) for name, leaf in _arrays(_module(obj)).items()}


def assign(obj: Any, values: dict[str, np.ndarray]) -> None:
    model = _module(obj)
    check_assignment({n: tuple(v.shape) for n, v in _arrays(model).items()}, values,
                     f"equinox model {type(model).__name__}", "parameter")
    if not isinstance(obj, Held):
        raise WeightsError(f"equinox model {type(model).__name__} is immutable and was not held in a box "
                           "to write into (a portbench bug: hold() it where it is bound)")

    def put(path: Any, leaf: Any) -> Any:
        name = _name(path)
        return jnp.asarray(values[name], dtype=leaf.dtype) if name in values else leaf

    obj.model = jax.tree_util.tree_map_with_path(put, model)


def _arrays(module: Any, prefix: str = "") -> dict[str, Any]:
    """path -> floating-point array under `module`, in definition order."""
    eqx = _eqx()
    lead = f"{prefix}." if prefix else ""
    return {lead + _name(path): leaf for path, leaf in jax.tree_util.tree_leaves_with_path(module)
            if eqx.is_inexact_array(leaf)}


def _name(path: Any) -> str:
    """A pytree path as a dotted name: attribute names and sequence indices."""
    parts = []
    for key in path:
        for attribute in ("name", "idx", "key"):
            if hasattr(key, attribute):
                parts.append(str(getattr(key, attribute)))
                break
    return ".".join(parts)


# ---- layers ---------------------------------------------------------------------------------------
def layers(obj: Any) -> list[Layer]:
    out = []
    for path, module in _named_modules(_module(obj)):
        kind, settings = _describe(module)
        # A module of a known kind owns every array under it (MultiheadAttention's query_proj, ...);
        # a container owns only the arrays it holds itself.
        held = _arrays(module, path) if kind != "other" else _own_arrays(module, path)
        out.append(Layer(path, kind, tuple(held), settings))
    return out


def _children(module: Any) -> list[tuple[str, Any]]:
    """A module's fields, lists and tuples opened (an `eqx.nn.Sequential`'s layers), in order."""
    out: list[tuple[str, Any]] = []

    def visit(value: Any, path: str) -> None:
        if isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                visit(item, f"{path}.{i}")
        elif isinstance(value, dict):
            for key, item in value.items():
                visit(item, f"{path}.{key}")
        else:
            out.append((path, value))

    for field in dataclasses.fields(module):
        visit(getattr(module, field.name, None), field.name)
    return out


def _named_modules(root: Any) -> list[tuple[str, Any]]:
    """(path, module) for `root` (path "") and every module under it, depth first in definition
    order; the modules inside a known kind are part of it, not listed. A plain function held in a
    field (an activation) is listed too, as a layer of its own."""
    eqx = _eqx()
    out: list[tuple[str, Any]] = [("", root)]

    def visit(module: Any, prefix: str) -> None:
        for path, child in _children(module):
            where = f"{prefix}.{path}" if prefix else path
            if isinstance(child, eqx.Module):
                out.append((where, child))
                if _describe(child)[0] == "other":
                    visit(child, where)
            elif callable(child) and not isinstance(child, type) and _activation(child) is not None:
                out.append((where, child))

    if _describe(root)[0] == "other":
        visit(root, "")
    return out


def _own_arrays(module: Any, prefix: str) -> dict[str, Any]:
    """The arrays a module holds as its own fields, not its sub-modules'."""
    eqx = _eqx()
    lead = f"{prefix}." if prefix else ""
    return {lead + path: value for path, value in _children(module) if eqx.is_inexact_array(value)}


def _activation(fn: Any) -> str | None:
    """The form a function field computes, by probing, when it is one of JAX's own (jax.nn.gelu, a
    partial of one): a user's own callable is never called, since it could do anything."""
    inner = getattr(fn, "func", fn)  # functools.partial(jax.nn.gelu, approximate=False)
    if not str(getattr(inner, "__module__", "")).startswith("jax"):
        return None
    return activation_form(lambda x: np.asarray(fn(jnp.asarray(x))))


def _describe(module: Any) -> tuple[str, dict[str, Any]]:
    """(kind, settings) read from the module's fields and parameter shapes."""
    eqx = _eqx()
    nn = eqx.nn
    if isinstance(module, nn.MultiheadAttention):
        return "attention", {"num_heads": module.num_heads, "head_dim": module.qk_size,
                             "use_bias": module.use_query_bias, "rate": float(module.dropout.p),
                             "batch_first": True}
    if isinstance(module, nn.LayerNorm):
        return "layer_norm", {"eps": float(module.eps), "use_bias": module.use_bias,
                              "use_scale": module.use_weight}
    if isinstance(module, nn.Conv):
        return "conv", {"kernel_size": tuple(module.kernel_size), "strides": tuple(module.stride),
                        "use_bias": module.use_bias}
    if isinstance(module, nn.Linear):
        return "linear", {"in_features": module.in_features, "out_features": module.out_features,
                          "use_bias": module.use_bias}
    if isinstance(module, nn.Dropout):
        return "dropout", {"rate": float(module.p)}
    if isinstance(module, nn.Embedding):
        return "embedding", {"num_embeddings": module.num_embeddings}
    if isinstance(module, nn.Lambda) or not isinstance(module, eqx.Module):
        form = _activation(module.fn if isinstance(module, nn.Lambda) else module)
        if form is not None:
            return "gelu", {"approximate": form == "gelu_tanh", "form": form}
    return "other", {}


# ---- the forward ----------------------------------------------------------------------------------
def _forward(model: Any) -> Callable[[Any], Any]:
    """The batched forward: equinox's inference mode, one example at a time under `jax.vmap`."""
    return jax.vmap(_eqx().nn.inference_mode(model))


def run(obj: Any, images: np.ndarray, layout: str, output: str | None) -> np.ndarray:
    # under eqx.filter_jit as `compiled`: equinox runs eagerly only op by op, each op compiled on
    # its first call (a hundred compilations for a two-block ViT), which its own docs advise against
    return compiled(obj, layout, output)(images)


def compiled(obj: Any, layout: str, output: str | None) -> Callable[[np.ndarray], np.ndarray]:
    # eqx.filter_jit with the model an argument (its arrays traced, not baked in as constants)
    forward = _eqx().filter_jit(lambda model, *x: _forward(model)(*x))
    model = _module(obj)
    return lambda images: forward_logits(_per_image(lambda *x: forward(model, *x), images), images, layout,
                                         output, jnp.asarray, np.asarray)


def _per_image(forward: Callable[..., Any], images: np.ndarray) -> Callable[..., Any]:
    """`forward` with a row per image: the model takes one sequence, so a packed sequence's rows, one
    per image it holds, come out of jax.vmap as (sequences, images, ...), flattened here."""
    sequences, rows = len(images), output_rows(images)
    if rows == sequences:
        return forward
    shape = (sequences, rows // sequences)
    return lambda *x: jax.tree.map(
        lambda a: a.reshape(-1, *a.shape[2:]) if np.ndim(a) >= 2 and a.shape[:2] == shape else a, forward(*x))


def capture(obj: Any, images: np.ndarray, layout: str, paths: list[str]) -> dict[str, np.ndarray]:
    """The layers at `paths` replaced by recorders (`eqx.tree_at`), the model run one example at a
    time without `vmap` (a recorder keeps concrete arrays, never tracers): each layer's first
    output per example, stacked."""
    eqx = _eqx()
    model = eqx.nn.inference_mode(_module(obj))
    modules = dict(_named_modules(model))
    missing = [p for p in paths if p not in modules or not isinstance(modules[p], eqx.Module)]
    if missing:
        raise InputError(f"equinox model {type(model).__name__} has no module {missing[0]!r}")
    now: dict[str, Any] = {}

    def recorder(path: str, inner: Any) -> Callable[..., Any]:
        def record(*args: Any, **kwargs: Any) -> Any:
            result = inner(*args, **kwargs)
            now.setdefault(path, result[0] if isinstance(result, tuple) else result)
            return result
        return record

    for path in paths:
        model = eqx.tree_at(lambda m, p=path: _at(m, p), model,
                            replace_fn=lambda inner, p=path: recorder(p, inner))
    found: dict[str, list[Any]] = {p: [] for p in paths}
    inputs = model_inputs(images, layout)  # images, or a patch batch's three arrays
    for i in range(len(images)):
        now.clear()
        model(*(jnp.asarray(a[i]) for a in inputs))
        for path, value in now.items():
            found[path].append(np.asarray(value))
    return {p: token_layout(np.stack(v), len(images), channels_first=True) for p, v in found.items() if v}


def _at(model: Any, path: str) -> Any:
    """The sub-module at a dotted path (attribute names and sequence indices)."""
    node = model
    for part in path.split("."):
        node = node[int(part)] if isinstance(node, (list, tuple)) else getattr(node, part)
    return node
