"""The common port interface (shared/runtime/contract.py) for PyTorch."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812

from ports.torch import transfer
from ports.torch.model import ATTENTION_PATHS, NARROW_HEAD, VisionTransformer
from shared.core.batching import attention_mask, merge_index, pool_mask, position_rows, window_mask
from shared.core.inputs import check_images
from shared.core.precision import FLOAT32, Precision
from shared.core.rotary import token_rows
from shared.core.spec import ModelSpec
from shared.core.taps import NO_TAPS, Taps
from shared.core.weights import Tensors, check_tensors
from shared.errors import InputError

FRAMEWORK = "torch"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def pin_precision(allow_tf32: bool = False) -> dict[str, Any]:
    # 'highest' keeps fp32 matmuls in fp32; 'medium' runs bf16 on CPUs with AMX (divergences #36)
    # and 'high' allows TF32 on GPUs, only when asked for.
    torch.set_float32_matmul_precision("high" if allow_tf32 else "highest")
    torch.backends.cuda.matmul.allow_tf32 = allow_tf32
    torch.backends.cudnn.allow_tf32 = allow_tf32
    return {"float32_matmul_precision": torch.get_float32_matmul_precision()}


def set_threads(threads: int) -> dict[str, int]:
    torch.set_num_threads(threads)
    # Only settable before the first parallel work; the read-back below reports what holds.
    with contextlib.suppress(RuntimeError):
        torch.set_num_interop_threads(threads)
    return {"intra_op": torch.get_num_threads(), "inter_op": torch.get_num_interop_threads()}


def available_devices() -> list[str]:
    devices = ["cpu"]
    if torch.cuda.is_available():
        devices.insert(0, "cuda")
    elif getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        devices.insert(0, "metal")
    return devices


def version_info() -> dict[str, str]:
    return {"torch": torch.__version__}


def device_name(device_class: str) -> str | None:
    # An accelerator's name as the framework reports it; None where it gives none (the caller
    # names CPUs from the operating system).
    if device_class == "cuda":
        return torch.cuda.get_device_name(0)
    return None


def allocator_peak(device_class: str) -> tuple[int | None, str]:
    # (bytes, source) from the framework's own allocator, or (None, why not): never estimated.
    if device_class == "cuda":
        return int(torch.cuda.max_memory_allocated()), "torch.cuda.max_memory_allocated"
    if device_class == "metal":
        return (int(torch.mps.driver_allocated_memory()),
                "torch.mps.driver_allocated_memory at the end (MPS has no peak counter)")
    return None, "torch keeps no allocator statistics on CPU"


def gemm_call(m: int, k: int, n: int, device_class: str, dtype: str = "float32",
              mode: str | None = None) -> Callable[[], Any]:
    # One synchronised (m, k) @ (k, n) in `dtype` on the device, with the framework's own matmul
    # as the run's `mode` runs it: shared/measure/roofline.py times it at the run's threads and
    # compute dtype for the roofline.
    # `mode` leaves the product as it is: torch's modes choose the attention path, and the dense
    # matmuls measured here (flops.gemm_shapes) run the same torch.mm in each.
    device = torch.device({"cpu": "cpu", "cuda": "cuda", "metal": "mps"}[device_class])
    a = torch.randn(m, k, device=device, dtype=DTYPES[dtype])
    b = torch.randn(k, n, device=device, dtype=DTYPES[dtype])

    def call() -> float:
        with torch.no_grad():
            return torch.mm(a, b)[0, 0].item()  # reading one value back waits for the product

    return call


def run_modes(spec: ModelSpec, device_class: str) -> tuple[str, ...]:
    # The named ways this port runs the same function, its default (what runs before a machine has
    # measured) first: shared/measure/modes.py times each on this machine and spec and keeps the
    # fastest that passes the equivalence gate.
    # torch: attention through SDPA (`fused`) or softmax(q k^T) v (`explicit`); explicit first for
    # narrow heads on a CPU, where SDPA's flash kernel was 1.45x slower (archive-torch, 8-wide).
    narrow = spec.head_dim <= NARROW_HEAD and device_class == "cpu"
    return ("explicit", "fused") if narrow else ATTENTION_PATHS


def call(model: Any, prepared: Any, taps: Taps = NO_TAPS) -> torch.Tensor:
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
        self.device = torch.device({"cpu": "cpu", "cuda": "cuda", "metal": "mps"}[device])
        self.dtype = DTYPES[precision.dtype]  # the compute dtype
        # pure: parameters and buffers in the low dtype; mixed: float32, cast per op by autocast.
        self.param_dtype = DTYPES[precision.param_dtype]
        self.model = VisionTransformer(spec).to(self.device, self.param_dtype).eval()
        self.set_mode(run_modes(spec, device)[0])  # the default until a measurement chooses

    def autocast(self) -> contextlib.AbstractContextManager:
        # torch's mixed precision: matmuls and convolutions in the low dtype inside this context.
        if self.precision.mode != "mixed":
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.dtype)

    # ---- weights ----------------------------------------------------------------------
    def load(self, tensors: Tensors) -> None:
        check_tensors(self.spec, tensors)
        transfer.load_canonical(self.model, tensors)

    def export(self) -> Tensors:
        return transfer.export_canonical(self.model)

    def param_count(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    # ---- running ----------------------------------------------------------------------
    def prepare(self, images: np.ndarray) -> torch.Tensor | tuple[torch.Tensor, ...]:
        """Canonical NHWC float32 -> NCHW on the device (torch's native layout), in the parameter
        dtype; a naflex or packed batch -> its patches, attention mask, pool mask, image grids
        (shared/core/batching.py), each token's rotary row (shared/core/rotary.py), the window
        mask, the merger's gather and each token's row of the resized position tables (None
        without window attention, a merger, a learned table)."""
        check_images(self.spec, images)
        if self.spec.batching != "fixed":
            patches = torch.from_numpy(np.ascontiguousarray(images["patches"]))
            masks = (attention_mask(self.spec, images), pool_mask(self.spec, images), images["grid"],
                     token_rows(self.spec, images), window_mask(self.spec, images),
                     merge_index(self.spec, images), position_rows(self.spec, images))
            return patches.to(self.device, self.param_dtype), *(
                None if m is None else torch.from_numpy(np.ascontiguousarray(m)).to(self.device)
                for m in masks)
        x = torch.from_numpy(np.ascontiguousarray(images, dtype=np.float32))
        return x.permute(0, 3, 1, 2).contiguous().to(self.device, self.param_dtype)

    def forward(self, prepared: Any, train: bool = False) -> torch.Tensor:
        self.model.train(train)  # dropout is active only in train mode
        with torch.set_grad_enabled(train), self.autocast():
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

    def compiled_forward(self) -> Callable[[torch.Tensor], torch.Tensor]:
        """Eval-mode forward under torch.compile (inductor)."""
        self.model.eval()
        compiled = torch.compile(self.model)

        def run(prepared: torch.Tensor) -> torch.Tensor:
            with torch.no_grad(), self.autocast():
                return call(compiled, prepared)

        return run

    def sync(self, result: Any = None) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        elif self.device.type == "mps":
            torch.mps.synchronize()

    def to_numpy(self, result: torch.Tensor) -> np.ndarray:
        # NumPy has no bfloat16: low-precision results come out as float32 (exactly).
        return result.detach().float().cpu().numpy()

    def logits(self, images: np.ndarray, train: bool = False) -> np.ndarray:
        return self.to_numpy(self.forward(self.prepare(images), train=train))

    def intermediates(self, images: np.ndarray) -> dict[str, np.ndarray]:
        return {name: self.to_numpy(t) for name, t in self.taps(images).items()}

    def tap_dtypes(self, images: np.ndarray) -> dict[str, str]:
        """The dtype each named intermediate was computed in, as the framework reports it."""
        return {name: str(t.dtype).removeprefix("torch.") for name, t in self.taps(images).items()}

    def taps(self, images: np.ndarray) -> dict[str, torch.Tensor]:
        taps = Taps()
        self.model.eval()
        with torch.no_grad(), self.autocast():
            call(self.model, self.prepare(images), taps)
        return taps.tensors

    def loss_and_gradients(self, images: np.ndarray, labels: np.ndarray) -> tuple[float, Tensors]:
        """Mean cross-entropy from logits and its gradients in the canonical layout (eval mode:
        dropout off, so the ports are comparable)."""
        self.model.eval()
        self.model.zero_grad(set_to_none=True)
        with self.autocast():
            logits = call(self.model, self.prepare(images))
        target = torch.from_numpy(np.asarray(labels, dtype=np.int64)).to(self.device)
        loss = F.cross_entropy(logits.float(), target, reduction="mean")  # the loss in float32
        loss.backward()
        return float(loss.detach().cpu()), transfer.export_gradients(self.model)
