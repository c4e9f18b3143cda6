"""The oracle: a plain NumPy float64 forward pass of any valid spec, written to be read.

Every port is tested against this. It follows the spec's conventions literally (see spec.py) and
records named intermediates ("taps") that `compare.py trace` lines up against the ports'.

`forward` takes a `Rounding`: where it rounds to a dtype. The default, EXACT, rounds nowhere
(float64 throughout); shared/core/rounding.py's `RungRounding` rounds at a precision rung's cast
points (shared/core/precision.py), so the same forward also emulates a bfloat16 or float16 port.
"""

from __future__ import annotations

import numpy as np
from scipy.special import erf

from shared.core.inputs import check_images
from shared.core.positions import fixed_table
from shared.core.spec import ModelSpec
from shared.core.taps import Taps
from shared.core.weights import Tensors


class Rounding:
    """The cast points of a forward pass: `param` where a tensor is held in the parameter (stream)
    dtype, `compute` where a compute op (conv, linear, attention product) reads or writes the
    compute dtype. This base rounds nowhere."""

    def param(self, x: np.ndarray) -> np.ndarray:
        return x

    def compute(self, x: np.ndarray) -> np.ndarray:
        return x


EXACT = Rounding()


def dense(x: np.ndarray, kernel: np.ndarray, bias: np.ndarray | None, r: Rounding = EXACT) -> np.ndarray:
    """x @ kernel + bias, a compute op: its inputs, weights and output in the compute dtype."""
    y = r.compute(x) @ r.compute(kernel)
    return r.compute(y if bias is None else y + r.compute(bias))


def gelu(x: np.ndarray, form: str) -> np.ndarray:
    if form == "gelu":  # exact: x * Phi(x)
        return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))
    # tanh approximation (jax.nn.gelu's and keras.ops.gelu's default)
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))


def layer_norm(x: np.ndarray, scale: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)  # two-pass, biased (as every framework)
    return (x - mean) / np.sqrt(var + eps) * scale + bias


