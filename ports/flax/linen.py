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
`module.apply(variables, x)` in inference mode: linen modules take their mode as a call argument
(big_vision's `train=False` default, vit_jax's required `train`, Transformers' `deterministic=True`),
so each mode keyword the module's `__call__` names is passed at its inference value (`INFERENCE`).
Their layers: ports/flax/linen_layers.py.
"""

from __future__ import annotations

import inspect
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

from shared.core.forward_io import (
    check_assignment,
    forward_logits,
    model_inputs,
    token_layout,
)
from shared.errors import InputError, WeightsError

# a linen __call__'s mode keywords -> their inference value (dropout off, batch statistics frozen)
INFERENCE = {"deterministic": True, "train": False, "training": False, "is_training": False}


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
                elif jnp.issubdtype(jnp.asarray(leaf_value(value)).dtype, jnp.floating):
                    out["/".join([*path, str(key)])] = (node, key, value)

        for collection, variables in self.tree.items():
            if isinstance(variables, Mapping):
                visit(variables, [] if collection == "params" else [str(collection)])
        return out

    def apply(self, variables: Any, *x: Any) -> Any:
        """The module's forward on `x` (the images, or a patch batch's three arrays) in inference mode
        (`INFERENCE`'s keywords it names)."""
        return self.module.apply(variables, *x, **inference_flags(self.module))

    def variables(self) -> dict[str, Any]:
        """The variables as `module.apply` takes them (arrays, whatever holds them)."""
        return jax.tree.map(leaf_value, _plain(self.tree), is_leaf=lambda v: isinstance(v, nnx.Variable))


def inference_flags(module: Any) -> dict[str, bool]:
    """The mode keywords `module.__call__` takes, at their inference values (a linen or nnx module)."""
    try:
        names = inspect.signature(module.__call__).parameters
    except (TypeError, ValueError):  # a callable without a readable signature: its own defaults
        return {}
    return {name: value for name, value in INFERENCE.items() if name in names}


def initialise(module: Any, shape: tuple[int, ...]) -> tuple[Any, Any]:
    """A bare linen module as the pair a user holds: `module.init` on zeros of `shape` (NHWC), its
    inference keywords passed (a required `train` included), seeded 0 (its own weights are bound
    or replaced, never judged)."""
    key = jax.random.PRNGKey(0)
    return module, module.init({"params": key, "dropout": key}, jnp.zeros(shape, jnp.float32),
                               **inference_flags(module))


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


def leaf_value(leaf: Any) -> Any:
    return leaf.get_value() if isinstance(leaf, nnx.Variable) else leaf


def _plain(tree: Any) -> Any:
    """Nested mappings (frozen or not) as dicts, leaves as they are."""
    return {k: _plain(v) for k, v in tree.items()} if isinstance(tree, Mapping) else tree


# ---- parameters -----------------------------------------------------------------------------------
def parameters(linen: Linen) -> dict[str, np.ndarray]:
    return {name: np.array(leaf_value(leaf), dtype=np.float32)
            for name, (_, _, leaf) in linen.slots().items()}


def assign(linen: Linen, values: dict[str, np.ndarray]) -> None:
    slots = linen.slots()
    check_assignment({n: np.shape(leaf_value(leaf)) for n, (_, _, leaf) in slots.items()}, values,
                     linen.what, "variable")
    frozen = [n for n in values if isinstance(slots[n][0], FrozenDict)]
    if frozen:  # every check before a write
        raise WeightsError(f"{linen.what}: variable {frozen[0]!r} is in a FrozenDict, which cannot be "
                           "written; return flax.core.unfreeze(variables) from your factory")
    for name, array in values.items():
        holder, key, leaf = slots[name]
        value = jnp.asarray(array, dtype=jnp.asarray(leaf_value(leaf)).dtype)
        if isinstance(leaf, nnx.Variable):
            leaf.set_value(value)
        else:
            holder[key] = value


# ---- the forward ----------------------------------------------------------------------------------
def run(linen: Linen, images: np.ndarray, layout: str, output: str | None) -> np.ndarray:
    return forward_logits(lambda *x: linen.apply(linen.variables(), *x), images, layout, output,
                          jnp.asarray, np.asarray)


def compiled(linen: Linen, layout: str, output: str | None) -> Callable[[np.ndarray], np.ndarray]:
    # jax.jit of apply with the variables an argument (not baked into the program as constants)
    forward = jax.jit(lambda variables, *x: linen.apply(variables, *x))
    variables = linen.variables()
    return lambda images: forward_logits(lambda *x: forward(variables, *x), images, layout, output,
                                         jnp.asarray, np.asarray)


def capture(linen: Linen, images: np.ndarray, layout: str, paths: list[str]) -> dict[str, np.ndarray]:
    inputs = [jnp.asarray(a) for a in model_inputs(images, layout)]  # images, or a patch batch's three
    found: dict[str, Any] = {}

    def record(call: Callable[..., Any], args: Any, kwargs: Any, context: Any) -> Any:
        result = call(*args, **kwargs)
        if context.method_name == "__call__":
            found.setdefault("/".join(context.module.path), result)  # its first call
        return result

    with nn.intercept_methods(record):
        linen.apply(linen.variables(), *inputs)
    missing = [p for p in paths if p not in found]
    if missing:
        called = list(found)
        raise InputError(f"{linen.what} has no module {missing[0]!r} called by its forward (its modules: "
                         f"{', '.join(called[:8])}{', ...' if len(called) > 8 else ''})")
    return {p: token_layout(found[p]) for p in paths}
