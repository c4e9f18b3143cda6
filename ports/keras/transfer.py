"""Canonical weights <-> this port's parameters.

Keras stores Dense kernels (in, out), Conv2D kernels HWIO and per-head q/k/v kernels (D, H, hd),
which is the canonical layout itself: every tensor is copied as it is, so its table
(shared/core/mapping.py) only renames, and each native name is a path of attributes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from keras import ops

from shared.core.mapping import Table, lookup
from shared.core.spec import ModelSpec
from shared.core.weights import Tensors

if TYPE_CHECKING:  # annotations only: a port's table is read without its model (a user's worker)
    from ports.keras.model import VisionTransformer


def table(spec: ModelSpec) -> Table:
    """Canonical name -> the attribute path of the Keras variable that holds it (same layout)."""
    # With any of q, k, v and the output without a bias the MultiHeadAttention has none: each bias
    # present is the port's own weight (model.py's Attention).
    shared = all(spec.derived.has_bias[f"attn.{p}"] for p in ("query", "key", "value", "out"))
    qkv_bias = "mha.{p}_dense.bias" if shared else "{p}_bias"
    out_bias = "mha.output_dense.bias" if shared else "out_bias"
    pool_out_bias = "mha.output_dense.bias" if spec.pool_qkv_bias else "out_bias"
    # LayerNormalization calls its scale gamma, RMSNormalization scale.
    gamma = "scale" if spec.norm_type == "rms_norm" else "gamma"
    return Table("""
    patch_embed.{w}                                       patch_embed.proj.{w}
    patch_norm_{n:in|out}.{w:scale={gamma}|bias=beta}       patch_embed.norm_{n}.{w}
    norm_pre.{w:scale={gamma}|bias=beta}                    norm_pre.{w}
    {t:cls_token|dist_token|reg_tokens|pos_embed}         {t}
    blocks.{i}.{n:norm1|norm2}.{w:scale={gamma}|bias=beta}  blocks.{i}.{n}.{w}
    blocks.{i}.attn.{p:query|key|value}.kernel            blocks.{i}.attn.mha.{p}_dense.kernel
    blocks.{i}.attn.{p:query|key|value}.bias              blocks.{i}.attn.{qkv_bias}
    blocks.{i}.attn.out.kernel                            blocks.{i}.attn.mha.output_dense.kernel
    blocks.{i}.attn.out.bias                              blocks.{i}.attn.{out_bias}
    blocks.{i}.attn.{n:q_norm|k_norm}.{w:scale={gamma}|bias=beta}  blocks.{i}.attn.{n}.{w}
    blocks.{i}.{n:ls1|ls2}.gamma                          blocks.{i}.{n}.gamma
    blocks.{i}.mlp.{fc}.{w}                               blocks.{i}.mlp.{fc}.{w}
    final_norm.{w:scale={gamma}|bias=beta}                  final_norm.{w}
    merger.norm.{w:scale={gamma}|bias=beta}                 merger.norm.{w}
    merger.{fc:fc1|fc2}.{w}                               merger.{fc}.{w}
    deepstack.{j}.norm.{w:scale={gamma}|bias=beta}          deepstack.{j}.norm.{w}
    deepstack.{j}.{fc:fc1|fc2}.{w}                        deepstack.{j}.{fc}.{w}
    pool.probe                                            pool.probe
    pool.attn.{p:query|key|value}.{w}                     pool.attn.mha.{p}_dense.{w}
    pool.attn.out.kernel                                  pool.attn.mha.output_dense.kernel
    pool.attn.out.bias                                    pool.attn.{pool_out_bias}
    pool.norm.{w:scale={gamma}|bias=beta}                   pool.norm.{w}
    pool.mlp.{fc}.{w}                                     pool.mlp.{fc}.{w}
    head.hidden.{j}.{w}                                   head.hidden.{j}.{w}
    head.out.{w}                                          head.out.{w}
    head_dist.out.{w}                                     head_dist.{w}
    """, "keras port", qkv_bias=qkv_bias, out_bias=out_bias, pool_out_bias=pool_out_bias,
                 gamma=gamma)


def bindings(model: VisionTransformer, spec: ModelSpec) -> dict[str, object]:
    """Canonical name -> the Keras variable that holds it."""
    paths = table(spec).bind(spec.derived.tensor_shapes).paths()
    return {name: lookup(model, path) for name, path in paths.items()}


def load_canonical(model: VisionTransformer, tensors: Tensors) -> None:
    bound = bindings(model, model.spec)
    # a mapping bug, never a user error
    if len({id(v) for v in bound.values()}) != len(model.trainable_variables):
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
