"""PyTorch's side of the divergence catalogue (shared/teaching/): the installed torch's default for
each entry, read from the framework.

Parallel text: every native port's defaults.py (ports/torch, keras, flax and mlx) has the same
readers in the same order (one per catalogue entry, named by its key) and the same numeric defaults.
Defaults are read (`inspect.signature`, a fresh layer's attributes, parameter shapes, a measured
call); where no attribute holds a value, one comment says where it comes from. A built model is read
by user.py (`layers()`), the demonstrations run in demos.py. Loaded through
`ports.load_port_part(name, "defaults")`.
"""

from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path

import torch
from torch import nn

from shared.core.probes import default_of, source_default


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
    # the score scale
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, 5, 8, generator=g, dtype=torch.float64) for _ in range(3))
    # a builtin without a readable signature: measure which scale scale=None applies
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
    y = float(nn.LayerNorm(2)(torch.tensor([[1e4 + 1, 1e4 - 1]]))[0, 0])
    form = "two-pass variance" if abs(y) > 0.5 else "E[x^2] - E[x]^2"
    return f"nn.LayerNorm: {form} (measured: 1e4 +- 1 in float32 normalises to {y:.3g}; " \
           "one pass cancels to 0)"


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
        y = nn.Conv2d(1, 2, 2)(torch.zeros(1, 1, 2, 2))
        return f"autocast: the patch embedding's Conv2d gives {y.dtype}; + float32 gives " \
               f"{(y + torch.zeros(y.shape)).dtype} (promotion); no float32 term: the stream stays {y.dtype}"


def rms_norm_eps() -> str:
    # RMSNorm's epsilon
    eps = default_of(nn.RMSNorm, "eps")
    return f"nn.RMSNorm eps={eps}" + (f" (the dtype's machine epsilon: {torch.finfo(torch.float32).eps:g} "
                                       "in float32)" if eps is None else "")


# ---- numeric defaults the fast paths document (checked against these by the tests) --------------
def layer_norm_eps_values() -> dict[str, float]:
    return {"torch": float(default_of(nn.LayerNorm, "eps"))}


def rms_norm_eps_values() -> dict[str, float]:
    eps = default_of(nn.RMSNorm, "eps")
    return {"torch": float(torch.finfo(torch.float32).eps if eps is None else eps)}
