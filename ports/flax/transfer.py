"""Canonical weights <-> this port's parameters.

Flax stores Linear kernels (in, out), Conv kernels HWIO and per-head q/k/v kernels (D, H, hd),
which is the canonical layout itself: every tensor is copied as it is, bound by name here.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from ports.flax.model import VisionTransformer
from shared.core.spec import ModelSpec
from shared.core.weights import Tensors


def bindings(model: VisionTransformer, spec: ModelSpec) -> dict[str, nnx.Param]:
    """Canonical name -> the nnx.Param that holds it (same layout)."""
    out: dict[str, nnx.Param] = {
        "patch_embed.kernel": model.patch_embed.proj.kernel,
        "patch_embed.bias": model.patch_embed.proj.bias,
    }
    if spec.class_token:
        out["cls_token"] = model.cls_token
    if spec.pos_embed == "learned":
        out["pos_embed"] = model.pos_embed
    for i, blk in enumerate(model.blocks):
        c = f"blocks.{i}."
        for name, norm in (("norm1", blk.norm1), ("norm2", blk.norm2)):
            out[c + f"{name}.scale"], out[c + f"{name}.bias"] = norm.scale, norm.bias
        mha = blk.attn.mha
        for name, dense in (("query", mha.query), ("key", mha.key), ("value", mha.value)):
            out[c + f"attn.{name}.kernel"] = dense.kernel
            if spec.qkv_bias:
                out[c + f"attn.{name}.bias"] = dense.bias
        out[c + "attn.out.kernel"] = mha.out.kernel
        out[c + "attn.out.bias"] = mha.out.bias if spec.qkv_bias else blk.attn.out_bias
        for name, dense in (("fc1", blk.mlp.fc1), ("fc2", blk.mlp.fc2)):
            out[c + f"mlp.{name}.kernel"], out[c + f"mlp.{name}.bias"] = dense.kernel, dense.bias
    if spec.final_norm != "none":
        out["final_norm.scale"], out["final_norm.bias"] = model.final_norm.scale, model.final_norm.bias
    for j, dense in enumerate(model.head.hidden):
        out[f"head.hidden.{j}.kernel"], out[f"head.hidden.{j}.bias"] = dense.kernel, dense.bias
    out["head.out.kernel"], out["head.out.bias"] = model.head.out.kernel, model.head.out.bias
    return out


def load_canonical(model: VisionTransformer, tensors: Tensors) -> None:
    bound = bindings(model, model.spec)
    if len(bound) != len(jax.tree.leaves(nnx.state(model, nnx.Param))):  # a mapping bug
        raise AssertionError("flax mapping does not cover every nnx.Param exactly once")
    for name, param in bound.items():
        param.set_value(jnp.asarray(tensors[name]))


def export_canonical(model: VisionTransformer) -> Tensors:
    bound = bindings(model, model.spec)
    return {name: np.asarray(bound[name][...], dtype=np.float32) for name in model.spec.derived.tensor_shapes}


def export_gradients(model: VisionTransformer, gradients: nnx.State) -> Tensors:
    """Gradients (an nnx.State shaped like the parameters) -> canonical names: write them into a
    copy of the model and read that copy through the same bindings."""
    holder = nnx.clone(model)
    nnx.update(holder, gradients)
    return export_canonical(holder)