def softmax(x: np.ndarray) -> np.ndarray:
    x = x - x.max(axis=-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def patchify(spec: ModelSpec, images: np.ndarray) -> np.ndarray:
    """NHWC images -> (B, patches, ph*pw*C), patches row-major, each flattened (ph, pw, C)."""
    d = spec.derived
    ph, pw = spec.patch_height, spec.patch_width
    if spec.remainder == "pad":
        images = np.pad(images, ((0, 0), (0, d.rows_padded), (0, d.cols_padded), (0, 0)))
    images = images[:, : d.grid_rows * ph, : d.grid_cols * pw, :]  # `drop`: valid unfold
    b = images.shape[0]
    x = images.reshape(b, d.grid_rows, ph, d.grid_cols, pw, spec.channels)
    return x.transpose(0, 1, 3, 2, 4, 5).reshape(b, d.num_patches, d.patch_features)


def attention(spec: ModelSpec, w: Tensors, p: str, x: np.ndarray,
              taps: Taps | dict | None = None, r: Rounding = EXACT) -> np.ndarray:
    """Multi-head attention with head width spec.head_dim, scaled by 1/sqrt(head_dim).
    Kernels are (D, H, hd); the projections are matmuls on (D, H*hd) views of them."""
    b, n, d = x.shape
    heads, hd = spec.heads, spec.head_dim

    def project(name: str) -> np.ndarray:  # (B, N, D) -> (B, H, N, hd)
        bias = w[f"{p}attn.{name}.bias"].reshape(-1) if spec.qkv_bias else None
        y = dense(x, w[f"{p}attn.{name}.kernel"].reshape(d, heads * hd), bias, r)
        return y.reshape(b, n, heads, hd).transpose(0, 2, 1, 3)

    q, k, v = project("query"), project("key"), project("value")
    scores = r.compute(q @ k.transpose(0, 1, 3, 2) / np.sqrt(hd))  # (B, H, queries, keys)
    probs = r.compute(softmax(scores))  # the softmax in float32 (here float64), rounded once
    if taps is not None:
        taps[p.replace("blocks.", "block").rstrip(".") + ".attn_probs"] = probs
    context = r.compute(probs @ v).transpose(0, 2, 1, 3).reshape(b, n, heads * hd)  # heads concatenated
    return dense(context, w[f"{p}attn.out.kernel"].reshape(heads * hd, d), w[f"{p}attn.out.bias"], r)


def mlp(spec: ModelSpec, w: Tensors, p: str, x: np.ndarray, r: Rounding = EXACT) -> np.ndarray:
    hidden = r.compute(gelu(dense(x, w[f"{p}mlp.fc1.kernel"], w[f"{p}mlp.fc1.bias"], r), spec.activation))
    return dense(hidden, w[f"{p}mlp.fc2.kernel"], w[f"{p}mlp.fc2.bias"], r)


def block(spec: ModelSpec, w: Tensors, i: int, x: np.ndarray, taps: Taps | dict,
          r: Rounding = EXACT) -> np.ndarray:
    p = f"blocks.{i}."
    eps = spec.layer_norm_eps

    def norm(name: str, y: np.ndarray) -> np.ndarray:  # statistics unrounded, output in the stream
        return r.param(layer_norm(y, w[f"{p}{name}.scale"], w[f"{p}{name}.bias"], eps))

    if spec.norm == "pre":  # x + f(LN(x))
        h = norm("norm1", x)
        taps[f"block{i}.norm1"] = h
        a = attention(spec, w, p, h, taps, r)
        taps[f"block{i}.attn"] = a
        x = r.param(x + a)
        h = norm("norm2", x)
        taps[f"block{i}.norm2"] = h
        m = mlp(spec, w, p, h, r)
        taps[f"block{i}.mlp"] = m
        x = r.param(x + m)
    else:  # post: LN(x + f(x))
        a = attention(spec, w, p, x, taps, r)
        taps[f"block{i}.attn"] = a
        x = norm("norm1", r.param(x + a))
        taps[f"block{i}.norm1"] = x
        m = mlp(spec, w, p, x, r)
        taps[f"block{i}.mlp"] = m
        x = norm("norm2", r.param(x + m))
        taps[f"block{i}.norm2"] = x
    taps[f"block{i}.out"] = x
    return x


def forward(spec: ModelSpec, weights: Tensors, images: np.ndarray,
            taps: Taps | dict[str, np.ndarray] | None = None, rounding: Rounding = EXACT) -> np.ndarray:
    """Logits (B, num_classes) in float64 for NHWC float32 images; fills `taps` (a Taps or a
    dict) if given. `rounding` says where to round to a rung's dtypes (EXACT: nowhere)."""
    check_images(spec, images)
    taps = {} if taps is None else taps
    r = rounding
    w = {name: r.param(np.asarray(t, dtype=np.float64)) for name, t in weights.items()}  # held as stored
    d = spec.derived
    x = patchify(spec, r.param(np.asarray(images, dtype=np.float64)))
    kernel = w["patch_embed.kernel"].reshape(d.patch_features, spec.dim)
    x = r.param(dense(x, kernel, w["patch_embed.bias"], r))  # the conv, then cast to the stream
    taps["patch_embed"] = x
    table = w["pos_embed"][: d.pos_rows_used] if spec.pos_embed == "learned" else fixed_table(spec)
    table = None if table is None else r.param(table)
    if table is not None and not spec.pos_embed_class_row:
        x = r.param(x + table)  # big_vision: positions cover the patches only, added before the class token
    if spec.class_token:
        cls = np.broadcast_to(w["cls_token"], (x.shape[0], 1, spec.dim))
        x = np.concatenate([cls, x], axis=1)
    if table is not None and spec.pos_embed_class_row:
        x = r.param(x + table)  # timm/torchvision: the table has a row for the class token
    taps["pos_embed"] = x
    for i in range(spec.depth):
        x = block(spec, w, i, x, taps, r)
    if spec.final_norm == "tokens":
        x = r.param(layer_norm(x, w["final_norm.scale"], w["final_norm.bias"], spec.layer_norm_eps))
        taps["final_norm"] = x
    if spec.pooling == "cls":
        x = x[:, 0]
    elif spec.pooling == "mean":
        x = r.param(x[:, int(spec.class_token):].mean(axis=1))  # patch tokens only
    else:
        x = x.reshape(x.shape[0], -1)
    if spec.final_norm == "pooled":
        x = r.param(layer_norm(x, w["final_norm.scale"], w["final_norm.bias"], spec.layer_norm_eps))
    taps["pooled"] = x
    for j in range(len(spec.head_hidden)):
        hidden = dense(x, w[f"head.hidden.{j}.kernel"], w[f"head.hidden.{j}.bias"], r)
        x = r.compute(gelu(hidden, spec.head_activation))
    logits = dense(x, w["head.out.kernel"], w["head.out.bias"], r)
    taps["logits"] = logits
    return logits


def cross_entropy(logits: np.ndarray, labels: np.ndarray) -> float:
    """Mean softmax cross-entropy from logits, as every port's training step computes it."""
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    return float(-log_probs[np.arange(len(labels)), labels].mean())
