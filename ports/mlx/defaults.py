"""MLX's (mlx.nn, mlx.optimizers) side of the divergence catalogue (shared/teaching/): the installed
MLX's default for each entry, the audit of a built mlx.nn module against a spec, and the
demonstrations that run in MLX.

Parallel text with ports/torch/defaults.py, ports/keras/defaults.py and ports/flax/defaults.py:
the same readers in the same order (one per catalogue entry, named by its key), the same numeric
defaults, `audit_model` and `adam_step`; the other demonstrations exist only where the divergence
lives in this framework's API. Defaults are read (`inspect.signature`, a fresh layer's attributes,
parameter shapes, a measured call), never typed in. Loaded through
`ports.load_port_part(name, "defaults")`.
"""

from __future__ import annotations

import inspect
from typing import Any

import mlx.core as mx
import mlx.optimizers as optim
import numpy as np
from mlx import nn
from mlx.utils import tree_flatten, tree_map

from shared.core.probes import Finding, close, default_of, expected_form, is_spec_rate
from shared.core.spec import ModelSpec

GELU_NAMES = ("none", "precise", "tanh", "fast")  # what nn.GELU(approx=) accepts (checked below)


# ---- defaults, one reader per catalogue entry (catalogue order) ---------------------------------
def head_width() -> str:
    # what the integer in "heads=4, dim 32" becomes
    m = nn.MultiHeadAttention(32, 4)
    params = sum(int(p.size) for _, p in tree_flatten(m.parameters()))
    width = m.query_proj.weight.shape[0] // m.num_heads
    return f"nn.MultiHeadAttention(dims=32, num_heads=4): head width {width} (dims/num_heads), " \
           f"{params:,} params"


def remainder() -> str:
    # pixels that do not fill a patch
    return f"nn.Conv2d padding={default_of(nn.Conv2d, 'padding')!r} (trailing pixels dropped)"


def patch_layout() -> str:
    # the flatten order of one patch
    w = nn.Conv2d(3, 8, kernel_size=(4, 2)).weight
    return f"Conv2d weight {tuple(w.shape)}: weight.reshape(D, -1) flattens (ph, pw, C)"


def layer_norm_eps() -> str:
    # LayerNorm's epsilon
    return f"nn.LayerNorm eps={default_of(nn.LayerNorm, 'eps'):g}"


def gelu() -> str:
    # the GELU form
    return f"nn.GELU approx={default_of(nn.GELU, 'approx')!r} (exact)"


def norm_placement() -> str:
    # the framework's own encoder block, if it has one
    first = default_of(nn.TransformerEncoderLayer, "norm_first")
    return f"nn.TransformerEncoderLayer norm_first={first} ({'pre' if first else 'post'}-norm)"


def pooling() -> str:
    # the readout of the framework's (or its model zoo's) ViT
    return "no built-in pooling layer (mlx-examples' ViTs read the class token)"


def batch_first() -> str:
    # the axis order attention takes
    return "nn.MultiHeadAttention takes (B, T, E): batch first, no flag"


def attention_scale() -> str:
    # the score scale
    found = "math.sqrt(1 / queries.shape[-1])" in inspect.getsource(nn.MultiHeadAttention.__call__)
    return "nn.MultiHeadAttention scale = 1/sqrt(head width)" + (" (read from its source)" if found else
                                                                   " (not found in its source)")


def conv_kernel_layout() -> str:
    # the conv kernel's axis order
    w = nn.Conv2d(3, 8, kernel_size=(4, 2)).weight
    return f"nn.Conv2d(3, 8, (4, 2)).weight {tuple(w.shape)} = OHWI (out, kh, kw, in), input NHWC"


def dense_kernel_layout() -> str:
    # the dense kernel's axis order
    return f"nn.Linear(3, 5).weight {tuple(nn.Linear(3, 5).weight.shape)} = (out, in)"


def adamw_epsilon() -> str:
    # where AdamW adds epsilon, and its defaults
    a = optim.AdamW
    return f"optim.AdamW eps={default_of(a, 'eps'):g} (added to sqrt(v_hat) with bias correction, " \
           f"to sqrt(v) without), weight_decay={default_of(a, 'weight_decay'):g}"


def weight_decay() -> str:
    # what weight decay decays, and how
    return f"optim.AdamW weight_decay={default_of(optim.AdamW, 'weight_decay'):g}, decoupled; decays " \
           "every parameter it is given (optim.MultiOptimizer splits them)"


def clipnorm() -> str:
    # per-variable or global gradient clipping
    measured = float(optim.clip_grad_norm({"g": mx.array([3e-6, 4e-6])}, 1e-6)[0]["g"][1])
    return f"optim.clip_grad_norm is global; divides by (norm + 1e-6) (measured: norm 5e-6 clipped " \
           f"to 1e-6 gives {measured / 4e-6 * 5e-6:.3g}, not 1e-6)"


def cross_entropy() -> str:
    # the loss's reduction and input
    return f"nn.losses.cross_entropy reduction={default_of(nn.losses.cross_entropy, 'reduction')!r}, " \
           "takes logits"


