"""A user's own model of each framework on a naflex and a packed batch: ports/<fw>/user.py calls its
forward with the (patches, valid, grids) a patch batch is given as (shared/core/forward_io.py),
positionally, eagerly, under the framework's compiler and when `trace` captures a layer, and reads
a row per image. Flax's two other forms too: a linen (module, variables) pair, and an equinox
module, which takes one sequence under jax.vmap (a packed sequence's rows per image flattened).
The model is a toy (the valid patches' sum through one projection, a sequence's row repeated for
each image it packs), so that the call convention alone is tested; a real tower on these batches
is tests/test_batching_libraries.py's (torch, and the ports themselves in every framework)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ports import NATIVE, load_port_part
from shared.core.inputs import probe_batch
from shared.core.presets import get_preset

PRESETS = ("naflex-tiny", "packed-tiny")
# ports/flax/user.py's other two forms of a Flax model: a linen (module, variables) pair, and an
# equinox module, which takes one example (one sequence) and is run under jax.vmap
FORMS = (*NATIVE, "linen", "equinox")


def toy(framework: str, weight: np.ndarray) -> Any:
    """The framework's module whose forward takes (patches, valid, grids): a bias-free projection
    `proj` of every patch (the weight (in, out)), summed over the valid ones."""
    if framework == "torch":
        import torch

        class TorchToy(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.proj = torch.nn.Linear(*weight.shape, bias=False)
                self.proj.weight.data = torch.from_numpy(weight.T.copy())

            def forward(self, patches: Any, valid: Any, grids: Any) -> Any:
                out = (self.proj(patches) * valid[..., None]).sum(1)
                return out.repeat_interleave(grids.shape[1], dim=0) if grids.ndim == 3 else out

        return TorchToy()
    if framework == "keras":
        import keras
        from keras import ops

        class KerasToy(keras.Model):
            def __init__(self) -> None:
                super().__init__()
                self.proj = keras.layers.Dense(weight.shape[1], use_bias=False, name="proj")
                self.proj.build((None, None, weight.shape[0]))
                self.proj.kernel.assign(weight)

            def call(self, patches: Any, valid: Any, grids: Any, training: bool = False) -> Any:
                out = ops.sum(self.proj(patches) * ops.cast(valid, patches.dtype)[..., None], axis=1)
                return ops.repeat(out, grids.shape[1], axis=0) if len(grids.shape) == 3 else out

        return KerasToy()
    if framework == "flax":
        import jax.numpy as jnp
        from flax import nnx

        class FlaxToy(nnx.Module):
            def __init__(self) -> None:
                self.proj = nnx.Linear(*weight.shape, use_bias=False, rngs=nnx.Rngs(0))
                self.proj.kernel.set_value(jnp.asarray(weight))

            def __call__(self, patches: Any, valid: Any, grids: Any) -> Any:
                out = (self.proj(patches) * valid[..., None]).sum(1)
                return jnp.repeat(out, grids.shape[1], axis=0) if grids.ndim == 3 else out

        return FlaxToy()
    if framework == "linen":
        import jax.numpy as jnp
        from flax import linen

        class LinenToy(linen.Module):
            @linen.compact
            def __call__(self, patches: Any, valid: Any, grids: Any) -> Any:
                projected = linen.Dense(weight.shape[1], use_bias=False, name="proj")(patches)
                out = (projected * valid[..., None]).sum(1)
                return jnp.repeat(out, grids.shape[1], axis=0) if grids.ndim == 3 else out

        return LinenToy(), {"params": {"proj": {"kernel": jnp.asarray(weight)}}}
    if framework == "equinox":
        import equinox as eqx
        import jax
        import jax.numpy as jnp

        class Projection(eqx.Module):  # over a sequence's patches: trace records it outside any vmap
            weight: jax.Array

            def __call__(self, x: Any) -> Any:
                return x @ self.weight

        class EquinoxToy(eqx.Module):
            proj: Projection

            def __init__(self) -> None:
                self.proj = Projection(jnp.asarray(weight))

            def __call__(self, patches: Any, valid: Any, grids: Any) -> Any:  # one sequence
                out = (self.proj(patches) * valid[:, None]).sum(0)
                return jnp.repeat(out[None], grids.shape[0], axis=0) if grids.ndim == 2 else out

        return EquinoxToy()
    import mlx.core as mx
    import mlx.nn

    class MlxToy(mlx.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = mlx.nn.Linear(*weight.shape, bias=False)
            self.proj.weight = mx.array(weight.T)

        def __call__(self, patches: Any, valid: Any, grids: Any) -> Any:
            out = (self.proj(patches) * valid[..., None]).sum(axis=1)
            return mx.repeat(out, grids.shape[1], axis=0) if grids.ndim == 3 else out

    return MlxToy()


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("framework", FORMS)
def test_a_patch_batch_is_passed_positionally_and_read_a_row_per_image(framework: str, preset: str) -> None:
    images = probe_batch(get_preset(preset), batch=3)
    patches, grids = images["patches"].astype(np.float64), np.asarray(images["grid"])
    weight = np.random.default_rng(0).standard_normal((patches.shape[-1], 5)).astype(np.float32)
    real = grids.prod(-1) if grids.ndim == 2 else grids.prod(-1).sum(-1)
    valid = np.arange(patches.shape[1])[None] < real[:, None]
    expected = (patches * valid[..., None]).sum(1) @ weight
    if grids.ndim == 3:
        expected = np.repeat(expected, grids.shape[1], axis=0)
    user = load_port_part("flax" if framework in ("linen", "equinox") else framework, "user")
    model = toy(framework, weight)
    for forward in (lambda x: user.run(model, x, "NHWC", None), user.compiled(model, "NHWC", None)):
        got = forward(images)
        assert got.shape == expected.shape == (len(images) * (grids.shape[1] if grids.ndim == 3 else 1), 5)
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    # trace's taps: the projection's output for every patch of every sequence, (B, max_patches, 5)
    tap = user.capture(model, images, "NHWC", ["proj"])["proj"]
    np.testing.assert_allclose(tap, patches @ weight, rtol=1e-4, atol=1e-4)
