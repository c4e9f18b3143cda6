"""PyTorch's demonstrations for the divergence catalogue (shared/teaching/*_demos.py): the
framework's own API run on the case a demonstration measures, so the gap it reports is the installed
framework's.

Parallel text: every native port's demos.py (ports/torch, keras, flax and mlx) has `adam_step`; the
other demonstrations exist only where the divergence lives in this framework's API. What the
framework's defaults are is read in defaults.py. Loaded through `ports.load_port_part(name, "demos")`.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from shared.core.spec import ModelSpec
from shared.core.weights import Tensors, attn_out_to_out_in, qkv_bias_pack, qkv_pack


def adam_step(params: np.ndarray, grads: np.ndarray, lr: float, eps: float, weight_decay: float,
              decoupled: bool = True) -> np.ndarray:
    """One step of PyTorch's AdamW (decoupled=False: Adam with L2 weight decay, the decay added to
    the gradient) from zero moments, through torch.optim's functional implementation: the code the
    optimizer classes run. Why not
    `torch.optim.AdamW(...)`: constructing a torch optimizer imports torch._dynamo and triton, and importing
    triton after TensorFlow segfaults the process (measured here with torch 2.14 / TF 2.21). The
    functional path imports neither, so it is safe in a process that already runs Keras."""
    from torch.optim.adam import adam
    from torch.optim.adamw import adamw

    p = torch.from_numpy(np.array(params, copy=True))
    g = torch.from_numpy(np.array(grads, copy=True))
    state = ([torch.zeros_like(p)], [torch.zeros_like(p)], [], [torch.tensor(0.0)])
    kwargs = {"foreach": False, "amsgrad": False, "beta1": 0.9, "beta2": 0.999, "lr": lr,
              "weight_decay": weight_decay, "eps": eps, "maximize": False}
    (adamw if decoupled else adam)([p], [g], *state, **kwargs)
    return p.numpy()


def multihead_attention(spec: ModelSpec, weights: Tensors, h: np.ndarray,
                        batch_first: bool | None) -> np.ndarray:
    """Block 0's canonical attention weights in a float64 nn.MultiheadAttention (head width
    dim/heads: heads * head_dim must equal dim); batch_first=None keeps torch's default."""
    kwargs = {} if batch_first is None else {"batch_first": batch_first}
    mha = nn.MultiheadAttention(spec.dim, spec.heads, **kwargs).double()
    p, names = "blocks.0.attn.", ("query", "key", "value")
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.from_numpy(qkv_pack(*[weights[p + n + ".kernel"] for n in names])))
        mha.in_proj_bias.copy_(torch.from_numpy(qkv_bias_pack(*[weights[p + n + ".bias"] for n in names])))
        mha.out_proj.weight.copy_(torch.from_numpy(attn_out_to_out_in(weights[p + "out.kernel"])))
        mha.out_proj.bias.copy_(torch.from_numpy(weights[p + "out.bias"]))
        x = torch.from_numpy(h)
        out, _ = mha(x, x, x, need_weights=False)
    return out.numpy()


def conv_patch_embed(spec: ModelSpec, weight: np.ndarray, bias: np.ndarray, images: np.ndarray) -> np.ndarray:
    """NHWC images through a float64 nn.Conv2d patch embedding holding `weight` as its (O, I, H, W)
    weight: (B, tokens, dim)."""
    patch = (spec.patch_height, spec.patch_width)
    conv = nn.Conv2d(spec.channels, spec.dim, patch, stride=patch).double()
    x = torch.from_numpy(images.astype(np.float64)).permute(0, 3, 1, 2)
    with torch.no_grad():
        conv.weight.copy_(torch.from_numpy(np.ascontiguousarray(weight)))
        conv.bias.copy_(torch.from_numpy(bias))
        return conv(x).flatten(2).transpose(1, 2).numpy()


def linear(weight: np.ndarray, bias: np.ndarray, x: np.ndarray) -> np.ndarray:
    """x through a float64 nn.Linear holding `weight` as its (out, in) weight."""
    lin = nn.Linear(weight.shape[1], weight.shape[0]).double()
    with torch.no_grad():
        lin.weight.copy_(torch.from_numpy(np.ascontiguousarray(weight)))
        lin.bias.copy_(torch.from_numpy(bias))
        return lin(torch.from_numpy(x)).numpy()


def dropout_logits(spec: ModelSpec, weights: Tensors, images: np.ndarray) -> dict[str, np.ndarray]:
    """The torch port's logits left in train mode (a fresh nn.Module's; seed 0) and after .eval()."""
    from ports.torch.port import Port

    port = Port(spec)
    port.load(weights)
    torch.manual_seed(0)
    with torch.no_grad():  # in train mode, as a fresh nn.Module is
        train = port.model.train()(port.prepare(images)).numpy()
    return {"train": train, "eval": port.logits(images)}


def precision_logits(spec: ModelSpec, weights: Tensors, images: np.ndarray) -> dict[str, np.ndarray]:
    """The torch port's logits under its pinned 'highest' matmul precision, 'medium' and bf16 autocast."""
    from ports.torch.port import Port

    port = Port(spec)  # pins 'highest'
    port.load(weights)
    out = {"highest": port.logits(images)}
    try:
        torch.set_float32_matmul_precision("medium")
        out["medium"] = port.logits(images)
    finally:
        torch.set_float32_matmul_precision("highest")
    with torch.autocast("cpu", dtype=torch.bfloat16), torch.no_grad():
        out["autocast bf16"] = port.to_numpy(port.model(port.prepare(images)).float())
    return out
