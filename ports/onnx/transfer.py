"""Weights read back out of an ONNX graph: its initializers carry the torch port's parameter
names (constant folding is off), so the torch port's own mapping turns them into canonical
tensors. This checks what ONNX Runtime actually runs, not the torch model it came from."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from ports.onnx.export import PREFIX
from ports.torch import transfer as torch_transfer
from shared.core.spec import ModelSpec
from shared.core.weights import Tensors


def graph_parameters(graph: bytes, parameter_names: set[str]) -> dict[str, np.ndarray]:
    """The initializers that are the model's parameters (ONNX adds constants of its own)."""
    model = onnx.load_from_string(graph)
    found = {name: numpy_helper.to_array(init) for init in model.graph.initializer
             if (name := init.name.removeprefix(PREFIX)) in parameter_names}
    missing = parameter_names - set(found)
    if missing:  # an exporter change (e.g. folding) would land here: a bug, not a user error
        raise AssertionError(f"ONNX graph lacks parameters {sorted(missing)[:4]}")
    return found


def export_canonical(spec: ModelSpec, graph: bytes, parameter_names: set[str]) -> Tensors:
    return torch_transfer.from_native(spec, graph_parameters(graph, parameter_names))
