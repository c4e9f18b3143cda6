"""The one small interface every port implements (ports/<fw>/port.py, class `Port`).

Written down here, framework-neutrally, so tools (verify, time, train, trace) can drive any port
without knowing its framework. Each port module also has module-level `pin_precision()`,
`set_threads(n)`, `available_devices()`, `version_info()`, `device_name(device_class)` and
`allocator_peak(device_class)`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from shared.core.spec import ModelSpec
from shared.core.weights import Tensors


class PortLike(Protocol):
    framework: str
    spec: ModelSpec
    device_class: str  # "cpu" | "cuda" | "metal"

    def load(self, tensors: Tensors) -> None:
        """Canonical tensors -> the framework's parameters (checked against the spec first)."""

    def export(self) -> Tensors:
        """The framework's parameters -> canonical tensors, bit-exact with what was loaded."""

    def param_count(self) -> int:
        """Counted from the framework's own parameter objects, not from the spec."""

    def prepare(self, images: np.ndarray) -> Any:
        """Canonical NHWC float32 images -> native layout and device (timed separately)."""

    def forward(self, prepared: Any, train: bool = False) -> Any:
        """Eager forward pass; dropout active only when `train`."""

    def compiled_forward(self) -> Callable[[Any], Any]:
        """An eval-mode forward under the framework's compiler (torch.compile / XLA / jax.jit)."""

    def sync(self, result: Any = None) -> None:
        """Block until `result` (and all queued work) is computed."""

    def to_numpy(self, result: Any) -> np.ndarray: ...

    def logits(self, images: np.ndarray, train: bool = False) -> np.ndarray: ...

    def intermediates(self, images: np.ndarray) -> dict[str, np.ndarray]:
        """Named taps (see shared/core/reference.py), eval mode, eager."""

    def loss_and_gradients(self, images: np.ndarray, labels: np.ndarray) -> tuple[float, Tensors]:
        """Mean cross-entropy from logits and its gradients in the canonical layout."""
