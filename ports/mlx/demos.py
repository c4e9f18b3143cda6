"""MLX's demonstrations for the divergence catalogue (shared/teaching/*_demos.py): the framework's
own API run on the case a demonstration measures, so the gap it reports is the installed
framework's.

Parallel text: every native port's demos.py (ports/torch, keras, flax and mlx) has `adam_step`; the
other demonstrations exist only where the divergence lives in this framework's API. What the
framework's defaults are is read in defaults.py. Loaded through `ports.load_port_part(name, "demos")`.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import mlx.optimizers as optim
import numpy as np
from mlx import nn
from mlx.utils import tree_map

from ports.mlx.defaults import GELU_NAMES
from shared.core.spec import ModelSpec
from shared.errors import first_line


def adam_step(params: np.ndarray, grads: np.ndarray, lr: float, eps: float, weight_decay: float,
              decoupled: bool = True, bias_correction: bool = True) -> np.ndarray:
    """One step of MLX's AdamW (decoupled=False: Adam with L2 weight decay, the decay added to the
    gradient) from zero moments. bias_correction=True is torch's update; MLX's default is False."""
    p, g = mx.array(params), mx.array(grads)
    if decoupled:
        opt = optim.AdamW(lr, eps=eps, weight_decay=weight_decay, bias_correction=bias_correction)
    else:
        opt, g = optim.Adam(lr, eps=eps, bias_correction=bias_correction), g + weight_decay * p
    tree = {"p": p}
    opt.init(tree)
    out = opt.apply_gradients({"p": g}, tree)["p"]
    return np.array(out, dtype=np.float32)


def clip_grad_norm(grads: list[np.ndarray], max_norm: float) -> list[np.ndarray]:
    """optim.clip_grad_norm on these gradients (it divides by norm + 1e-6)."""
    clipped, _ = optim.clip_grad_norm({str(i): mx.array(g) for i, g in enumerate(grads)}, max_norm)
    return [np.array(clipped[str(i)]) for i in range(len(grads))]


def conv_patch_embed(spec: ModelSpec, weight: np.ndarray, bias: np.ndarray, images: np.ndarray) -> np.ndarray:
    """NHWC images through an nn.Conv2d patch embedding holding `weight` as its (O, H, W, I)
    weight: (B, tokens, dim), float32 (MLX's CPU convolution has no float64)."""
    patch = (spec.patch_height, spec.patch_width)
    conv = nn.Conv2d(spec.channels, spec.dim, patch, stride=patch)
    conv.weight, conv.bias = mx.array(weight.astype(np.float32)), mx.array(bias.astype(np.float32))
    y = conv(mx.array(images.astype(np.float32)))
    return np.array(y.reshape(y.shape[0], -1, y.shape[-1]))


def attention_block(spec: ModelSpec, weights: dict[str, np.ndarray], h: np.ndarray,
                    bias: bool | None) -> np.ndarray:
    """Block 0's canonical attention weights in nn.MultiHeadAttention (float32); bias=None keeps
    MLX's default (no biases: the canonical biases have nowhere to go and are dropped)."""
    kwargs = {} if bias is None else {"bias": bias}
    dims = spec.heads * spec.head_dim
    mha = nn.MultiHeadAttention(dims, spec.heads, query_input_dims=spec.dim, key_input_dims=spec.dim,
                                value_input_dims=spec.dim, value_dims=dims, value_output_dims=spec.dim,
                                **kwargs)
    p = "blocks.0.attn."
    for part, proj in (("query", mha.query_proj), ("key", mha.key_proj), ("value", mha.value_proj)):
        proj.weight = mx.array(weights[p + part + ".kernel"].reshape(spec.dim, -1).T.astype(np.float32))
        if "bias" in proj:
            proj.bias = mx.array(weights[p + part + ".bias"].reshape(-1).astype(np.float32))
    mha.out_proj.weight = mx.array(weights[p + "out.kernel"].reshape(dims, spec.dim).T.astype(np.float32))
    if "bias" in mha.out_proj:
        mha.out_proj.bias = mx.array(weights[p + "out.bias"].astype(np.float32))
    x = mx.array(h.astype(np.float32))
    return np.array(mha(x, x, x))


def gelu_values(x: np.ndarray) -> dict[str, np.ndarray]:
    """x through nn.GELU under every approx name it accepts."""
    return {name: np.array(nn.GELU(approx=name)(mx.array(x.astype(np.float32)))) for name in GELU_NAMES}


def float64_logits(spec: ModelSpec, weights: dict[str, np.ndarray], images: np.ndarray) -> dict[str, Any]:
    """The MLX port's float32 logits; with its parameters and input cast to float64 on the CPU;
    the same with the input handed to mx.array as a float64 NumPy array (which it makes
    float32); and what mx.gpu says to float64 (None when there is no GPU)."""
    from ports.mlx.port import Port

    port = Port(spec)
    port.load(weights)
    out: dict[str, Any] = {"float32": port.logits(images)}
    port.model.update(tree_map(lambda a: a.astype(mx.float64), port.model.parameters()))
    # dtype= is needed: mx.array(a float64 NumPy array) makes a float32 array.
    out["float64"] = np.array(port.model(mx.array(images, dtype=mx.float64)), dtype=np.float64)
    out["float64, input left to mx.array"] = np.array(port.model(mx.array(images.astype(np.float64))))
    out["gpu"] = None
    if mx.is_available(mx.gpu):
        try:
            mx.eval(mx.multiply(mx.array([1.0], dtype=mx.float64), 2, stream=mx.gpu))
            out["gpu"] = "ran"
        except (RuntimeError, ValueError) as exc:
            out["gpu"] = first_line(exc)
    return out
