"""The common port interface (shared/runtime/contract.py) for ONNX Runtime.

The model is the torch port's, exported to ONNX (ports/onnx/export.py) after every `load` and
run by ONNX Runtime on the CPU (or CUDA) execution provider. "Eager" and "compiled" differ the
way they do for the other ports: `forward` runs the exported graph node by node with ONNX
Runtime's graph optimisations off, `compiled_forward` runs a session with all of them on
(constant folding, LayerNorm/GELU/attention fusions), i.e. ONNX Runtime's own compiler.
ONNX Runtime here is inference only: there is no train mode and no gradient.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import torch

from ports import rung_refusal
from ports.onnx import export, transfer
from ports.torch.port import Port as TorchPort
from shared.core.inputs import check_images
from shared.core.precision import FLOAT32, Precision
from shared.core.spec import ModelSpec
from shared.core.weights import Tensors
from shared.errors import FrameworkUnavailable

FRAMEWORK = "onnx"
_THREADS: dict[str, int] = {}  # set_threads() applies to sessions created afterwards
_PROVIDERS = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider"}
_PRECISION: dict[str, bool] = {"allow_tf32": False}


def pin_precision(allow_tf32: bool = False) -> dict[str, Any]:
    # The CPU provider computes fp32 GEMMs in fp32 (its bf16 fast-math is opt-in, ARM only, and
    # left off); the exporting torch model is pinned as the torch port pins it. ONNX Runtime's CUDA
    # provider has its own TF32 switch (use_tf32), set from allow_tf32 when a session is made.
    torch.set_float32_matmul_precision("highest")
    _PRECISION["allow_tf32"] = allow_tf32
    return {"execution": "fp32", "allow_tf32": allow_tf32,
            "torch_export_precision": torch.get_float32_matmul_precision()}


def set_threads(threads: int) -> dict[str, int]:
    _THREADS.update(intra_op=threads, inter_op=threads)
    return dict(_THREADS)


def available_devices() -> list[str]:
    providers = ort.get_available_providers()
    return [d for d in ("cuda", "cpu") if _PROVIDERS[d] in providers]


def version_info() -> dict[str, str]:
    return {"onnxruntime": ort.__version__, "onnx": onnx.__version__, "torch": torch.__version__,
            "opset": str(export.OPSET)}


def device_name(device_class: str) -> str | None:
    # An accelerator's name as the framework reports it; None where it gives none (the caller
    # names CPUs from the operating system).
    return None  # ONNX Runtime names no device


def allocator_peak(device_class: str) -> tuple[int | None, str]:
    # (bytes, source) from the framework's own allocator, or (None, why not): never estimated.
    return None, "ONNX Runtime exposes no allocator statistics"


def gemm_call(m: int, k: int, n: int, device_class: str, dtype: str = "float32",
              mode: str | None = None) -> Callable[[], Any]:
    # One synchronised float32 (m, k) @ (k, n) on the device, with the framework's own matmul:
    # shared/measure/roofline.py times it at the run's threads (this backend is float32 only).
    # `mode` is always None: ONNX Runtime offers one way to run (no run_modes).
    helper, f32 = onnx.helper, onnx.TensorProto.FLOAT
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["c"])], "gemm",
        [helper.make_tensor_value_info("a", f32, [m, k]),
         helper.make_tensor_value_info("b", f32, [k, n])],
        [helper.make_tensor_value_info("c", f32, [m, n])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", export.OPSET)])
    options = ort.SessionOptions()
    if _THREADS:
        options.intra_op_num_threads = _THREADS["intra_op"]
        options.inter_op_num_threads = _THREADS["inter_op"]
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=[_PROVIDERS[device_class]])
    rng = np.random.default_rng(0)
    feeds = {"a": rng.standard_normal((m, k), dtype=np.float32),
             "b": rng.standard_normal((k, n), dtype=np.float32)}

    def call() -> np.ndarray:
        return session.run(["c"], feeds)[0]  # returns finished host arrays

    return call


class Port:
    framework = FRAMEWORK

    def __init__(self, spec: ModelSpec, device: str = "cpu", precision: Precision = FLOAT32) -> None:
        refusal = rung_refusal(FRAMEWORK, precision, device)  # float32 only (ports/__init__.py)
        if refusal:
            raise FrameworkUnavailable(refusal)
        if device not in available_devices():
            raise FrameworkUnavailable(f"onnx: device {device!r} has no ONNX Runtime execution provider "
                                       f"here; available: {', '.join(available_devices())}")
        if spec.batching != "fixed":  # the export traces one image tensor, not (patches, key mask)
            raise FrameworkUnavailable(f"onnx: batching {spec.batching!r} is not exported yet; the torch "
                                       "port runs it")
        self.settings = pin_precision(allow_tf32=precision.tf32)
        self.spec, self.device_class, self.precision = spec, device, precision
        self.source = TorchPort(spec, device="cpu")  # exported from the CPU copy
        self._parameter_names = {name for name, _ in self.source.model.named_parameters()}
        self._graphs: dict[bool, tuple[bytes, list[str]]] = {}  # with_taps -> (graph, outputs)
        self._sessions: dict[tuple[bool, bool], ort.InferenceSession] = {}

    # ---- weights ----------------------------------------------------------------------
    def load(self, tensors: Tensors) -> None:
        self.source.load(tensors)  # checks against the spec, then fills the torch model
        self._graphs.clear()
        self._sessions.clear()

    def export(self) -> Tensors:
        graph, _ = self._graph(with_taps=False)
        return transfer.export_canonical(self.spec, graph, self._parameter_names)

    def param_count(self) -> int:
        graph, _ = self._graph(with_taps=False)
        return sum(int(v.size) for v in transfer.graph_parameters(graph, self._parameter_names).values())

    # ---- graphs and sessions ----------------------------------------------------------
    def _graph(self, with_taps: bool) -> tuple[bytes, list[str]]:
        if with_taps not in self._graphs:
            self._graphs[with_taps] = export.export_graph(self.source.model, self.spec, with_taps)
        return self._graphs[with_taps]

    def _session(self, optimised: bool, with_taps: bool = False) -> ort.InferenceSession:
        key = (optimised, with_taps)
        if key not in self._sessions:
            options = ort.SessionOptions()
            options.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimised
                                                else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
            if _THREADS:
                options.intra_op_num_threads = _THREADS["intra_op"]
                options.inter_op_num_threads = _THREADS["inter_op"]
            graph, _ = self._graph(with_taps)
            provider: Any = _PROVIDERS[self.device_class]
            if self.device_class == "cuda":  # TF32 off unless asked, as in every other port
                provider = (provider, {"use_tf32": int(_PRECISION["allow_tf32"])})
            self._sessions[key] = ort.InferenceSession(graph, options, providers=[provider])
        return self._sessions[key]

    # ---- running ----------------------------------------------------------------------
    def prepare(self, images: np.ndarray) -> np.ndarray:
        """Canonical NHWC float32 -> contiguous NCHW (the exported torch model's layout)."""
        check_images(self.spec, images)
        return np.ascontiguousarray(np.asarray(images, dtype=np.float32).transpose(0, 3, 1, 2))

    def forward(self, prepared: np.ndarray, train: bool = False) -> np.ndarray:
        if train:
            raise FrameworkUnavailable("onnx: the exported graph is inference only (no train mode, "
                                       "no dropout); train with the torch port")
        return self._session(optimised=False).run([export.LOGITS], {export.INPUT: prepared})[0]

    def compiled_forward(self) -> Callable[[np.ndarray], np.ndarray]:
        """A session with every ONNX Runtime graph optimisation on (its compiler)."""
        session = self._session(optimised=True)
        return lambda prepared: session.run([export.LOGITS], {export.INPUT: prepared})[0]

    def sync(self, result: Any = None) -> None:
        """Nothing to wait for: `InferenceSession.run` returns finished host arrays."""

    def to_numpy(self, result: np.ndarray) -> np.ndarray:
        return np.asarray(result)

    def logits(self, images: np.ndarray, train: bool = False) -> np.ndarray:
        return self.to_numpy(self.forward(self.prepare(images), train=train))

    def intermediates(self, images: np.ndarray) -> dict[str, np.ndarray]:
        return {name: self.to_numpy(t) for name, t in self.taps(images).items()}

    def tap_dtypes(self, images: np.ndarray) -> dict[str, str]:
        """The dtype each named intermediate was computed in, as the framework reports it."""
        return {name: str(t.dtype) for name, t in self.taps(images).items()}

    def taps(self, images: np.ndarray) -> dict[str, np.ndarray]:
        """Every tap, computed by ONNX Runtime: the taps are outputs of a second exported graph."""
        _, outputs = self._graph(with_taps=True)
        session = self._session(optimised=False, with_taps=True)
        values = session.run(outputs, {export.INPUT: self.prepare(images)})
        return dict(zip(outputs, values, strict=True))

    def loss_and_gradients(self, images: np.ndarray, labels: np.ndarray) -> tuple[float, Tensors]:
        raise FrameworkUnavailable("onnx: ONNX Runtime (inference build) computes no gradients; "
                                   "use the torch port for loss_and_gradients")
