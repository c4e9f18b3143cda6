"""The common port interface (shared/runtime/contract.py) for Keras 3, on whichever backend is active."""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial
from typing import Any

import keras
import numpy as np
from keras import ops

from ports.keras import transfer
from ports.keras.model import VisionTransformer
from shared.core.batching import attention_mask, merge_index, pool_mask, position_rows, window_mask
from shared.core.inputs import check_images
from shared.core.precision import FLOAT32, Precision
from shared.core.rotary import token_rows
from shared.core.spec import ModelSpec
from shared.core.taps import NO_TAPS, Taps
from shared.core.weights import Tensors, check_tensors
from shared.errors import FrameworkUnavailable, InputError

FRAMEWORK = "keras"
BACKEND = keras.backend.backend()


def pin_precision(allow_tf32: bool = False) -> dict[str, Any]:
    # fp32 matmuls stay fp32: TF enables TF32 on GPUs by default, JAX's default precision may use
    # reduced-precision passes on GPUs; torch's 'highest' keeps CPUs with AMX off bf16.
    settings: dict[str, Any] = {"backend": BACKEND}
    if BACKEND == "tensorflow":
        import tensorflow as tf

        tf.config.experimental.enable_tensor_float_32_execution(allow_tf32)
        settings["tf32"] = tf.config.experimental.tensor_float_32_execution_enabled()
    elif BACKEND == "jax":
        import jax

        jax.config.update("jax_default_matmul_precision", "tensorfloat32" if allow_tf32 else "highest")
        settings["jax_default_matmul_precision"] = jax.config.jax_default_matmul_precision
    elif BACKEND == "torch":
        import torch

        torch.set_float32_matmul_precision("high" if allow_tf32 else "highest")
        torch.backends.cuda.matmul.allow_tf32 = allow_tf32
        settings["float32_matmul_precision"] = torch.get_float32_matmul_precision()
    return settings


def set_threads(threads: int) -> dict[str, int]:
    if BACKEND == "tensorflow":
        import tensorflow as tf

        try:  # only settable before the TF runtime starts
            tf.config.threading.set_intra_op_parallelism_threads(threads)
            tf.config.threading.set_inter_op_parallelism_threads(threads)
        except RuntimeError:
            pass
        return {"intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
                "inter_op": tf.config.threading.get_inter_op_parallelism_threads()}
    if BACKEND == "torch":
        import torch

        torch.set_num_threads(threads)
        return {"intra_op": torch.get_num_threads(), "inter_op": torch.get_num_interop_threads()}
    return {"affinity": len(os.sched_getaffinity(0))}  # JAX: only CPU affinity caps its threads


def available_devices() -> list[str]:
    if BACKEND == "tensorflow":
        import tensorflow as tf

        gpus = tf.config.list_physical_devices("GPU")
        if gpus:
            return ["metal" if _is_apple() else "cuda", "cpu"]
    elif BACKEND == "jax":
        import jax

        platforms = {d.platform for d in jax.devices()}
        if "gpu" in platforms or "cuda" in platforms:
            return ["cuda", "cpu"]
        if "METAL" in platforms or "metal" in platforms:
            return ["metal", "cpu"]
    elif BACKEND == "torch":
        import torch

        if torch.cuda.is_available():
            return ["cuda", "cpu"]
    return ["cpu"]


def _is_apple() -> bool:
    import platform

    return platform.system() == "Darwin"


def version_info() -> dict[str, str]:
    return {"keras": keras.__version__, "keras_backend": BACKEND,
            BACKEND: __import__(BACKEND).__version__}


def device_name(device_class: str) -> str | None:
    # An accelerator's name as the framework reports it; None where it gives none (the caller
    # names CPUs from the operating system).
    if device_class == "cpu":
        return None
    if BACKEND == "tensorflow":
        import tensorflow as tf

        gpus = tf.config.list_physical_devices("GPU")
        if gpus:
            details = tf.config.experimental.get_device_details(gpus[0])
            return str(details.get("device_name", gpus[0].name))
    elif BACKEND == "jax":
        import jax

        return str(jax.devices()[0].device_kind)
    elif BACKEND == "torch":
        import torch

        if device_class == "cuda":
            return torch.cuda.get_device_name(0)
    return None


