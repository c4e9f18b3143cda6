"""The port contract: what every registered port module (`ports.PORTS`: the four native ports,
the ONNX backend, and Keras on each of its backends) provides, written down framework-neutrally
so tools (verify, time, train, trace) drive any port without knowing its framework.

Two `Protocol`s: `PortModule` is the module `ports.load_port_module` returns (`ports/<fw>/port.py`:
its module-level functions and its `Port` class), `PortInterface` is an instance of that `Port`.
`tests/test_ports_contract.py` reads every registered module's names and signatures against
these with `inspect` (nothing built), so a port that lacks a function, renames a parameter or
drops a default fails there, not in a tool. Tools type the port handles they take with these.
Tensors are framework objects here (`Any`); canonical arrays are NumPy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from shared.core.precision import FLOAT32, Precision
from shared.core.spec import ModelSpec
from shared.core.weights import Tensors


class PortInterface(Protocol):
    """A port of one spec on one device at one precision rung (`ports.create_port` makes one)."""

    framework: str  # the registry name of the framework (a class attribute)
    spec: ModelSpec
    device_class: str  # "cpu" | "cuda" | "metal"
    precision: Precision
    settings: dict[str, Any]  # what `pin_precision` applied, as the framework reads it back

    def __init__(self, spec: ModelSpec, device: str = "cpu", precision: Precision = FLOAT32) -> None:
        """Build the model (eval mode) and pin the rung's precision settings; no weights yet."""

    # ---- weights ----------------------------------------------------------------------
    def load(self, tensors: Tensors) -> None:
        """Canonical tensors -> the framework's parameters (checked against the spec first)."""

    def export(self) -> Tensors:
        """The framework's parameters -> canonical tensors, bit-exact with what was loaded."""

    def param_count(self) -> int:
        """Counted from the framework's own parameter objects, not from the spec."""

    # ---- running ----------------------------------------------------------------------
    def prepare(self, images: np.ndarray) -> Any:
        """Canonical NHWC float32 images -> native layout and device (timed separately)."""

    def forward(self, prepared: Any, train: bool = False) -> Any:
        """Eager forward pass; dropout active only when `train`."""

    def compiled_forward(self) -> Callable[[Any], Any]:
        """An eval-mode forward under the framework's compiler (torch.compile, XLA, mx.compile,
        ONNX Runtime's graph optimisations)."""

    def sync(self, result: Any = None) -> None:
        """Block until `result` (and all queued work) is computed."""

    def to_numpy(self, result: Any) -> np.ndarray:
        """A framework tensor -> NumPy; low-precision values come out as float32, exactly."""

    def logits(self, images: np.ndarray, train: bool = False) -> np.ndarray:
        """prepare, forward and to_numpy in one call."""

    def intermediates(self, images: np.ndarray) -> dict[str, np.ndarray]:
        """The named taps (shared/core/reference.py) as NumPy, eval mode, eager."""

    def tap_dtypes(self, images: np.ndarray) -> dict[str, str]:
        """The dtype each named intermediate was computed in, as the framework reports it."""

    def taps(self, images: np.ndarray) -> dict[str, Any]:
        """The named intermediates as framework tensors: the tensors the forward pass used."""

    def loss_and_gradients(self, images: np.ndarray, labels: np.ndarray) -> tuple[float, Tensors]:
        """Mean cross-entropy from logits and its gradients in the canonical layout."""


class PortModule(Protocol):
    """`ports/<fw>/port.py` as a module: its functions are written here as methods (a module
    satisfies a Protocol through its attributes; `self` stands for no parameter)."""

    FRAMEWORK: str
    Port: Callable[..., PortInterface]

    def pin_precision(self, allow_tf32: bool = False) -> dict[str, Any]:
        """Keep float32 matmuls in float32 (TF32 only when asked); returns what holds."""

    def set_threads(self, threads: int) -> dict[str, int]:
        """Apply a thread count where the framework has a switch; returns what holds."""

    def available_devices(self) -> list[str]:
        """Device classes this framework can use here, the preferred one first."""

    def version_info(self) -> dict[str, str]:
        """Library name -> version, for every library the port runs on."""

    def device_name(self, device_class: str) -> str | None:
        """An accelerator's name as the framework reports it; None where it gives none."""

    def allocator_peak(self, device_class: str) -> tuple[int | None, str]:
        """(bytes, source) from the framework's own allocator, or (None, why not)."""

    def gemm_call(self, m: int, k: int, n: int, device_class: str, dtype: str = "float32",
                  mode: str | None = None) -> Callable[[], Any]:
        """One synchronised (m, k) @ (k, n) matmul with the framework's own kernel, for the
        roofline (shared/measure/roofline.py), run the way the run's chosen `mode` (a `run_modes`
        name; None where no mode was chosen: one way to run) runs its matmuls, so the ceiling is
        measured as the forward runs (Keras' `xla`: under XLA)."""
