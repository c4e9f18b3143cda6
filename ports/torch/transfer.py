"""Canonical weights <-> this port's parameters.

torch stores Linear weights (out, in), Conv2d weights OIHW and q/k/v packed in one Linear, so
this side applies the layout transforms from shared/core/weights.py; Keras and Flax copy as they are.
"""

from __future__ import annotations

import numpy as np
import torch

from ports.torch.model import VisionTransformer
from shared.core import weights as W  # noqa: N812 (W for the layout transforms)
from shared.core.spec import ModelSpec
from shared.core.weights import Tensors


def to_native(spec: ModelSpec, tensors: Tensors) -> dict[str, np.ndarray]:
    """Canonical tensors -> this port's parameter names and layouts."""
    out: dict[str, np.ndarray] = {
        "patch_embed.proj.weight": W.conv_hwio_to_oihw(tensors["patch_embed.kernel"]),
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
        qkv = [tensors[c + f"attn.{p}.kernel"] for p in ("query", "key", "value")]
        out[n + "attn.qkv.weight"] = W.qkv_pack(*qkv)
        if spec.qkv_bias:
            out[n + "attn.qkv.bias"] = W.qkv_bias_pack(
                *[tensors[c + f"attn.{p}.bias"] for p in ("query", "key", "value")]
            )
        out[n + "attn.out.weight"] = W.attn_out_to_out_in(tensors[c + "attn.out.kernel"])
        out[n + "attn.out.bias"] = tensors[c + "attn.out.bias"]
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
        "patch_embed.kernel": W.conv_oihw_to_hwio(native["patch_embed.proj.weight"]),
        "patch_embed.bias": native["patch_embed.proj.bias"],
    }
    for name in ("cls_token", "pos_embed"):
        if name in native:
            out[name] = native[name]
    for i in range(spec.depth):
        c, n = f"blocks.{i}.", f"blocks.{i}."
        for norm in ("norm1", "norm2"):
            out[c + f"{norm}.scale"] = native[n + f"{norm}.weight"]
            out[c + f"{norm}.bias"] = native[n + f"{norm}.bias"]
        q, k, v = W.qkv_unpack(native[n + "attn.qkv.weight"], spec.heads, spec.head_dim)
        out.update({c + "attn.query.kernel": q, c + "attn.key.kernel": k, c + "attn.value.kernel": v})
        if spec.qkv_bias:
            bq, bk, bv = W.qkv_bias_unpack(native[n + "attn.qkv.bias"], spec.heads, spec.head_dim)
            out.update({c + "attn.query.bias": bq, c + "attn.key.bias": bk, c + "attn.value.bias": bv})
        out[c + "attn.out.kernel"] = W.attn_out_from_out_in(
            native[n + "attn.out.weight"], spec.heads, spec.head_dim
        )
        out[c + "attn.out.bias"] = native[n + "attn.out.bias"]
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
    params = dict(model.named_parameters())
    if set(params) != set(native):  # a mapping bug, never a user error
        raise AssertionError(f"torch mapping mismatch: {sorted(set(params) ^ set(native))}")
    with torch.no_grad():
        for name, value in native.items():
            params[name].copy_(torch.from_numpy(np.array(value)))  # a writable copy


def export_canonical(model: VisionTransformer) -> Tensors:
    # .copy(): on CPU .numpy() is a view of the live parameter, which training would change.
    native = {n: p.detach().cpu().numpy().copy() for n, p in model.named_parameters()}
    return from_native(model.spec, native)


def export_gradients(model: VisionTransformer) -> Tensors:
    native = {n: p.grad.detach().cpu().numpy().copy() for n, p in model.named_parameters()}
    return from_native(model.spec, native)