def allocator_peak(device_class: str) -> tuple[int | None, str]:
    # (bytes, source) from the framework's own allocator, or (None, why not): never estimated.
    if BACKEND == "tensorflow":
        import tensorflow as tf

        name = "GPU:0" if device_class == "cuda" else "CPU:0"
        info = tf.config.experimental.get_memory_info(name)
        return int(info["peak"]), f"tf.config.experimental.get_memory_info({name!r})['peak']"
    if BACKEND == "jax":
        import jax

        stats = jax.devices()[0].memory_stats()
        if stats and "peak_bytes_in_use" in stats:
            return int(stats["peak_bytes_in_use"]), "jax Device.memory_stats()['peak_bytes_in_use']"
        return None, "jax Device.memory_stats() gives no peak on this device"
    import torch

    if device_class == "cuda":
        return int(torch.cuda.max_memory_allocated()), "torch.cuda.max_memory_allocated"
    return None, "torch keeps no allocator statistics on CPU"


def gemm_call(m: int, k: int, n: int, device_class: str, dtype: str = "float32",
              mode: str | None = None) -> Callable[[], Any]:
    # One synchronised (m, k) @ (k, n) in `dtype` on the device, with the framework's own matmul
    # as the run's `mode` runs it: shared/measure/roofline.py times it at the run's threads and
    # compute dtype for the roofline.
    device = {"cpu": "cpu", "cuda": "gpu:0", "metal": "gpu:0"}[device_class]
    rng = np.random.default_rng(0)
    with keras.device(device):
        a = ops.convert_to_tensor(rng.standard_normal((m, k), dtype=np.float32), dtype)
        b = ops.convert_to_tensor(rng.standard_normal((k, n), dtype=np.float32), dtype)
    product = ops.matmul
    if BACKEND == "tensorflow":  # in a graph, as the compiled forward runs it: no per-op dispatch
        import tensorflow as tf

        # under XLA in the `xla` mode, as compiled_forward: XLA's GEMM, not oneDNN's, is then the
        # ceiling (oneDNN's, limited to AVX2, put an XLA forward at 164% of its "roof")
        product = tf.function(ops.matmul, jit_compile=mode == "xla")
    elif BACKEND == "jax":
        import jax

        product = jax.jit(ops.matmul)

    def call() -> float:
        with keras.device(device):
            return float(ops.convert_to_numpy(ops.cast(product(a, b)[0, 0], "float32")))  # read back: waits

    return call


def run_modes(spec: ModelSpec, device_class: str) -> tuple[str, ...]:
    # The named ways this port runs the same function, its default (what runs before a machine has
    # measured) first: shared/measure/modes.py times each on this machine and spec and keeps the
    # fastest that passes the equivalence gate.
    # Keras on TensorFlow: a tf.function graph (`graph`) or XLA (`xla`); graph first on a CPU, as
    # Keras' jit_compile="auto" chooses. Which is faster depends on the CPU and TensorFlow: XLA was
    # 2.7x slower on ViT-B/16 on one machine, 0.90x (0.54x with oneDNN limited to AVX2) on another.
    # On JAX (jax.jit) and torch (torch.compile) the port has one mode.
    if BACKEND != "tensorflow":
        return ("jit",) if BACKEND == "jax" else ("inductor",)
    return ("graph", "xla") if device_class == "cpu" else ("xla", "graph")


def call(model: Any, prepared: Any, taps: Taps = NO_TAPS, training: bool = False) -> Any:
    # The model on what `prepare` made: images, or a naflex or packed batch's (patches, attention
    # mask, pool mask, grids, rotary rows).
    x, key_mask, pools, grids, rows, windows, merges, positions = (
        prepared if isinstance(prepared, tuple) else (prepared, *[None] * 7))
    return model(x, training=training, taps=taps, key_mask=key_mask, pool_mask=pools, grids=grids,
                 rope_rows=rows, window_mask=windows, merge_index=merges, position_rows=positions)


