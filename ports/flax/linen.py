"""A user's Flax linen model where ports/flax/user.py reads an nnx one: the same functions'
linen halves, in the worker process only. Three forms hold a linen module and its variables:

- a `(module, variables)` pair, as `module.init` returns the variables (a plain dict: a frozen
  one is read, and refused when weights are to be written into it);
- a Transformers Flax model object (`FlaxViTForImageClassification`: `.module`, `.params` and
  the `.input_shape` it was built for);
- an `nnx.bridge.ToNNX` around a linen module, after `bridge.lazy_init` (its variables are nnx
  Variables named by the same linen paths).

Names are linen's own paths joined by "/" ("Transformer/encoderblock_0/LayerNorm_0/scale"), the
form big_vision, vit_jax and `flax.traverse_util.flatten_dict(..., sep="/")` spell; a variable of
another collection than "params" (batch_stats) is prefixed by its collection. Order: the
variables dict's (creation order; a ToNNX's is alphabetical). The forward is
`module.apply(variables, x)` with the module's own defaults (linen modules take their
`deterministic` / `train` flags as call arguments whose defaults are inference in big_vision,
vit_jax and Transformers). The layers are the modules a traced forward calls, in call order
(compact modules exist only inside a call), read through `nn.intercept_methods`; a GELU called
as a function (`nn.gelu(x)` in a compact MLP) is read from the traced program: `erf` for the exact
form, the cubic inside `tanh` for the approximation, attributed to the module that computed it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from flax.core import FrozenDict
from flax.nnx import bridge, variablelib

from shared.core.forward_io import check_assignment, native_layout, pick_logits, token_layout
from shared.core.structure import Layer
from shared.errors import InputError, WeightsError


@dataclass
class Linen:
    """One of the three forms, seen the same way."""

    module: nn.Module
    tree: Mapping[str, Any]  # collection -> nested mapping of arrays (or of nnx Variables: ToNNX)
    what: str  # how error messages name the model
    input_shape: tuple[int, ...] | None  # what it was built for, when the object says

    def slots(self) -> dict[str, tuple[Any, str, Any]]:
        """name -> (the mapping holding it, its key there, the leaf), float leaves only."""
        out: dict[str, tuple[Any, str, Any]] = {}

        def visit(node: Mapping[str, Any], path: list[str]) -> None:
            for key, value in node.items():
                if isinstance(value, Mapping):
                    visit(value, [*path, str(key)])
                elif jnp.issubdtype(jnp.asarray(_value(value)).dtype, jnp.floating):
                    out["/".join([*path, str(key)])] = (node, key, value)

        for collection, variables in self.tree.items():
            if isinstance(variables, Mapping):
                visit(variables, [] if collection == "params" else [str(collection)])
        return out

    def variables(self) -> dict[str, Any]:
        """The variables as `module.apply` takes them (arrays, whatever holds them)."""
        return jax.tree.map(_value, _plain(self.tree), is_leaf=lambda v: isinstance(v, nnx.Variable))


def unwrap(obj: Any) -> Linen | None:
    """The linen module and variables `obj` holds, or None when it is none of the three forms."""
    if isinstance(obj, tuple) and len(obj) == 2 and isinstance(obj[0], nn.Module) \
            and isinstance(obj[1], Mapping):
        module, variables = obj
        return Linen(module, variables, f"linen module {type(module).__name__}", None)
    if isinstance(obj, bridge.ToNNX):
        inner = obj.to_nnx__module
        return Linen(inner, _bridge_tree(obj), f"nnx.bridge.ToNNX({type(inner).__name__})", None)
    module = getattr(type(obj), "module", None) and getattr(obj, "module", None)
    if isinstance(module, nn.Module) and not isinstance(obj, (nn.Module, nnx.Module)):
        try:
            params = obj.params
        except (AttributeError, ValueError):  # Transformers' _do_init=False: no params held
            return None
        shape = getattr(obj, "input_shape", None)
        return Linen(module, {"params": params}, f"{type(obj).__name__}",
                     tuple(shape) if shape is not None else None) if isinstance(params, Mapping) else None
    return None


def _bridge_tree(obj: Any) -> dict[str, Any]:
    """A ToNNX's variables as linen collections of its nnx Variables (written in place)."""
    tree: dict[str, Any] = {}

    def visit(node: Any, path: list[str]) -> None:
        for key, value in (node.items() if isinstance(node, Mapping) else vars(node).items()):
            if isinstance(value, nnx.Variable):
                if isinstance(value, nnx.RngState):
                    continue
                where = tree.setdefault(variablelib.variable_name_from_type(type(value)), {})
                for part in path:
                    where = where.setdefault(part, {})
                where[str(key)] = value
            elif isinstance(value, Mapping):
                visit(value, [*path, str(key)])

    visit({k: v for k, v in vars(obj).items() if not k.startswith(("_", "to_nnx__"))}, [])
    return tree


