"""Canonical weights <-> this port's parameters.

MLX stores Linear weights (out, in) as torch does, Conv2d weights (out, kh, kw, in) (OHWI) and
q/k/v as three separate Linears of width heads * head_dim, so this side applies the layout
transforms from shared/core/weights.py and two of its own for OHWI.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
from mlx.utils import tree_flatten, tree_unflatten

from ports.mlx.model import VisionTransformer
from shared.core import weights as W  # noqa: N812 (W for the layout transforms)
from shared.core.spec import ModelSpec
from shared.core.weights import Tensors


def conv_hwio_to_ohwi(kernel: np.ndarray) -> np.ndarray:
    """(ph, pw, C, D) -> MLX Conv2d weight (D, ph, pw, C)."""
    return np.ascontiguousarray(kernel.transpose(3, 0, 1, 2))


def conv_ohwi_to_hwio(weight: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(weight.transpose(1, 2, 3, 0))


def to_native(spec: ModelSpec, tensors: Tensors) -> dict[str, np.ndarray]:
    """Canonical tensors -> this port's parameter paths (tree_flatten names) and layouts."""
    out: dict[str, np.ndarray] = {
        "patch_embed.proj.weight": conv_hwio_to_ohwi(tensors["patch_embed.kernel"]),
        "patch_embed.proj.bias": tensors["patch_embed.bias"],
    }
    for name in ("cls_token", "pos_embed"):
        if name in tensors:
            out[name] = tensors[name]
    for i in range(spec.depth):
        c, n = f"blocks.{i}.", f"blocks.{i}."
        for norm in ("norm1", "norm2"):
            out[n + f"{norm}.weight"] = tensors[c + f"{norm}.scale"]
            out[n + f"{norm}.bias"] = tensors[c + f"{norm}.bias"]
        for part in ("query", "key", "value"):  # (D, H, hd) -> (H*hd, D), one Linear each
            kernel = tensors[c + f"attn.{part}.kernel"]
            out[n + f"attn.mha.{part}_proj.weight"] = W.dense_to_out_in(kernel.reshape(spec.dim, -1))
            if spec.qkv_bias:
                out[n + f"attn.mha.{part}_proj.bias"] = tensors[c + f"attn.{part}.bias"].reshape(-1)
        out[n + "attn.mha.out_proj.weight"] = W.attn_out_to_out_in(tensors[c + "attn.out.kernel"])
        out_bias = "attn.mha.out_proj.bias" if spec.qkv_bias else "attn.out_bias"
        out[n + out_bias] = tensors[c + "attn.out.bias"]
        for fc in ("fc1", "fc2"):
            out[n + f"mlp.{fc}.weight"] = W.dense_to_out_in(tensors[c + f"mlp.{fc}.kernel"])
            out[n + f"mlp.{fc}.bias"] = tensors[c + f"mlp.{fc}.bias"]
    if spec.final_norm != "none":
        out["final_norm.weight"] = tensors["final_norm.scale"]
        out["final_norm.bias"] = tensors["final_norm.bias"]
    for j in range(len(spec.head_hidden)):
        out[f"head.hidden.{j}.weight"] = W.dense_to_out_in(tensors[f"head.hidden.{j}.kernel"])
        out[f"head.hidden.{j}.bias"] = tensors[f"head.hidden.{j}.bias"]
    out["head.out.weight"] = W.dense_to_out_in(tensors["head.out.kernel"])
    out["head.out.bias"] = tensors["head.out.bias"]
    return out


def from_native(spec: ModelSpec, native: dict[str, np.ndarray]) -> Tensors:
    """This port's parameters (or their gradients) -> canonical names and layouts."""
    out: Tensors = {
        "patch_embed.kernel": conv_ohwi_to_hwio(native["patch_embed.proj.weight"]),
        "patch_embed.bias": native["patch_embed.proj.bias"],
    }
    for name in ("cls_token", "pos_embed"):
        if name in native:
            out[name] = native[name]
    heads, hd = spec.heads, spec.head_dim
    for i in range(spec.depth):
        c, n = f"blocks.{i}.", f"blocks.{i}."
        for norm in ("norm1", "norm2"):
            out[c + f"{norm}.scale"] = native[n + f"{norm}.weight"]
            out[c + f"{norm}.bias"] = native[n + f"{norm}.bias"]
        for part in ("query", "key", "value"):
            weight = native[n + f"attn.mha.{part}_proj.weight"]
            out[c + f"attn.{part}.kernel"] = W.dense_from_out_in(weight).reshape(spec.dim, heads, hd)
            if spec.qkv_bias:
                out[c + f"attn.{part}.bias"] = native[n + f"attn.mha.{part}_proj.bias"].reshape(heads, hd)
        out[c + "attn.out.kernel"] = W.attn_out_from_out_in(native[n + "attn.mha.out_proj.weight"], heads, hd)
        out_bias = "attn.mha.out_proj.bias" if spec.qkv_bias else "attn.out_bias"
        out[c + "attn.out.bias"] = native[n + out_bias]
        for fc in ("fc1", "fc2"):
            out[c + f"mlp.{fc}.kernel"] = W.dense_from_out_in(native[n + f"mlp.{fc}.weight"])
            out[c + f"mlp.{fc}.bias"] = native[n + f"mlp.{fc}.bias"]
    if spec.final_norm != "none":
        out["final_norm.scale"] = native["final_norm.weight"]
        out["final_norm.bias"] = native["final_norm.bias"]
    for j in range(len(spec.head_hidden)):
        out[f"head.hidden.{j}.kernel"] = W.dense_from_out_in(native[f"head.hidden.{j}.weight"])
        out[f"head.hidden.{j}.bias"] = native[f"head.hidden.{j}.bias"]
    out["head.out.kernel"] = W.dense_from_out_in(native["head.out.weight"])
    out["head.out.bias"] = native["head.out.bias"]
    return {name: np.asarray(out[name], dtype=np.float32) for name in spec.derived.tensor_shapes}


def load_canonical(model: VisionTransformer, tensors: Tensors) -> None:
    native = to_native(model.spec, tensors)
    params = dict(tree_flatten(model.parameters()))
    if set(params) != set(native):  # a mapping bug, never a user error
        raise AssertionError(f"mlx mapping mismatch: {sorted(set(params) ^ set(native))}")
    model.update(tree_unflatten([(name, mx.array(value)) for name, value in native.items()]))
    mx.eval(model.parameters())


def export_canonical(model: VisionTransformer) -> Tensors:
    return export_gradients(model, model.parameters())


def export_gradients(model: VisionTransformer, gradients: dict) -> Tensors:
    """A tree shaped like model.parameters() (the parameters, their gradients or Adam moments)
    -> canonical names and layouts. np.array copies out of MLX's buffer."""
    native = {name: np.array(value, dtype=np.float32) for name, value in tree_flatten(gradients)}
    return from_native(model.spec, native)
