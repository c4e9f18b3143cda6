"""Every registered port module keeps the contract in shared/runtime/contract.py: each function of
`PortModule` and each method of `PortInterface` is present with compatible parameters (the same
names, kinds and defaults in the same order; anything extra optional), and `Port.__init__` sets
every attribute the contract names.

Read with `inspect` and `ast`, nothing built: one test per port module (importing a framework
costs seconds). Keras on JAX and on PyTorch (`keras-jax`, `keras-torch`) run the very module
`keras` does, so its check covers them; a test below proves every registry entry is covered.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable
from typing import Any

import pytest

from ports import PORTS, load_port_module, missing_requirement
from shared.core.precision import FLOAT32
from shared.runtime.contract import PortInterface, PortModule

# module -> the registry entry whose environment imports it in this process (conftest pins
# KERAS_BACKEND=tensorflow, so the Keras module is imported as the "keras" entry)
MODULES: dict[str, str] = {}
for _name, _entry in PORTS.items():
    MODULES.setdefault(_entry.module, _name)


def protocol_functions(protocol: type) -> dict[str, Callable[..., Any]]:
    """The functions a Protocol declares, in source order: its public ones, and `__init__` where
    it writes one (typing fills in an `__init__` of its own where it does not)."""
    return {name: value for name, value in vars(protocol).items() if inspect.isfunction(value)
            and value.__qualname__.startswith(f"{protocol.__name__}.")
            and (name == "__init__" or not name.startswith("_"))}


def protocol_attributes(protocol: type) -> list[str]:
    return list(vars(protocol).get("__annotations__", {}))


def incompatibility(wanted: Callable[..., Any], found: Callable[..., Any], drop_self: bool) -> str | None:
    """Why `found` cannot stand where the contract's `wanted` is called, or None. `wanted` is
    written with `self`; `found` has one only when it is a method (`drop_self`)."""
    want = list(inspect.signature(wanted).parameters.values())[1:]
    have = list(inspect.signature(found).parameters.values())[1 if drop_self else 0:]
    for i, param in enumerate(want):
        if i >= len(have):
            return f"lacks parameter {param.name!r}"
        got = have[i]
        if (got.name, got.kind) != (param.name, param.kind):
            return f"parameter {i + 1} is {got.name!r} ({got.kind.description}), expected {param.name!r}"
        if param.default is not inspect.Parameter.empty and got.default != param.default:
            has = "no default" if got.default is inspect.Parameter.empty else f"default {got.default!r}"
            return f"{param.name!r} has {has}, expected {param.default!r}"
    for extra in have[len(want):]:
        optional = extra.default is not inspect.Parameter.empty or extra.kind in (
            inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        if not optional:
            return f"extra parameter {extra.name!r} has no default: a contract call would fail"
    return None


def attributes_set_in_init(cls: type) -> set[str]:
    """Names assigned as `self.NAME` in `cls.__init__` (tuple targets included), and class
    attributes."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls.__init__)))
    names = {node.attr for node in ast.walk(tree)
             if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
             and isinstance(node.value, ast.Name) and node.value.id == "self"}
    return names | {name for name in vars(cls) if not name.startswith("__")}


def breaches(module: Any) -> list[str]:
    """Every way `module` departs from the contract, one line each."""
    out = []
    for name in protocol_attributes(PortModule):
        if not hasattr(module, name):
            out.append(f"module lacks {name}")
    for name, wanted in protocol_functions(PortModule).items():
        found = getattr(module, name, None)
        why = "is missing" if not callable(found) else incompatibility(wanted, found, drop_self=False)
        if why:
            out.append(f"{name}(): {why}")
    port = getattr(module, "Port", None)
    if port is None:
        return out
    for name, wanted in protocol_functions(PortInterface).items():
        found = vars(port).get(name) or getattr(port, name, None)
        why = "is missing" if not callable(found) else incompatibility(wanted, found, drop_self=True)
        if why:
            out.append(f"Port.{name}(): {why}")
    held = attributes_set_in_init(port)
    out += [f"Port.__init__ never sets {name!r}" for name in protocol_attributes(PortInterface)
            if name not in held]
    return out


def test_every_registry_entry_is_checked_through_its_module() -> None:
    assert set(MODULES.values()) <= set(PORTS)
    assert {entry.module for entry in PORTS.values()} == set(MODULES)
    # the Keras backends share one module: checked once, as "keras"
    assert MODULES["ports.keras"] == "keras"
    assert PORTS["keras-jax"].module == PORTS["keras-torch"].module == "ports.keras"


@pytest.mark.parametrize("module_name", sorted(MODULES))
def test_port_module_keeps_the_contract(module_name: str) -> None:
    entry = MODULES[module_name]
    reason = missing_requirement(entry)
    if reason:
        pytest.skip(reason)
    module = load_port_module(entry)
    found = breaches(module)
    assert not found, f"{module_name}.port breaks shared/runtime/contract.py: " + "; ".join(found)


class _Breaking:
    """A synthetic port module (no framework): one function missing, one parameter renamed, one
    default dropped, one attribute never set."""

    FRAMEWORK = "synthetic"

    @staticmethod
    def pin_precision(tf32: bool = False) -> dict[str, Any]:
        return {}

    @staticmethod
    def set_threads(threads: int) -> dict[str, int]:
        return {}

    @staticmethod
    def available_devices() -> list[str]:
        return ["cpu"]

    @staticmethod
    def version_info() -> dict[str, str]:
        return {}

    @staticmethod
    def device_name(device_class: str) -> str | None:
        return None

    @staticmethod
    def gemm_call(m: int, k: int, n: int, device_class: str, dtype: str) -> Callable[[], Any]:
        return lambda: None

    class Port:
        framework = "synthetic"

        def __init__(self, spec: Any, device: str = "cpu", precision: Any = None) -> None:
            self.spec, self.device_class, self.precision = spec, device, precision


def test_a_breach_is_named() -> None:
    found = breaches(_Breaking)
    assert "pin_precision(): parameter 1 is 'tf32' (positional or keyword), expected 'allow_tf32'" in found
    assert "allocator_peak(): is missing" in found
    assert "gemm_call(): 'dtype' has no default, expected 'float32'" in found
    assert f"Port.__init__(): 'precision' has default None, expected {FLOAT32!r}" in found
    assert "Port.load(): is missing" in found
    assert "Port.__init__ never sets 'settings'" in found
    # those, and every other method of the contract missing from the synthetic Port
    assert len(found) == 3 + len(protocol_functions(PortInterface)) + 1


def test_gemm_call_is_given_the_runs_mode() -> None:
    # The roofline times the ceiling as the chosen mode runs its matmuls (Keras' `xla` under XLA):
    # a gemm_call written before that, without `mode`, is a breach; None is "no mode chosen".
    assert inspect.signature(PortModule.gemm_call).parameters["mode"].default is None

    def before(m: int, k: int, n: int, device_class: str, dtype: str = "float32") -> Callable[[], Any]:
        return lambda: None

    assert incompatibility(PortModule.gemm_call, before, drop_self=False) == "lacks parameter 'mode'"
