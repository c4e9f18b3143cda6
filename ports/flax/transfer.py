"""Canonical weights <-> this port's parameters.

Flax stores Linear kernels (in, out), Conv kernels HWIO and per-head q/k/v kernels (D, H, hd),
which is the canonical layout itself: every tensor is copied as it is, so its table
(shared/core/mapping.py) only renames, and each native name is a path of attributes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from shared.core.mapping import Table, lookup
from shared.core.spec import ModelSpec
from shared.core.weights import Tensors

if TYPE_CHECKING:  # annotations only: a port's table is read without its model (a user's worker)
    from ports.flax.model import VisionTransformer


def table(spec: ModelSpec) -> Table:
    """Canonical name -> the attribute path of the nnx.Param that holds it (same layout)."""
    # Without a qkv bias the attention's projections have no bias at all: the port adds its own.
    out_bias = "mha.out.bias" if spec.qkv_bias else "out_bias"
    pool_out_bias = "mha.out.bias" if spec.pool_qkv_bias else "out_bias"
    # With RoPE, normalize_qk's place holds the rotation, which holds the qk-norm (model.py's Rotary).
    qk_norm = ".norm" if spec.rope != "none" else ""
    return Table("""
    {n:patch_norm_in=patch_embed.norm_in|patch_norm_out=patch_embed.norm_out|norm_pre}.{w}  {n}.{w}
    patch_embed.{w}                                       patch_embed.proj.{w}
    {t:cls_token|dist_token|reg_tokens|pos_embed}         {t}
    blocks.{i}.{n:norm1|norm2}.{w}                        blocks.{i}.{n}.{w}
    blocks.{i}.attn.{p:query|key|value}.{w}               blocks.{i}.attn.mha.{p}.{w}
    blocks.{i}.attn.out.kernel                            blocks.{i}.attn.mha.out.kernel
    blocks.{i}.attn.out.bias                              blocks.{i}.attn.{out_bias}
    blocks.{i}.attn.{n:q_norm=query_ln|k_norm=key_ln}.{w}  blocks.{i}.attn.mha.{n}{qk_norm}.{w}
    blocks.{i}.{n:ls1|ls2}.gamma                          blocks.{i}.{n}.gamma
    blocks.{i}.mlp.{fc}.{w}                               blocks.{i}.mlp.{fc}.{w}
    pool.probe                                            pool.probe
    pool.attn.{p:query|key|value}.{w}                     pool.attn.mha.{p}.{w}
    pool.attn.out.kernel                                  pool.attn.mha.out.kernel
    pool.attn.out.bias                                    pool.attn.{pool_out_bias}
    pool.norm.{w}                                         pool.norm.{w}
    pool.mlp.{fc}.{w}                                     pool.mlp.{fc}.{w}
    final_norm.{w}                                        final_norm.{w}
    merger.norm.{w}                                       merger.norm.{w}
    merger.{fc:fc1|fc2}.{w}                               merger.{fc}.{w}
    deepstack.{j}.norm.{w}                                deepstack.{j}.norm.{w}
    deepstack.{j}.{fc:fc1|fc2}.{w}                        deepstack.{j}.{fc}.{w}
    head.hidden.{j}.{w}                                   head.hidden.{j}.{w}
    head.out.{w}                                          head.out.{w}
    head_dist.out.{w}                                     head_dist.{w}
    """, "flax port", out_bias=out_bias, pool_out_bias=pool_out_bias,
                 qk_norm=qk_norm)


def bindings(model: VisionTransformer, spec: ModelSpec) -> dict[str, nnx.Param]:
    """Canonical name -> the nnx.Param that holds it."""
    paths = table(spec).bind(spec.derived.tensor_shapes).paths()
    return {name: lookup(model, path) for name, path in paths.items()}


def load_canonical(model: VisionTransformer, tensors: Tensors) -> None:
    bound = bindings(model, model.spec)
    if len(bound) != len(jax.tree.leaves(nnx.state(model, nnx.Param))):  # a mapping bug, never a user error
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
