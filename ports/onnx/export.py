"""The torch port's model -> an ONNX graph (bytes), optionally with every tap as an output.

Uses torch's TorchScript-based exporter (`dynamo=False`): the torch.export-based default needs
the `onnxscript` package, which this project does not depend on. Constant folding is off so the
graph keeps every parameter as an initializer under its torch name, which lets the port read
its weights back out of the graph (`transfer.py`) instead of trusting the torch model.
"""

from __future__ import annotations

import io
import warnings
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.onnx import symbolic_helper

from ports.torch.model import VisionTransformer
from shared.core.spec import ModelSpec
from shared.core.taps import NO_TAPS, Taps

OPSET = 17  # LayerNormalization is a single op from opset 17
INPUT = "images"
LOGITS = "logits"
PREFIX = "model."  # the wrapper's attribute name, in front of every parameter name


@symbolic_helper.parse_args("v", "is", "v", "f")
def _rms_norm(g: Any, x: Any, normalized_shape: list[int], weight: Any, eps: float) -> Any:
    """aten::rms_norm as x / sqrt(mean(x^2) + eps) * weight over the normalised trailing axes.
    Written as Pow/ReduceMean/Add/Sqrt/Div/Mul, the pattern ONNX Runtime's optimiser fuses into
    its own RMSNorm kernel, so the compiled session runs that kernel and the eager one the parts.
    `eps` is always given: the torch port passes every norm its spec epsilon (ports/torch/model.py)."""
    square = g.op("Pow", x, g.op("Constant", value_t=torch.tensor(2.0)))
    mean = g.op("ReduceMean", square, axes_i=list(range(-len(normalized_shape), 0)), keepdims_i=1)
    rms = g.op("Sqrt", g.op("Add", mean, g.op("Constant", value_t=torch.tensor(eps, dtype=torch.float32))))
    normed = g.op("Div", x, rms)
    return normed if symbolic_helper._is_none(weight) else g.op("Mul", normed, weight)


# Process-wide, for exports at opset OPSET and later: it only fills a gap (the exporter has no
# rms_norm symbolic at any opset), so no other export's graph changes.
torch.onnx.register_custom_op_symbolic("aten::rms_norm", _rms_norm, OPSET)


class _Outputs(nn.Module):
    """Returns (logits, *taps in a fixed order), so ONNX Runtime computes the taps too. Also
    used without taps: the tracer accepts only tensors as arguments, so the port's `taps`
    argument must stay inside. Parameter names gain the prefix `PREFIX`."""

    def __init__(self, model: VisionTransformer, tap_names: list[str]) -> None:
        super().__init__()
        self.model, self.tap_names = model, tap_names

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        taps = Taps() if self.tap_names else NO_TAPS
        logits = self.model(x, taps)
        return (logits, *[taps[name] for name in self.tap_names])


def tap_names(model: VisionTransformer, spec: ModelSpec) -> list[str]:
    taps = Taps()
    with torch.no_grad():
        model(torch.zeros(1, spec.channels, spec.image_height, spec.image_width), taps)
    return [name for name in taps.tensors if name != LOGITS]


def export_graph(model: VisionTransformer, spec: ModelSpec,
                 with_taps: bool = False) -> tuple[bytes, list[str]]:
    """ONNX bytes of the eval-mode model with a dynamic batch axis, and its output names."""
    model.eval()
    names = tap_names(model, spec) if with_taps else []
    module = _Outputs(model, names)
    outputs = [LOGITS, *names]
    example = torch.from_numpy(np.zeros((2, spec.channels, spec.image_height, spec.image_width), np.float32))
    buffer = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the legacy exporter's deprecation notice, tracer warnings
        torch.onnx.export(
            module, (example,), buffer, dynamo=False, opset_version=OPSET, do_constant_folding=False,
            input_names=[INPUT], output_names=outputs,
            dynamic_axes={name: {0: "batch"} for name in [INPUT, *outputs]},
        )
    return buffer.getvalue(), outputs