class Port:
    framework = FRAMEWORK

    def __init__(self, spec: ModelSpec, device: str = "cpu", precision: Precision = FLOAT32) -> None:
        self.settings = pin_precision(allow_tf32=precision.tf32)
        self.spec, self.device_class, self.precision = spec, device, precision
        # "cpu", not "cpu:0": Keras' torch backend moves each new Parameter with .to("cpu:0"),
        # which copies it into a plain tensor (int seed states then fail to re-wrap).
        self.device = {"cpu": "cpu", "cuda": "gpu:0", "metal": "gpu:0"}[device]
        # Keras' mixed precision: dtype policies, "mixed_bfloat16" on the layers that compute.
        mixed = precision.mode == "mixed"
        compute = f"mixed_{precision.dtype}" if mixed else precision.dtype
        self.param_dtype = precision.param_dtype
        with keras.device(self.device):
            self.model = VisionTransformer(spec, compute=compute, dtype=self.param_dtype)
            # Built on one image (of a naflex or packed batch: one sequence's patch rows, every token on
            # the rotary table's first row and on its resized positions' first, and gathered in its own
            # place by a merger; each image of one patch, as its positions are resized to its grid).
            rows = (1, spec.derived.num_patches, spec.derived.patch_features)
            image = (1, spec.image_height, spec.image_width, spec.channels)
            learned = spec.batching != "fixed" and spec.pos_embed == "learned"
            grids = ops.ones((1, spec.pack_images, 2), "int32") if learned else None
            positions = ops.zeros((1, spec.derived.seq_len), "int32") if learned else None
            rope_rows = None if spec.batching == "fixed" else ops.zeros((1, spec.derived.seq_len), "int32")
            merges = ops.arange(spec.derived.num_patches)[None] if spec.merge_size > 1 else None
            self.model(np.zeros(image if spec.batching == "fixed" else rows, "float32"), grids=grids,
                       rope_rows=rope_rows, merge_index=merges, position_rows=positions)
        self.set_mode(run_modes(spec, device)[0])  # the default until a measurement chooses

    # ---- weights ----------------------------------------------------------------------
    def load(self, tensors: Tensors) -> None:
        check_tensors(self.spec, tensors)
        transfer.load_canonical(self.model, tensors)

    def export(self) -> Tensors:
        return transfer.export_canonical(self.model)

    def param_count(self) -> int:
        return int(self.model.count_params())

    # ---- running ----------------------------------------------------------------------
    def prepare(self, images: np.ndarray) -> Any:
        """Canonical NHWC float32 -> a backend tensor on the device (NHWC is Keras' layout), in the
        parameter dtype; a naflex or packed batch -> its patches, attention mask, pool mask, image grids
        (shared/core/batching.py), each token's rotary row (shared/core/rotary.py), the window
        mask, the merger's gather and each token's row of the resized position tables (None
        without window attention, a merger, a learned table)."""
        check_images(self.spec, images)
        with keras.device(self.device):
            if self.spec.batching != "fixed":
                patches = np.asarray(images["patches"], dtype=np.float32)
                masks = (attention_mask(self.spec, images), pool_mask(self.spec, images),
                         np.ascontiguousarray(images["grid"]), token_rows(self.spec, images),
                         window_mask(self.spec, images), merge_index(self.spec, images),
                         position_rows(self.spec, images))
                return ops.convert_to_tensor(patches, self.param_dtype), *(
                    None if m is None else ops.convert_to_tensor(m) for m in masks)
            return ops.convert_to_tensor(np.asarray(images, dtype=np.float32), self.param_dtype)

    def forward(self, prepared: Any, train: bool = False) -> Any:
        with keras.device(self.device):
            return call(self.model, prepared, training=train)  # dropout is active only in training

    def set_mode(self, mode: str) -> None:
        """Run every later forward (eager, compiled, training) in `mode`, one of `run_modes`."""
        modes = run_modes(self.spec, self.device_class)
        if mode not in modes:
            raise InputError(f"mode {mode!r} is not one of {self.framework}'s: {', '.join(modes)}")
        self.mode = mode  # the compiler is the mode: compiled_forward reads it; attention stays fused

    def compiled_forward(self) -> Callable[[Any], Any]:
        """Eval-mode forward under the backend's compiler: a tf.function graph on TensorFlow (with
        XLA in the `xla` mode), jax.jit on JAX, torch.compile on torch."""
        if BACKEND == "tensorflow":
            import tensorflow as tf

            # The mode decides XLA (run_modes: off by default on a CPU, measured per machine).
            return tf.function(lambda x: call(self.model, x), jit_compile=self.mode == "xla")
        if BACKEND == "jax":
            import jax

            trainable = [v.value for v in self.model.trainable_variables]
            frozen = [v.value for v in self.model.non_trainable_variables]
            jitted = jax.jit(lambda tv, ntv, x: call(partial(self.model.stateless_call, tv, ntv), x)[0])
            return lambda x: jitted(trainable, frozen, x)
        import torch

        compiled = torch.compile(self.model)

        def run(x: Any) -> Any:
            with torch.no_grad():
                return call(compiled, x)

        return run

    def sync(self, result: Any = None) -> None:
        if result is None:
            return
        if isinstance(result, tuple):  # what `prepare` made of a naflex or packed batch: each part
            for part in result:
                self.sync(part)
        elif BACKEND == "jax":
            result.block_until_ready()
        elif BACKEND == "torch":
            import torch

            if torch.cuda.is_available():
                torch.cuda.synchronize()
        else:  # TensorFlow: reading the value back is its synchronisation
            ops.convert_to_numpy(result)

    def to_numpy(self, result: Any) -> np.ndarray:
        # NumPy has no bfloat16: low-precision results come out as float32 (exactly).
        return np.asarray(ops.convert_to_numpy(ops.cast(result, "float32")))

    def logits(self, images: np.ndarray, train: bool = False) -> np.ndarray:
        return self.to_numpy(self.forward(self.prepare(images), train=train))

    def intermediates(self, images: np.ndarray) -> dict[str, np.ndarray]:
        return {name: self.to_numpy(t) for name, t in self.taps(images).items()}

    def tap_dtypes(self, images: np.ndarray) -> dict[str, str]:
        """The dtype each named intermediate was computed in, as the framework reports it."""
        return {name: keras.backend.standardize_dtype(t.dtype) for name, t in self.taps(images).items()}

    def taps(self, images: np.ndarray) -> dict[str, Any]:
        taps = Taps()
        with keras.device(self.device):
            call(self.model, self.prepare(images), taps)
        return taps.tensors

    def loss_and_gradients(self, images: np.ndarray, labels: np.ndarray) -> tuple[float, Tensors]:
        """Mean cross-entropy from logits and its gradients in the canonical layout (eval mode:
        dropout off, so the ports are comparable)."""
        # training=False is Keras' eval mode. Keras has no backend-neutral gradient API, so this
        # is the one place the backend shows.
        x, y = self.prepare(images), np.asarray(labels, dtype=np.int32)
        # from_logits=True: Keras' sparse cross-entropy defaults to probabilities (divergences #32).
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        variables = self.model.trainable_variables
        if BACKEND != "tensorflow":
            raise FrameworkUnavailable(
                f"loss_and_gradients on the Keras port needs KERAS_BACKEND=tensorflow, not {BACKEND!r}"
            )
        import tensorflow as tf

        with tf.GradientTape() as tape:
            loss = loss_fn(y, ops.cast(call(self.model, x), "float32"))  # the loss in float32
        grads = tape.gradient(loss, variables)
        by_id = {id(v): g for v, g in zip(variables, grads, strict=True)}
        return float(loss), transfer.export_gradients(self.model, by_id)