def _value(leaf: Any) -> Any:
    return leaf.get_value() if isinstance(leaf, nnx.Variable) else leaf


def _plain(tree: Any) -> Any:
    """Nested mappings (frozen or not) as dicts, leaves as they are."""
    return {k: _plain(v) for k, v in tree.items()} if isinstance(tree, Mapping) else tree


# ---- parameters -----------------------------------------------------------------------------------
def parameters(linen: Linen) -> dict[str, np.ndarray]:
    return {name: np.array(_value(leaf), dtype=np.float32) for name, (_, _, leaf) in linen.slots().items()}


def assign(linen: Linen, values: dict[str, np.ndarray]) -> None:
    slots = linen.slots()
    check_assignment({n: np.shape(_value(leaf)) for n, (_, _, leaf) in slots.items()}, values,
                     linen.what, "variable")
    frozen = [n for n in values if isinstance(slots[n][0], FrozenDict)]
    if frozen:  # every check before a write
        raise WeightsError(f"{linen.what}: variable {frozen[0]!r} is in a FrozenDict, which cannot be "
                           "written; return flax.core.unfreeze(variables) from your factory")
    for name, array in values.items():
        holder, key, leaf = slots[name]
        value = jnp.asarray(array, dtype=jnp.asarray(_value(leaf)).dtype)
        if isinstance(leaf, nnx.Variable):
            leaf.set_value(value)
        else:
            holder[key] = value


# ---- the forward ----------------------------------------------------------------------------------
def run(linen: Linen, images: np.ndarray, layout: str, output: str | None) -> np.ndarray:
    return _logits(lambda x: linen.module.apply(linen.variables(), x), images, layout, output)


def compiled(linen: Linen, layout: str, output: str | None) -> Callable[[np.ndarray], np.ndarray]:
    # jax.jit of apply with the variables an argument (not baked into the program as constants)
    forward = jax.jit(lambda variables, x: linen.module.apply(variables, x))
    variables = linen.variables()
    return lambda images: _logits(lambda x: forward(variables, x), images, layout, output)


def _logits(forward: Callable[[Any], Any], images: np.ndarray, layout: str, output: str | None) -> np.ndarray:
    x = native_layout(images, layout)
    return pick_logits(jax.tree.map(np.asarray, forward(jnp.asarray(x))), output, len(x))


def capture(linen: Linen, images: np.ndarray, layout: str, paths: list[str]) -> dict[str, np.ndarray]:
    x = jnp.asarray(native_layout(images, layout))
    found: dict[str, Any] = {}

    def record(call: Callable[..., Any], args: Any, kwargs: Any, context: Any) -> Any:
        result = call(*args, **kwargs)
        if context.method_name == "__call__":
            found.setdefault("/".join(context.module.path), result)  # its first call
        return result

    with nn.intercept_methods(record):
        linen.module.apply(linen.variables(), x)
    missing = [p for p in paths if p not in found]
    if missing:
        called = list(found)
        raise InputError(f"{linen.what} has no module {missing[0]!r} called by its forward (its modules: "
                         f"{', '.join(called[:8])}{', ...' if len(called) > 8 else ''})")
    return {p: token_layout(found[p]) for p in paths}


# ---- the layers -----------------------------------------------------------------------------------
def layers(linen: Linen) -> list[Layer]:
    calls, gelus = _trace(linen)
    shapes = {tuple(name.split("/")): np.shape(_value(leaf)) for name, (_, _, leaf) in linen.slots().items()}
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
                program = jax.make_jaxpr(lambda v, x: linen.module.apply(v, x))(
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
    shapes = [np.shape(_value(leaf)) for _, _, leaf in linen.slots().values()]
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