def dropout_flags() -> str:
    # whether dropout is on by default
    return f"a new nn.Module has training={nn.Module().training} (dropout on until .eval())"


def cpu_precision() -> str:
    # the float32 precision actually used on CPU
    return "float32 matmuls on the CPU; MLX_ENABLE_TF32 (default 1) applies only to CUDA and M5 Metal"


def layer_norm_variance() -> str:
    # LayerNorm's variance formula
    return "nn.LayerNorm: mx.fast.layer_norm (two-pass variance)"


def attention_bias() -> str:
    # whether attention's projections carry a bias by default
    return f"nn.MultiHeadAttention bias={default_of(nn.MultiHeadAttention, 'bias')} (q, k, v and output)"


def gelu_names() -> str:
    # what the GELU variants are called
    accepted = []
    for name in GELU_NAMES:
        try:
            nn.GELU(approx=name)
            accepted.append(name)
        except ValueError:
            pass
    x = mx.array([1.5])
    fast = float(nn.GELU(approx="fast")(x)[0])
    return f"nn.GELU approx in {accepted}: 'precise' = 'tanh' (tanh form), 'fast' = x*sigmoid(1.702x) " \
           f"(gelu(1.5) = {fast:.5f}, exact 1.39978)"


def adam_bias_correction() -> str:
    # whether Adam divides by (1 - beta^t)
    a = optim.AdamW
    return f"optim.AdamW bias_correction={default_of(a, 'bias_correction')}, " \
           f"weight_decay={default_of(a, 'weight_decay'):g}"


def float64_devices() -> str:
    # where float64 runs
    usable = []
    for name, device in (("cpu", mx.cpu), ("gpu", mx.gpu)):
        try:
            if mx.is_available(device):
                mx.eval(mx.multiply(mx.array([1.0], dtype=mx.float64), 2, stream=device))
                usable.append(name)
        except (RuntimeError, ValueError):
            pass
    return f"float64 arrays run on: {', '.join(usable) or 'nothing'} (mx.gpu: 'float64 is not " \
           "supported on the GPU')"


def mixed_precision_stream() -> str:
    # the dtype mixed precision holds the residual stream in
    params = ", ".join(list(inspect.signature(nn.Module.set_dtype).parameters)[1:])
    return f"no mixed precision: Module.set_dtype({params}) gives the model one dtype; bfloat16 + " \
           f"float32 gives {(mx.zeros(1, mx.bfloat16) + mx.zeros(1, mx.float32)).dtype}"


# ---- numeric defaults the fast paths document (checked against these by the tests) --------------
def layer_norm_eps_values() -> dict[str, float]:
    return {"mlx": float(default_of(nn.LayerNorm, "eps"))}


def gelu_tanh_values() -> dict[str, bool]:
    """API -> True when its default GELU is the tanh approximation."""
    return {"mlx.nn.GELU": default_of(nn.GELU, "approx") in ("precise", "tanh")}


# ---- built-model audit ---------------------------------------------------------------------------
def audit_model(model: Any, spec: ModelSpec, label: str) -> list[Finding]:
    """What each module of a built mlx.nn model holds, against what `spec` requires."""
    out: list[Finding] = []
    for path, m in model.named_modules():
        where = f"{label}:{path or '<root>'}"
        if isinstance(m, nn.LayerNorm) and not close(m.eps, spec.layer_norm_eps):
            out.append(Finding(where, "layer_norm_eps",
                               f"LayerNorm eps={m.eps:g}, spec {spec.layer_norm_eps:g}"))
        if isinstance(m, nn.GELU):
            form = {"none": "gelu", "precise": "gelu_tanh", "tanh": "gelu_tanh"}.get(m._approx, m._approx)
            if form != expected_form(path, spec):
                out.append(Finding(where, "gelu_names" if m._approx == "fast" else "gelu",
                                   f"GELU approx={m._approx!r}, spec {expected_form(path, spec)}"))
        if isinstance(m, nn.MultiHeadAttention):
            width = m.query_proj.weight.shape[0] // m.num_heads
            if width != spec.head_dim:
                out.append(Finding(where, "head_width", f"head width {width} (dims/num_heads), "
                                   f"spec head_dim {spec.head_dim}"))
            has_bias = "bias" in m.query_proj
            if has_bias != spec.qkv_bias:
                out.append(Finding(where, "attention_bias", f"projections bias={has_bias}, spec "
                                   f"qkv_bias={spec.qkv_bias} (MLX's default is bias=False)"))
        if isinstance(m, nn.Dropout) and not is_spec_rate(rate := 1 - m._p_1, spec):
            out.append(Finding(where, "dropout_flags", f"Dropout p={rate:g} is none of the spec's rates"))
    return out


# ---- demonstrations -------------------------------------------------------------------------------
def adam_step(params: np.ndarray, grads: np.ndarray, lr: float, eps: float, weight_decay: float,
              decoupled: bool = True, bias_correction: bool = True) -> np.ndarray:
    """One step of optim.AdamW (decoupled=False: optim.Adam with the L2 decay added to the
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
            out["gpu"] = str(exc).splitlines()[0]
    return out
