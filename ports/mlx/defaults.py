"""MLX's side of the divergence catalogue (shared/teaching/): the installed MLX's default for
each entry, read from the framework.

Parallel text: every native port's defaults.py (ports/torch, keras, flax and mlx) has the same
readers in the same order (one per catalogue entry, named by its key) and the same numeric defaults.
Defaults are read (`inspect.signature`, a fresh layer's attributes, parameter shapes, a measured
call); where no attribute holds a value, one comment says where it comes from. A built model is read
by user.py (`layers()`), the demonstrations run in demos.py. Loaded through
`ports.load_port_part(name, "defaults")`.
"""

from __future__ import annotations

import inspect
import os

import mlx.core as mx
import mlx.optimizers as optim
import numpy as np
from mlx import nn
from mlx.utils import tree_flatten

from shared.core.probes import default_of

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
    pools = [n for n in dir(nn) if "Pool" in n]
    # mlx-examples is a repository, not an installed package: its ViTs read the class token
    # (read in its source, not here).
    return f"nn.{', nn.'.join(pools)} pool windows, no token readout (mlx-examples' ViTs read the " \
           "class token)"


def batch_first() -> str:
    # the axis order attention takes
    m = nn.MultiHeadAttention(2, 1)
    x = np.random.default_rng(0).standard_normal((2, 3, 2)).astype(np.float32)
    moved = x.copy()
    moved[1] += 1  # change the second item of axis 0 only
    a, b = mx.array(x), mx.array(moved)
    alone = np.allclose(np.array(m(a, a, a))[0], np.array(m(b, b, b))[0])
    option = "batch_first" in inspect.signature(nn.MultiHeadAttention).parameters
    return f"nn.MultiHeadAttention takes {'(B, T, E)' if alone else '(T, B, E)'} (measured: axis 0 " \
           f"{'does not mix' if alone else 'mixes'}); batch_first option: {option}"


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
    kept = float((mx.array([[1 + 2**-20]]) @ mx.array([[1.0]]))[0, 0]) - 1  # TF32 keeps 10 mantissa bits
    # MLX_ENABLE_TF32's default (1) is set in MLX's C++ CUDA and Metal backends; no Python attribute
    # exposes it, so only the environment variable is read here.
    flag = os.environ.get("MLX_ENABLE_TF32", "unset (1)")
    return f"float32 matmul on the CPU keeps 2^-20: {kept == 2**-20} (full float32, measured); " \
           f"MLX_ENABLE_TF32={flag} applies only to CUDA and M5 Metal"


def layer_norm_variance() -> str:
    # LayerNorm's variance formula
    y = float(nn.LayerNorm(2)(mx.array([[1e4 + 1, 1e4 - 1]]))[0, 0])
    form = "two-pass variance" if abs(y) > 0.5 else "E[x^2] - E[x]^2"
    return f"nn.LayerNorm (mx.fast.layer_norm): {form} (measured: 1e4 +- 1 in float32 normalises to " \
           f"{y:.3g}; one pass cancels to 0)"


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


def rms_norm_eps() -> str:
    # RMSNorm's epsilon
    return f"nn.RMSNorm eps={default_of(nn.RMSNorm, 'eps'):g}"


# ---- numeric defaults the fast paths document (checked against these by the tests) --------------
def layer_norm_eps_values() -> dict[str, float]:
    return {"mlx": float(default_of(nn.LayerNorm, "eps"))}


def rms_norm_eps_values() -> dict[str, float]:
    return {"mlx": float(default_of(nn.RMSNorm, "eps"))}
