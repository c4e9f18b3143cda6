"""Framework-neutral helpers for each port's `defaults.py` (`ports/<fw>/defaults.py`): reading a
keyword's default from a signature or from a source file, and the pieces of the built-model audit
that do not depend on the framework (the finding, activation form by probing, the spec's rates).

In `shared/core` because the ports use it and ports stand on the core alone; the audit and the
spec check (`shared/teaching/audit.py`, `shared/your_model/spec_check.py`) use it from here too.
"""

from __future__ import annotations

import ast
import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from shared.core.activations import activation
from shared.core.spec import ACTIVATIONS, ModelSpec


def default_of(obj: Any, name: str) -> Any:
    """A keyword's default. flax.nnx classes hide their signature behind a metaclass
    (`(*args, **kwargs)`), so their `__init__` is read instead."""
    for target in (obj, getattr(obj, "__init__", None)):
        if target is None:
            continue
        try:
            params = inspect.signature(target).parameters
        except (TypeError, ValueError):
            continue
        if name in params and params[name].default is not inspect.Parameter.empty:
            return params[name].default
    raise LookupError(f"{getattr(obj, '__qualname__', obj)!r} has no default for {name!r}")


def source_default(path: Path, class_name: str, keyword: str) -> object:
    """A keyword's default in `class_name.__init__`, read from a source file without importing it."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    args = item.args.args + item.args.kwonlyargs
                    defaults = [None] * (len(item.args.args) - len(item.args.defaults))
                    defaults += list(item.args.defaults) + list(item.args.kw_defaults)
                    for arg, default in zip(args, defaults, strict=False):
                        if arg.arg == keyword and default is not None:
                            return ast.literal_eval(default)
    return "unknown"


@dataclass(frozen=True)
class Finding:
    where: str  # file:line, or framework:layer path
    entry: str  # catalogue entry (shared/teaching/divergences.py)
    message: str

    def line(self) -> str:
        return f"{self.where}: [{self.entry}] {self.message}"


def activation_form(fn: Callable[[np.ndarray], Any]) -> str | None:
    """The spec activation (`shared.core.spec.ACTIVATIONS`) a callable computes, by probing it at
    x = 1.5 and -0.75 against the reference's forms (`shared.core.activations`; GELU's two differ
    by 2e-4 at 1.5, the others by more); None when it is none of them or cannot take a NumPy array."""
    x = np.array([1.5, -0.75], dtype=np.float32)
    try:
        y = fn(x)
        y = y.detach().cpu().numpy() if hasattr(y, "detach") else y  # a torch tensor (Keras on torch)
        got = np.asarray(y, dtype=np.float64).reshape(-1)
    except Exception:
        return None
    if got.shape != x.shape:
        return None
    return next((form for form in ACTIVATIONS
                 if np.all(np.abs(got - activation(x.astype(np.float64), form)) < 2e-5)), None)


def gelu_form(fn: Callable[[np.ndarray], Any]) -> str | None:
    """'gelu' or 'gelu_tanh' by probing a callable (`activation_form`); None when it is neither."""
    form = activation_form(fn)
    return form if form in ("gelu", "gelu_tanh") else None


def spec_rates(spec: ModelSpec) -> set[float]:
    return {spec.dropout_embed, spec.dropout_attn, spec.dropout_mlp, spec.dropout_head}


def is_spec_rate(rate: float, spec: ModelSpec) -> bool:
    return any(close(rate, r) for r in spec_rates(spec))


def close(a: float, b: float) -> bool:
    return math.isclose(float(a), float(b), rel_tol=1e-6)
