"""Which framework a built model object is, and the port part that reads it: each framework's
`ports/<fw>/user.py` (`owns`, `parameters`, `layers`, `run`, ...). Read from the object, never
guessed from a name: the worker's jobs (jobs.py), the spec proposal, `portbench.check` and the
audit of a built model (`shared.teaching.audit.audit_model`) all ask here."""

from __future__ import annotations

import sys
from typing import Any

import ports
from shared.errors import InputError

USER_FRAMEWORKS = ("keras", "flax", "torch", "mlx")  # Keras first: on torch it is an nn.Module too


def user_port(model: Any, framework: str | None) -> tuple[str, Any]:
    """(framework, its ports/<fw>/user.py) owning `model`, read from the object; an explicit
    `framework` is never overridden: a model of another framework is one line naming both."""
    if framework:
        module = ports.load_port_part(framework, "user")
        if module.owns(model):
            return port_name(framework), module
    owner = _owner(model)
    if framework:
        what = f"a {owner[0]} model" if owner else "not a model of any framework portbench runs"
        instead = f"--framework {owner[0]}, or no --framework" if owner else "a model of that framework"
        raise InputError(f"--framework {framework}, but --model returned a {type(model).__name__}, {what}; "
                         f"pass {instead}")
    if owner is None:
        if any(c.__module__.startswith("flax.linen") for c in type(model).__mro__):  # its class says so
            raise InputError(f"--model returned a {type(model).__name__}, a Flax linen module without its "
                             "variables (linen holds them outside the module): return (module, "
                             "module.init(jax.random.key(0), jnp.zeros((1, height, width, channels)))) from "
                             "your factory")
        raise InputError(f"--model returned a {type(model).__name__}, not a torch.nn.Module, Keras model "
                         "or layer, Flax nnx.Module or linen (module, variables) pair, or mlx.nn.Module")
    return owner


def port_name(entry: str) -> str:
    """The port a registry entry runs ("keras-jax" -> "keras")."""
    return ports.PORTS[entry].module.rsplit(".", 1)[-1]


def model_class(model: Any) -> str:
    """The model's class as `module.Name` (timm.models.vision_transformer.VisionTransformer)."""
    return f"{type(model).__module__}.{type(model).__qualname__}"


def _owner(model: Any) -> tuple[str, Any] | None:
    for name in (f for f in USER_FRAMEWORKS if f in sys.modules):  # a model's framework is imported
        module = ports.load_port_part(name, "user")
        if module.owns(model):
            return name, module
    return None
