"""The common port interface (shared/runtime/contract.py) for MLX."""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial
from typing import Any

import mlx.core as mx
import numpy as np
from mlx import nn
from mlx.utils import tree_flatten

from ports import rung_refusal
from ports.mlx import transfer
from ports.mlx.model import ATTENTION_PATHS, VisionTransformer
from shared.core.batching import attention_mask, merge_index, pool_mask, position_rows, window_mask
from shared.core.inputs import check_images
from shared.core.precision import FLOAT32, Precision
from shared.core.rotary import token_rows
from shared.core.spec import ModelSpec
from shared.core.taps import NO_TAPS, Taps
from shared.core.weights import Tensors, check_tensors
from shared.errors import FrameworkUnavailable, InputError

FRAMEWORK = "mlx"
DTYPES = {"float32": mx.float32, "bfloat16": mx.bfloat16, "float16": mx.float16}


def pin_precision(allow_tf32: bool = False) -> dict[str, Any]:
    # MLX_ENABLE_TF32 defaults to 1: fp32 matmuls, convolutions and attention run in TF32 on CUDA
    # and on Metal's M5 accelerator paths (about 1000x fp32's error). MLX reads it once, at its
    # first such op, so the registry entry also sets it before import. No effect on the CPU.
    os.environ["MLX_ENABLE_TF32"] = "1" if allow_tf32 else "0"
    return {"MLX_ENABLE_TF32": os.environ["MLX_ENABLE_TF32"], "tf32": allow_tf32}


def set_threads(threads: int) -> dict[str, int]:
    # MLX's CPU backend has no thread-count switch; only the CPU affinity of the process, which
    # the caller sets before MLX starts, bounds it. Report what holds.
    return {"affinity": len(os.sched_getaffinity(0))}


def gpu_backend() -> str | None:
    """'cuda' or 'metal' when this MLX build has that backend and a device for it, else None."""
    cuda = getattr(mx, "cuda", None)  # only builds from 0.27 on have mx.cuda
    if cuda is not None and cuda.is_available():
        return "cuda"
    if mx.metal.is_available():
        return "metal"
    return None


def available_devices() -> list[str]:
    # MLX has one GPU device class, mx.gpu, served by whichever backend the build has.
    gpu = gpu_backend()
    return [gpu, "cpu"] if gpu and mx.is_available(mx.gpu) else ["cpu"]


def version_info() -> dict[str, str]:
    return {"mlx": mx.__version__}


def device_name(device_class: str) -> str | None:
    # An accelerator's name as the framework reports it; None where it gives none (the caller
    # names CPUs from the operating system).
    if device_class == "cpu":
        return None
    info = mx.device_info() if hasattr(mx, "device_info") else {}
    return str(info.get("device_name") or "") or None


def allocator_peak(device_class: str) -> tuple[int | None, str]:
    # (bytes, source) from the framework's own allocator, or (None, why not): never estimated.
    # MLX counts every allocation it makes, on the CPU too (its memory is unified on a Mac).
    return int(mx.get_peak_memory()), "mx.get_peak_memory()"


def gemm_call(m: int, k: int, n: int, device_class: str, dtype: str = "float32",
              mode: str | None = None) -> Callable[[], Any]:
    # One synchronised (m, k) @ (k, n) in `dtype` on the device, with the framework's own matmul
    # as the run's `mode` runs it: shared/measure/roofline.py times it at the run's threads and
    # compute dtype for the roofline.
    # `mode` leaves the product as it is: MLX's modes choose the attention path, and the dense
    # matmuls measured here (flops.gemm_shapes) run the same mx.matmul in each.
    device = mx.cpu if device_class == "cpu" else mx.gpu
    a = mx.random.normal((m, k), dtype=DTYPES[dtype], stream=device)
    b = mx.random.normal((k, n), dtype=DTYPES[dtype], stream=device)
    mx.eval(a, b)

    def call() -> float:
        product = mx.matmul(a, b, stream=device)
        mx.eval(product)  # MLX is lazy: evaluating is the synchronisation
        return float(product[0, 0].astype(mx.float32).item())

    return call


def run_modes(spec: ModelSpec, device_class: str) -> tuple[str, ...]:
    # The named ways this port runs the same function, its default (what runs before a machine has
    # measured) first: shared/measure/modes.py times each on this machine and spec and keeps the
    # fastest that passes the equivalence gate.
    # MLX: attention through mx.fast.scaled_dot_product_attention (`fused`) or softmax(q k^T) v
    # (`explicit`).
    return ATTENTION_PATHS


def call(model: Any, prepared: Any, taps: Taps = NO_TAPS) -> mx.array:
    # The model on what `prepare` made: images, or a naflex or packed batch's (patches, attention
    # mask, pool mask, grids, rotary rows).
    x, key_mask, pools, grids, rows, windows, merges, positions = (
        prepared if isinstance(prepared, tuple) else (prepared, *[None] * 7))
    return model(x, taps, key_mask, pools, grids, rows, windows, merges, positions)


