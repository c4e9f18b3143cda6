"""Canonical weights <-> this port's parameters.

Keras stores Dense kernels (in, out), Conv2D kernels HWIO and per-head q/k/v kernels (D, H, hd),
which is the canonical layout itself: every tensor is copied as it is, bound by name here.
"""

from __future__ import annotations

import numpy as np
from keras import ops

from ports.keras.model import VisionTransformer
from shared.core.spec import ModelSpec
from shared.core.weights import Tensors


def bindings(model: VisionTransformer, spec: ModelSpec) -> dict[str, object]:
    """Canonical name -> the Keras variable that holds it (same layout)."""
    out: dict[str, object] = {
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
            out[c + f"{name}.scale"], out[c + f"{name}.bias"] = norm.gamma, norm.beta
        mha = blk.attn.mha
        for name, dense in (("query", mha.query_dense), ("key", mha.key_dense), ("value", mha.value_dense)):
            out[c + f"attn.{name}.kernel"] = dense.kernel
            if spec.qkv_bias:
                out[c + f"attn.{name}.bias"] = dense.bias
        out[c + "attn.out.kernel"] = mha.output_dense.kernel
        out[c + "attn.out.bias"] = mha.output_dense.bias if spec.qkv_bias else blk.attn.out_bias
        for name, dense in (("fc1", blk.mlp.fc1), ("fc2", blk.mlp.fc2)):
            out[c + f"mlp.{name}.kernel"], out[c + f"mlp.{name}.bias"] = dense.kernel, dense.bias
    if spec.final_norm != "none":
        out["final_norm.scale"], out["final_norm.bias"] = model.final_norm.gamma, model.final_norm.beta
    for j, dense in enumerate(model.head.hidden):
        out[f"head.hidden.{j}.kernel"], out[f"head.hidden.{j}.bias"] = dense.kernel, dense.bias
    out["head.out.kernel"], out["head.out.bias"] = model.head.out.kernel, model.head.out.bias
    return out


def load_canonical(model: VisionTransformer, tensors: Tensors) -> None:
    bound = bindings(model, model.spec)
    if len({id(v) for v in bound.values()}) != len(model.trainable_variables):  # a mapping bug
        raise AssertionError("keras mapping does not cover every trainable variable exactly once")
    for name, variable in bound.items():
        variable.assign(tensors[name])


def export_canonical(model: VisionTransformer) -> Tensors:
    bound = bindings(model, model.spec)
    return {name: np.asarray(ops.convert_to_numpy(bound[name]), dtype=np.float32)
            for name in model.spec.derived.tensor_shapes}


def export_gradients(model: VisionTransformer, gradients: dict[int, object]) -> Tensors:
    """Gradients keyed by id(variable) -> canonical names (the layout is already canonical)."""
    bound = bindings(model, model.spec)
    return {name: np.asarray(ops.convert_to_numpy(gradients[id(bound[name])]), dtype=np.float32)
            for name in model.spec.derived.tensor_shapes}
