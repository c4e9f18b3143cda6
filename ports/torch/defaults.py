"""PyTorch's side of the divergence catalogue (shared/teaching/): the installed torch's default for each
entry, the audit of a built nn.Module against a spec, and the demonstrations that run in torch.

Parallel text with ports/keras/defaults.py and ports/flax/defaults.py: the same readers in the
same order (one per catalogue entry, named by its key), the same numeric defaults, `audit_model`
and `adam_step`; the other demonstrations exist only where the divergence lives in this
framework's API. Defaults are read (`inspect.signature`, a fresh layer's attributes, parameter
shapes, a measured call), never typed in. Loaded through `ports.load_port_part(name, "defaults")`.
"""

from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from shared.core.probes import Finding, close, default_of, expected_form, is_spec_rate, source_default
from shared.core.spec import ModelSpec
from shared.core.weights import Tensors, attn_out_to_out_in, qkv_bias_pack, qkv_pack


# ---- defaults, one reader per catalogue entry (catalogue order) ---------------------------------
def head_width() -> str:
    # what the integer in "heads=4, dim 32" becomes
    m = nn.MultiheadAttention(32, 4)
    params = sum(p.numel() for p in m.parameters())
    return f"MultiheadAttention(embed_dim=32, num_heads=4): head width {m.head_dim}, {params:,} params"


def remainder() -> str:
    # pixels that do not fill a patch
    return f"Conv2d padding={default_of(nn.Conv2d, 'padding')!r} (trailing pixels dropped)"


def patch_layout() -> str:
    # the flatten order of one patch
    x = torch.arange(2 * 2 * 2, dtype=torch.float32).reshape(1, 2, 2, 2)  # NCHW, C=2, 2x2
    cols = nn.functional.unfold(x, kernel_size=2)[0, :, 0].tolist()
    order = "(C, ph, pw)" if cols == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0] else str(cols)
    return f"F.unfold / Conv2d.weight.reshape(D, -1) flatten {order}"


def layer_norm_eps() -> str:
    # LayerNorm's epsilon
    return f"nn.LayerNorm eps={default_of(nn.LayerNorm, 'eps'):g}"


def gelu() -> str:
    # the GELU form
    return f"nn.GELU approximate={default_of(nn.GELU, 'approximate')!r} (exact)"


def norm_placement() -> str:
    # the framework's own encoder block, if it has one
    layer = nn.TransformerEncoderLayer
    first, eps, act = (default_of(layer, k) for k in ("norm_first", "layer_norm_eps", "activation"))
    return f"TransformerEncoderLayer norm_first={first} ({'pre' if first else 'post'}-norm), " \
           f"activation={getattr(act, '__name__', act)}, layer_norm_eps={eps:g}"


def pooling() -> str:
    # the readout of the framework's (or its model zoo's) ViT
    found = importlib.util.find_spec("timm")
    if found is None or not found.submodule_search_locations:
        return "no built-in pooling; torchvision's ViT reads the class token"
    # Read from timm's source, not by importing it: timm pulls in torchvision, whose import
    # crashes a process that already loaded TensorFlow (segfault, measured here).
    path = Path(next(iter(found.submodule_search_locations))) / "models" / "vision_transformer.py"
    value = source_default(path, "VisionTransformer", "global_pool")
    return f"timm VisionTransformer global_pool={value!r} (read from {path.name})"


def batch_first() -> str:
    # the axis order attention takes
    return f"nn.MultiheadAttention batch_first={default_of(nn.MultiheadAttention, 'batch_first')} " \
           "(input (T, B, E))"


def attention_scale() -> str:
    # the score scale (a builtin without a readable signature: measure which scale scale=None applies)
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, 5, 8, generator=g, dtype=torch.float64) for _ in range(3))
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    for label, scale in (("1/sqrt(head width)", 8**-0.5), ("1/head width", 1 / 8), ("none", 1.0)):
        ref = torch.softmax(q @ k.transpose(-1, -2) * scale, dim=-1) @ v
        if torch.allclose(out, ref, atol=1e-12):
            return f"F.scaled_dot_product_attention(scale=None) applies {label} (measured)"
    return "F.scaled_dot_product_attention(scale=None): scale not recognised"


def conv_kernel_layout() -> str:
    # the conv kernel's axis order
    w = nn.Conv2d(3, 8, kernel_size=(4, 2)).weight
    return f"Conv2d(3, 8, (4, 2)).weight {tuple(w.shape)} = OIHW, input NCHW"


def dense_kernel_layout() -> str:
    # the dense kernel's axis order
    return f"nn.Linear(3, 5).weight {tuple(nn.Linear(3, 5).weight.shape)} = (out, in)"


def adamw_epsilon() -> str:
    # where AdamW adds epsilon, and its defaults
    a = torch.optim.AdamW
    return f"optim.AdamW eps={default_of(a, 'eps'):g} (added to sqrt(v_hat)), " \
           f"weight_decay={default_of(a, 'weight_decay'):g}"


def weight_decay() -> str:
    # what weight decay decays, and how
    return f"optim.Adam weight_decay={default_of(torch.optim.Adam, 'weight_decay'):g} is L2 (added to " \
           "the gradient); optim.AdamW decouples it; both decay every tensor passed in"


