"""A linen model's layers for ports/flax/user.py's `layers()` (the forms and their variables:
ports/flax/linen.py). Compact modules exist only inside a call, so the layers are the modules one
abstract forward calls, read through `nn.intercept_methods`, siblings in the order their parent
registered them (`setup`'s assignments, a compact module's calls). A GELU called as a function
(`nn.gelu(x)` in a compact MLP) is read from the traced program: `erf` for the exact form, the
cubic inside `tanh` for the approximation, attributed to the module whose code computed it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from ports.flax.linen import Linen, leaf_value
from shared.core.layer import Layer
from shared.errors import InputError


def layers(linen: Linen) -> list[Layer]:
    calls, gelus = _trace(linen)
    shapes = {tuple(name.split("/")): np.shape(leaf_value(leaf))
              for name, (_, _, leaf) in linen.slots().items()}
    out: list[Layer] = []
    inside: list[tuple[str, ...]] = []
    for path, module in calls.items():
        if any(path[:len(p)] == p for p in inside):
            continue  # part of a known kind (the attention's query, key, value and out)
        below = {p[len(path):]: s for p, s in shapes.items() if p[:len(path)] == path}
        kind, settings = _describe(module, below)
        if kind != "other":
            inside.append(path)
        # A module of a known kind owns every variable under it; any other, its own only.
        held = tuple("/".join(p) for p in shapes if p[:len(path)] == path
                     and (kind != "other" or len(p) == len(path) + 1))
        out.append(Layer("/".join(path), kind, held, settings))
        if path in gelus:
            out.append(Layer("/".join((*path, "gelu")), "gelu", (),
                             {"approximate": gelus[path] == "gelu_tanh", "form": gelus[path]}))
    return out


def _trace(linen: Linen) -> tuple[dict[tuple[str, ...], nn.Module], dict[tuple[str, ...], str]]:
    """The modules one forward calls (path -> the bound module, in call order) and the GELU form
    computed in each module's own code, from one abstract trace (no arithmetic is done)."""
    calls: dict[tuple[str, ...], nn.Module] = {}

    def record(call: Callable[..., Any], args: Any, kwargs: Any, context: Any) -> Any:
        if context.method_name == "__call__":
            calls.setdefault(tuple(context.module.path), context.module)
        return call(*args, **kwargs)

    variables = linen.variables()
    tried = []
    for shape in _input_shapes(linen):
        calls.clear()
        try:
            with nn.intercept_methods(record):
                program = jax.make_jaxpr(lambda v, x: linen.apply(v, x))(
                    variables, jax.ShapeDtypeStruct(shape, jnp.float32))
        except Exception:
            tried.append(str(shape))
            continue
        return _definition_order(calls), _gelu_forms(program.jaxpr, set(calls))
    raise InputError(f"{linen.what}: no input its forward accepts was found from its variables (tried "
                     f"{', '.join(tried) or 'none: no patch kernel'}); return a Transformers Flax object, "
                     "which says its input_shape, or an nnx model")


def _definition_order(calls: dict[tuple[str, ...], nn.Module]) -> dict[tuple[str, ...], nn.Module]:
    """The called modules depth first, siblings in the order their parent registered them: the
    order `setup` assigns them (Transformers' attention calls value before key), and a compact
    module's call order."""
    called = {path: i for i, path in enumerate(calls)}

    def key(path: tuple[str, ...]) -> list[int]:
        out = []
        for depth in range(len(path)):
            parent = calls.get(path[:depth])
            siblings = list(parent._state.children) if parent is not None else []
            name = path[depth]
            out.append(siblings.index(name) if name in siblings else len(siblings) + called.get(path, 0))
        return out

    return dict(sorted(calls.items(), key=lambda item: key(item[0])))


def _input_shapes(linen: Linen) -> list[tuple[int, ...]]:
    """The input the model was built for when it says; else (ViTs) the image whose patch grid
    fills the position table, with and without a class row, read from the variables' shapes."""
    if linen.input_shape is not None:
        return [(1, *linen.input_shape[1:])]
    shapes = [np.shape(leaf_value(leaf)) for _, _, leaf in linen.slots().values()]
    patch = next((s for s in shapes if len(s) == 4), None)  # the patch conv's HWIO kernel
    if patch is None:
        return []
    ph, pw, channels, width = patch
    rows = sorted({s[-2] for s in shapes if len(s) in (2, 3) and s[-1] == width and s[-2] > 1})
    out = []
    for n in rows:
        for grid in (n, n - 1):
            side = math.isqrt(grid)
            if side > 0 and side * side == grid and (1, side * ph, side * pw, channels) not in out:
                out.append((1, side * ph, side * pw, channels))
    return out


def _gelu_forms(jaxpr: Any, modules: set[tuple[str, ...]]) -> dict[tuple[str, ...], str]:
    """module path -> 'gelu' (an erf in its own code) or 'gelu_tanh' (a tanh of a cubic)."""
    found: dict[tuple[str, ...], str] = {}
    cubic: set[tuple[str, ...]] = set()

    def owner(stack: str) -> tuple[str, ...]:
        parts = tuple(stack.split("/")[1:])  # the first is the root module's class
        while parts and parts not in modules:
            parts = parts[:-1]
        return parts

    def visit(program: Any) -> None:
        for eqn in program.eqns:
            where = owner(str(eqn.source_info.name_stack))
            name = eqn.primitive.name
            if name == "erf":
                found.setdefault(where, "gelu")
            elif name == "integer_pow" and eqn.params.get("y") == 3:
                cubic.add(where)
            elif name == "tanh" and where in cubic:
                found.setdefault(where, "gelu_tanh")
            for param in eqn.params.values():
                inner = getattr(param, "jaxpr", None)
                if inner is not None:
                    visit(getattr(inner, "jaxpr", inner))

    visit(jaxpr)
    return found


def _describe(module: nn.Module, own: dict[tuple[str, ...], tuple[int, ...]]) -> tuple[str, dict]:
    """(kind, settings) read from the linen module's attributes (`own`: the shapes of the
    variables under it, by their path below it)."""
    if isinstance(module, nn.MultiHeadDotProductAttention):
        query = own.get(("query", "kernel"), ())  # (D, heads, head_dim)
        head_dim = query[-1] if len(query) == 3 else None
        return "attention", {"num_heads": module.num_heads, "head_dim": head_dim,
                             "qkv_features": module.qkv_features, "out_features": module.out_features,
                             "use_bias": module.use_bias, "rate": float(module.dropout_rate),
                             "broadcast_dropout": module.broadcast_dropout, "batch_first": True}
    if isinstance(module, nn.LayerNorm):
        return "layer_norm", {"eps": float(module.epsilon), "use_fast_variance": module.use_fast_variance,
                              "use_bias": module.use_bias, "use_scale": module.use_scale}
    if isinstance(module, nn.Conv):
        return "conv", {"features": module.features, "kernel_size": tuple(module.kernel_size),
                        "strides": module.strides, "padding": module.padding, "use_bias": module.use_bias}
    if isinstance(module, (nn.Dense, nn.DenseGeneral, nn.Einsum)):
        return "linear", {"features": getattr(module, "features", None), "use_bias": module.use_bias}
    if isinstance(module, nn.Dropout):
        return "dropout", {"rate": float(module.rate), "deterministic": module.deterministic}
    if isinstance(module, nn.Embed):
        return "embedding", {"num_embeddings": module.num_embeddings, "features": module.features}
    return "other", {}
