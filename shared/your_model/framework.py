"""Which framework a built model object is, and the port part that reads it: each framework's
`ports/<fw>/user.py` (`owns`, `parameters`, `layers`, `run`, ...). Read from the object, never
guessed from a name: the worker's jobs (jobs.py), the spec proposal, `portbench.check` and the
audit of a built model (`shared.teaching.audit.audit_model`) all ask here."""

from __future__ import annotations

import sys
from typing import Any

import ports
from shared.core.spec import ModelSpec
from shared.errors import InputError, PortbenchError
from shared.runtime.worker import one_line

USER_FRAMEWORKS = ("keras", "flax", "torch", "mlx")  # Keras first: on torch it is an nn.Module too
# the libraries whose models a port's user.py reads: the flax one reads equinox's too (JAX's other
# module library), which a user's file may import without Flax
LIBRARIES = {"keras": ("keras",), "flax": ("flax", "equinox"), "torch": ("torch",), "mlx": ("mlx",)}


def user_port(model: Any, framework: str | None) -> tuple[str, Any]:
    """(framework, its ports/<fw>/user.py) owning `model`, read from the object; an explicit
    `framework` is never overridden: a model of another framework is one line naming both."""
    if framework:
        module = ports.load_port_part(framework, "user")
        if module.owns(model):
            return port_name(framework), module
    owner = _owner(model)
    if owner is None and _is_linen(model):  # only without a spec: with one, `with_variables` held it
        raise InputError(f"--model returned a {type(model).__name__}, a Flax linen module without its "
                         "variables (linen holds them outside the module), and no spec gives the image "
                         "size to initialise it: pass --spec, or return (module, module.init("
                         "jax.random.key(0), jnp.zeros((1, height, width, channels)))) from your factory")
    if framework:
        what = f"a {owner[0]} model" if owner else "not a model of any framework portbench runs"
        instead = f"--framework {owner[0]}, or no --framework" if owner else "a model of that framework"
        raise InputError(f"--framework {framework}, but --model returned a {type(model).__name__}, {what}; "
                         f"pass {instead}")
    if owner is None:
        raise InputError(f"--model returned a {type(model).__name__}, not a torch.nn.Module, Keras model "
                         "or layer, Flax nnx.Module or linen (module, variables) pair, equinox Module, or "
                         "mlx.nn.Module")
    return owner


def with_variables(model: Any, spec: ModelSpec | None) -> tuple[Any, str | None]:
    """The model as portbench holds it to bind and run: a bare Flax linen module as the (module,
    variables) pair, initialised at the spec's image (ports/flax/linen.py's `initialise`), with the
    note saying so; an equinox module in the box new weights are written into (an equinox module
    is immutable: ports/flax/equinox_modules.py); any other object as it is. Without a spec nothing
    gives a linen module's image size, and `user_port`'s refusal stands."""
    if any(c.__module__.startswith("equinox") for c in type(model).__mro__):
        return ports.load_port_part("flax", "equinox_modules").hold(model), None
    if spec is None or not _is_linen(model) or _owner(model) is not None:
        return model, None
    shape = (1, spec.image_height, spec.image_width, spec.channels)
    try:
        held = ports.load_port_part("flax", "linen").initialise(model, shape)
    except PortbenchError:
        raise
    except Exception as exc:  # the user's module: whatever its setup raises
        raise InputError(f"your linen module {type(model).__name__}, initialised on zeros{shape} (NHWC), "
                         f"raised {one_line(exc)}; return (module, variables) from your factory") from None
    return held, (f"variables: your linen module was initialised with module.init(key 0, zeros{shape}), "
                  "as the (module, variables) pair it is held as")


def _is_linen(model: Any) -> bool:
    return any(c.__module__.startswith("flax.linen") for c in type(model).__mro__)  # its class says so


def port_name(entry: str) -> str:
    """The port a registry entry runs ("keras-jax" -> "keras")."""
    return ports.PORTS[entry].module.rsplit(".", 1)[-1]


def model_class(model: Any) -> str:
    """The model's class as `module.Name` (timm.models.vision_transformer.VisionTransformer)."""
    return f"{type(model).__module__}.{type(model).__qualname__}"


def _owner(model: Any) -> tuple[str, Any] | None:
    for name in (f for f in USER_FRAMEWORKS if any(lib in sys.modules for lib in LIBRARIES[f])):
        # a model's library is imported
        module = ports.load_port_part(name, "user")
        if module.owns(model):
            return name, module
    return None
