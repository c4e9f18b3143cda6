"""The common port interface (shared/runtime/contract.py) for Flax (flax.nnx) on JAX."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import flax
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from ports.flax import transfer
from ports.flax.model import ATTENTION_PATHS, VisionTransformer
from shared.core.batching import attention_mask, merge_index, pool_mask, position_rows, window_mask
from shared.core.inputs import check_images
from shared.core.precision import FLOAT32, Precision
from shared.core.rotary import token_rows
from shared.core.spec import ModelSpec
from shared.core.taps import NO_TAPS, Taps
from shared.core.weights import Tensors, check_tensors
from shared.errors import InputError

FRAMEWORK = "flax"


def pin_precision(allow_tf32: bool = False) -> dict[str, Any]:
    # 'highest' keeps fp32 matmuls in fp32 on GPUs (no effect on CPU, where XLA is already fp32);
    # 'tensorfloat32' only when asked for.
    jax.config.update("jax_default_matmul_precision", "tensorfloat32" if allow_tf32 else "highest")
    return {"jax_default_matmul_precision": jax.config.jax_default_matmul_precision}


def set_threads(threads: int) -> dict[str, int]:
    # XLA:CPU has no thread-count switch that holds (XLA_FLAGS did not cap it here); only the CPU
    # affinity of the process does, which the caller sets before jax starts. Report what holds.
    return {"affinity": len(os.sched_getaffinity(0))}


def available_devices() -> list[str]:
    platforms = {d.platform.lower() for d in jax.devices()}
    if platforms & {"gpu", "cuda"}:
        return ["cuda", "cpu"]
    if "metal" in platforms:
        return ["metal", "cpu"]
    return ["cpu"]


def version_info() -> dict[str, str]:
    return {"jax": jax.__version__, "flax": flax.__version__, "optax": optax.__version__}


def device_name(device_class: str) -> str | None:
    # An accelerator's name as the framework reports it; None where it gives none (the caller
    # names CPUs from the operating system).
    if device_class == "cpu":
        return None
    return str(jax.devices()[0].device_kind)


def allocator_peak(device_class: str) -> tuple[int | None, str]:
    # (bytes, source) from the framework's own allocator, or (None, why not): never estimated.
    stats = jax.devices()[0].memory_stats()
    if stats and "peak_bytes_in_use" in stats:
        return int(stats["peak_bytes_in_use"]), "jax Device.memory_stats()['peak_bytes_in_use']"
    return None, "jax Device.memory_stats() gives no peak on this device"


def gemm_call(m: int, k: int, n: int, device_class: str, dtype: str = "float32",
              mode: str | None = None) -> Callable[[], Any]:
    # One synchronised (m, k) @ (k, n) in `dtype` on the device, with the framework's own matmul
    # as the run's `mode` runs it: shared/measure/roofline.py times it at the run's threads and
    # compute dtype for the roofline.
    # `mode` leaves the product as it is: Flax's modes choose the attention path, and the dense
    # matmuls measured here (flops.gemm_shapes) run the same XLA dot in each.
    device = jax.devices({"cpu": "cpu", "cuda": "gpu", "metal": "METAL"}[device_class])[0]
    rng = np.random.default_rng(0)
    a = jax.device_put(rng.standard_normal((m, k), dtype=np.float32), device).astype(dtype)
    b = jax.device_put(rng.standard_normal((k, n), dtype=np.float32), device).astype(dtype)
    product = jax.jit(jnp.matmul)

    def call() -> jax.Array:
        return product(a, b).block_until_ready()

    return call


def run_modes(spec: ModelSpec, device_class: str) -> tuple[str, ...]:
    # The named ways this port runs the same function, its default (what runs before a machine has
    # measured) first: shared/measure/modes.py times each on this machine and spec and keeps the
    # fastest that passes the equivalence gate.
    # Flax: attention through jax.nn.dot_product_attention (`fused`: JAX picks the implementation,
    # XLA's on a CPU, cuDNN's where it can; with attention dropout nnx takes its einsum path anyway)
    # or nnx's einsum, softmax, einsum (`explicit`).
    return ATTENTION_PATHS


def call(model: Any, prepared: Any, taps: Taps = NO_TAPS) -> jax.Array:
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
        platform = {"cpu": "cpu", "cuda": "gpu", "metal": "METAL"}[device]
        self.device = jax.devices(platform)[0]
        # Flax's mixed precision: a compute `dtype` on the layers beside float32 parameters.
        compute = jnp.dtype(precision.dtype) if precision.mode == "mixed" else None
        self.param_dtype = jnp.dtype(precision.param_dtype)
        with jax.default_device(self.device):
            self.model = VisionTransformer(spec, nnx.Rngs(0, dropout=1), dtype=compute)
        self.model.eval()
        self.set_mode(run_modes(spec, device)[0])  # the default until a measurement chooses

    # ---- weights ----------------------------------------------------------------------
    def load(self, tensors: Tensors) -> None:
        check_tensors(self.spec, tensors)
        with jax.default_device(self.device):
            transfer.load_canonical(self.model, tensors)
            if self.param_dtype != jnp.float32:  # pure: every floating state in the low dtype
                state = nnx.state(self.model)
                nnx.update(self.model, jax.tree.map(self._cast, state))

    def _cast(self, value: jax.Array) -> jax.Array:
        return value.astype(self.param_dtype) if jnp.issubdtype(value.dtype, jnp.floating) else value

    def export(self) -> Tensors:
        return transfer.export_canonical(self.model)

    def param_count(self) -> int:
        return sum(int(np.prod(x.shape)) for x in jax.tree.leaves(nnx.state(self.model, nnx.Param)))

    # ---- running ----------------------------------------------------------------------
    def prepare(self, images: np.ndarray) -> jax.Array | tuple[jax.Array, ...]:
        """Canonical NHWC float32 -> a jax.Array on the device (NHWC is Flax's layout), in the
        parameter dtype; a naflex or packed batch -> its patches, attention mask, pool mask, image grids
        (shared/core/batching.py), each token's rotary row (shared/core/rotary.py), the window
        mask, the merger's gather and each token's row of the resized position tables (None
        without window attention, a merger, a learned table)."""
        check_images(self.spec, images)
        if self.spec.batching != "fixed":
            patches = jax.device_put(np.asarray(images["patches"], dtype=np.float32), self.device)
            masks = (attention_mask(self.spec, images), pool_mask(self.spec, images), images["grid"],
                     token_rows(self.spec, images), window_mask(self.spec, images),
                     merge_index(self.spec, images), position_rows(self.spec, images))
            return patches.astype(self.param_dtype), *(
                None if m is None else jax.device_put(np.ascontiguousarray(m), self.device) for m in masks)
        return jax.device_put(np.asarray(images, dtype=np.float32), self.device).astype(self.param_dtype)

    def forward(self, prepared: Any, train: bool = False) -> jax.Array:
        if train:  # dropout is active only in train mode (nnx.Dropout is active by default)
            self.model.train()
        else:
            self.model.eval()
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

    def compiled_forward(self) -> Callable[[jax.Array], jax.Array]:
        """Eval-mode forward under jax.jit, on the split (graph, state) pair: nnx.jit would redo
        the split/merge bookkeeping in Python on every call."""
        self.model.eval()
        graphdef, state = nnx.split(self.model)

        @jax.jit
        def apply(state: nnx.State, x: Any) -> jax.Array:
            return call(nnx.merge(graphdef, state), x)

        return lambda x: apply(state, x)

    def sync(self, result: Any = None) -> None:
        if result is not None:
            jax.block_until_ready(result)

    def to_numpy(self, result: jax.Array) -> np.ndarray:
        # NumPy has no bfloat16: low-precision results come out as float32 (exactly).
        return np.asarray(result, dtype=np.float32)

    def logits(self, images: np.ndarray, train: bool = False) -> np.ndarray:
        return self.to_numpy(self.forward(self.prepare(images), train=train))

    def intermediates(self, images: np.ndarray) -> dict[str, np.ndarray]:
        return {name: self.to_numpy(t) for name, t in self.taps(images).items()}

    def tap_dtypes(self, images: np.ndarray) -> dict[str, str]:
        """The dtype each named intermediate was computed in, as the framework reports it."""
        return {name: str(t.dtype) for name, t in self.taps(images).items()}

    def taps(self, images: np.ndarray) -> dict[str, jax.Array]:
        taps = Taps()
        self.model.eval()
        call(self.model, self.prepare(images), taps)
        return taps.tensors

    def loss_and_gradients(self, images: np.ndarray, labels: np.ndarray) -> tuple[float, Tensors]:
        """Mean cross-entropy from logits and its gradients in the canonical layout (eval mode:
        dropout off, so the ports are comparable)."""
        self.model.eval()
        x, y = self.prepare(images), jnp.asarray(labels, dtype=jnp.int32)

        def loss_fn(model: VisionTransformer) -> jax.Array:
            # optax returns per-example losses: the mean is explicit, as torch's default.
            logits = call(model, x).astype(jnp.float32)  # the loss in float32
            return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

        loss, grads = nnx.value_and_grad(loss_fn)(self.model)
        return float(loss), transfer.export_gradients(self.model, grads)