class Port:
    framework = FRAMEWORK

    def __init__(self, spec: ModelSpec, device: str = "cpu", precision: Precision = FLOAT32) -> None:
        self.settings = pin_precision(allow_tf32=precision.tf32)
        self.spec, self.device_class, self.precision = spec, device, precision
        if device not in available_devices():
            raise FrameworkUnavailable(
                f"mlx: device {device!r} is not available here (available: {', '.join(available_devices())})")
        refusal = rung_refusal(FRAMEWORK, precision, device)  # MLX has no mixed precision (ports/__init__.py)
        if refusal:
            raise FrameworkUnavailable(refusal)
        self.param_dtype = DTYPES[precision.param_dtype]
        self.device = mx.cpu if device == "cpu" else mx.gpu
        # MLX arrays have no device: the default device decides where every op runs, process-wide
        # (each framework runs in its own process).
        mx.set_default_device(self.device)
        self.model = VisionTransformer(spec)
        self.model.eval()  # MLX modules start in training mode (dropout on)
        mx.eval(self.model.parameters())
        self.set_mode(run_modes(spec, device)[0])  # the default until a measurement chooses

    # ---- weights ----------------------------------------------------------------------
    def load(self, tensors: Tensors) -> None:
        check_tensors(self.spec, tensors)
        transfer.load_canonical(self.model, tensors)
        if self.param_dtype != mx.float32:  # pure: MLX's one way, every parameter in the low dtype
            self.model.set_dtype(self.param_dtype)

    def export(self) -> Tensors:
        return transfer.export_canonical(self.model)

    def param_count(self) -> int:
        return sum(int(p.size) for _, p in tree_flatten(self.model.parameters()))

    # ---- running ----------------------------------------------------------------------
    def prepare(self, images: np.ndarray) -> mx.array | tuple[mx.array, ...]:
        """Canonical NHWC float32 -> an mx.array (NHWC is MLX's layout; memory is unified), in the
        parameter dtype; a naflex or packed batch -> its patches, attention mask, pool mask, image grids
        (shared/core/batching.py), each token's rotary row (shared/core/rotary.py), the window
        mask, the merger's gather and each token's row of the resized position tables (None
        without window attention, a merger, a learned table)."""
        check_images(self.spec, images)
        if self.spec.batching != "fixed":
            patches = mx.array(np.ascontiguousarray(images["patches"])).astype(self.param_dtype)
            masks = tuple(None if m is None else mx.array(np.ascontiguousarray(m)) for m in (
                attention_mask(self.spec, images), pool_mask(self.spec, images), images["grid"],
                token_rows(self.spec, images), window_mask(self.spec, images),
                merge_index(self.spec, images), position_rows(self.spec, images)))
            mx.eval(patches, *(m for m in masks if m is not None))
            return patches, *masks
        x = mx.array(np.ascontiguousarray(images, dtype=np.float32)).astype(self.param_dtype)
        mx.eval(x)
        return x

    def forward(self, prepared: Any, train: bool = False) -> mx.array:
        self.model.train(train)  # dropout is active only in train mode
        return call(self.model, prepared)

    def set_mode(self, mode: str) -> None:
        """Run every later forward (eager, compiled, training) in `mode`, one of `run_modes`."""
        modes = run_modes(self.spec, self.device_class)
        if mode not in modes:
            raise InputError(f"mode {mode!r} is not one of {self.framework}'s: {', '.join(modes)}")
        self.mode = mode
        pool = [self.model.pool] if self.model.pool is not None else []
        for layer in [*self.model.blocks, *pool]:  # the attention path is the mode
            layer.attn.attention_path = mode

    def compiled_forward(self) -> Callable[[mx.array], mx.array]:
        """Eval-mode forward under mx.compile. inputs=model.state: the parameters are inputs of
        the compiled graph, not constants frozen at the first trace, so a later load() holds."""
        self.model.eval()
        model = self.model

        @partial(mx.compile, inputs=model.state)
        def run(prepared: Any) -> mx.array:
            return call(model, prepared)

        return run

    def sync(self, result: Any = None) -> None:
        # MLX is lazy: nothing is computed until mx.eval (or a read) asks for it.
        if result is not None:
            mx.eval(result)
        mx.synchronize()

    def to_numpy(self, result: mx.array) -> np.ndarray:
        # NumPy has no bfloat16: low-precision results come out as float32 (exactly).
        return np.array(result.astype(mx.float32), copy=True)

    def logits(self, images: np.ndarray, train: bool = False) -> np.ndarray:
        return self.to_numpy(self.forward(self.prepare(images), train=train))

    def intermediates(self, images: np.ndarray) -> dict[str, np.ndarray]:
        return {name: self.to_numpy(t) for name, t in self.taps(images).items()}

    def tap_dtypes(self, images: np.ndarray) -> dict[str, str]:
        """The dtype each named intermediate was computed in, as the framework reports it."""
        return {name: str(t.dtype).removeprefix("mlx.core.") for name, t in self.taps(images).items()}

    def taps(self, images: np.ndarray) -> dict[str, mx.array]:
        taps = Taps()
        self.model.eval()
        call(self.model, self.prepare(images), taps)
        return taps.tensors

    def loss_and_gradients(self, images: np.ndarray, labels: np.ndarray) -> tuple[float, Tensors]:
        """Mean cross-entropy from logits and its gradients in the canonical layout (eval mode:
        dropout off, so the ports are comparable)."""
        self.model.eval()
        x, y = self.prepare(images), mx.array(np.asarray(labels, dtype=np.int32))

        def loss_fn(model: VisionTransformer) -> mx.array:
            # nn.losses.cross_entropy defaults to reduction='none': the mean is explicit.
            logits = call(model, x).astype(mx.float32)  # the loss in float32
            return nn.losses.cross_entropy(logits, y, reduction="mean")

        loss, grads = nn.value_and_grad(self.model, loss_fn)(self.model)
        mx.eval(loss, grads)
        return float(loss), transfer.export_gradients(self.model, grads)