def clipnorm() -> str:
    # per-variable or global gradient clipping
    norm_type = default_of(torch.nn.utils.clip_grad_norm_, "norm_type")
    return f"clip_grad_norm_(norm_type={norm_type}) is global; divides by (norm + 1e-6)"


def cross_entropy() -> str:
    # the loss's reduction and input
    return f"CrossEntropyLoss reduction={default_of(nn.CrossEntropyLoss, 'reduction')!r}, takes logits"


def dropout_flags() -> str:
    # whether dropout is on by default
    return f"a new nn.Module has training={nn.Module().training} (dropout on until .eval())"


def cpu_precision() -> str:
    # the float32 precision actually used on CPU
    return f"float32_matmul_precision={torch.get_float32_matmul_precision()!r} in this process " \
           "('medium' runs bf16 on AMX CPUs)"


def layer_norm_variance() -> str:
    # LayerNorm's variance formula
    return "nn.LayerNorm: two-pass variance"


def attention_bias() -> str:
    # whether attention's projections carry a bias by default
    return f"nn.MultiheadAttention bias={default_of(nn.MultiheadAttention, 'bias')} (in_proj and out_proj)"


def gelu_names() -> str:
    # what the GELU variants are called
    return f"nn.GELU approximate={default_of(nn.GELU, 'approximate')!r}: 'none' (exact) or 'tanh'"


def adam_bias_correction() -> str:
    # whether Adam divides by (1 - beta^t)
    a, on = torch.optim.AdamW, "switchable" if "bias_correction" in inspect.signature(
        torch.optim.AdamW).parameters else "always on"
    return f"optim.AdamW bias correction {on}, weight_decay={default_of(a, 'weight_decay'):g}"


def float64_devices() -> str:
    # where float64 runs
    mps = torch.backends.mps.is_available()  # MPS has no float64
    return f"torch.float64 runs on: cpu{', cuda' * torch.cuda.is_available()}{'; not on MPS' * mps}"


def mixed_precision_stream() -> str:
    # the dtype mixed precision holds the residual stream in
    with torch.autocast("cpu", dtype=torch.bfloat16), torch.no_grad():
        y = nn.Conv2d(1, 2, 2)(torch.zeros(1, 1, 2, 2))  # the patch embedding's conv
        return f"autocast: the patch embedding's Conv2d gives {y.dtype}; + float32 gives " \
               f"{(y + torch.zeros(y.shape)).dtype} (promotion); no float32 term: the stream stays {y.dtype}"


# ---- numeric defaults the fast paths document (checked against these by the tests) --------------
def layer_norm_eps_values() -> dict[str, float]:
    return {"torch": float(default_of(nn.LayerNorm, "eps"))}


def gelu_tanh_values() -> dict[str, bool]:
    """API -> True when its default GELU is the tanh approximation."""
    return {"torch.nn.GELU": default_of(nn.GELU, "approximate") == "tanh"}


# ---- built-model audit ---------------------------------------------------------------------------
def audit_model(model: Any, spec: ModelSpec, label: str) -> list[Finding]:
    """What each layer of a built nn.Module holds, against what `spec` requires."""
    out: list[Finding] = []
    for path, m in model.named_modules():
        where = f"{label}:{path or '<root>'}"
        if isinstance(m, nn.LayerNorm) and not close(m.eps, spec.layer_norm_eps):
            out.append(Finding(where, "layer_norm_eps",
                               f"LayerNorm eps={m.eps:g}, spec {spec.layer_norm_eps:g}"))
        if isinstance(m, nn.GELU):
            form = "gelu" if m.approximate == "none" else "gelu_tanh"
            if form != expected_form(path, spec):
                out.append(Finding(where, "gelu", f"GELU approximate={m.approximate!r}, spec "
                                   f"{expected_form(path, spec)}"))
        if isinstance(m, nn.MultiheadAttention):
            if not m.batch_first:
                out.append(Finding(where, "batch_first", "MultiheadAttention batch_first=False (torch's "
                                   "default): a (B, T, E) input attends across the batch"))
            if m.head_dim != spec.head_dim:
                out.append(Finding(where, "head_width", f"head width {m.head_dim} (embed_dim/num_heads), "
                                   f"spec head_dim {spec.head_dim}"))
        if isinstance(m, nn.TransformerEncoderLayer) and m.norm_first != (spec.norm == "pre"):
            out.append(Finding(where, "norm_placement", f"norm_first={m.norm_first}, spec norm={spec.norm}"))
        if isinstance(m, nn.Dropout) and not is_spec_rate(m.p, spec):
            out.append(Finding(where, "dropout_flags", f"Dropout p={m.p:g} is none of the spec's rates"))
    return out


# ---- demonstrations -------------------------------------------------------------------------------
def adam_step(params: np.ndarray, grads: np.ndarray, lr: float, eps: float, weight_decay: float,
              decoupled: bool = True) -> np.ndarray:
    """One step of torch's AdamW (decoupled=False: Adam with L2 weight decay) from zero moments,
    through torch.optim's functional implementation: the code the optimizer classes run. Why not
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
