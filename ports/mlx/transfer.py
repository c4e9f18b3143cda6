"""Canonical weights <-> this port's parameters.

MLX stores Linear weights (out, in) as torch does, Conv2d weights (out, kh, kw, in) (OHWI) and
q/k/v as three separate Linears of width heads * head_dim, so this side's table
(shared/core/mapping.py) names a layout transform in the rows that need one; Keras and Flax copy
as they are.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

import mlx.core as mx
import numpy as np
from mlx.utils import tree_flatten, tree_unflatten

from shared.core.mapping import Plan, Table
from shared.core.spec import ModelSpec
from shared.core.weights import Tensors

if TYPE_CHECKING:  # annotations only: a port's table is read without its model (a user's worker)
    from ports.mlx.model import VisionTransformer


def table(spec: ModelSpec) -> Table:
    """Canonical name -> the parameter path (tree_flatten name) that holds it, and its layout."""
    # Without a qkv bias the attention's projections have no bias at all: the port adds its own.
    out_bias = "mha.out_proj.bias" if spec.qkv_bias else "out_bias"
    pool_out_bias = "mha.out_proj.bias" if spec.pool_qkv_bias else "out_bias"
    return Table("""
    patch_{n:norm_in|norm_out}.{w:scale=weight|bias}  patch_embed.{n}.{w}
    patch_embed.kernel                           patch_embed.proj.weight        conv_ohwi
    patch_embed.bias                             patch_embed.proj.bias
    norm_pre.{w:scale=weight|bias}               norm_pre.{w}
    {t:cls_token|dist_token|reg_tokens|pos_embed}  {t}
    blocks.{i}.{n:norm1|norm2}.{w:scale=weight|bias}  blocks.{i}.{n}.{w}
    blocks.{i}.attn.{p:query|key|value}.kernel   blocks.{i}.attn.mha.{p}_proj.weight  heads_linear
    blocks.{i}.attn.{p:query|key|value}.bias     blocks.{i}.attn.mha.{p}_proj.bias    heads_bias
    blocks.{i}.attn.out.kernel                   blocks.{i}.attn.mha.out_proj.weight  heads_out_linear
    blocks.{i}.attn.out.bias                     blocks.{i}.attn.{out_bias}
    blocks.{i}.attn.{n:q_norm|k_norm}.{w:scale=weight|bias}  blocks.{i}.attn.{n}.{w}
    blocks.{i}.{n:ls1|ls2}.gamma                 blocks.{i}.{n}.gamma
    blocks.{i}.mlp.{fc}.kernel                   blocks.{i}.mlp.{fc}.weight     linear
    blocks.{i}.mlp.{fc}.bias                     blocks.{i}.mlp.{fc}.bias
    final_norm.{w:scale=weight|bias}             final_norm.{w}
    merger.norm.{w:scale=weight|bias}            merger.norm.{w}
    merger.{fc:fc1|fc2}.kernel                   merger.{fc}.weight             linear
    merger.{fc:fc1|fc2}.bias                     merger.{fc}.bias
    deepstack.{j}.norm.{w:scale=weight|bias}     deepstack.{j}.norm.{w}
    deepstack.{j}.{fc:fc1|fc2}.kernel            deepstack.{j}.{fc}.weight      linear
    deepstack.{j}.{fc:fc1|fc2}.bias              deepstack.{j}.{fc}.bias
    pool.probe                                   pool.probe
    pool.attn.{p:query|key|value}.kernel         pool.attn.mha.{p}_proj.weight  heads_linear
    pool.attn.{p:query|key|value}.bias           pool.attn.mha.{p}_proj.bias    heads_bias
    pool.attn.out.kernel                         pool.attn.mha.out_proj.weight  heads_out_linear
    pool.attn.out.bias                           pool.attn.{pool_out_bias}
    pool.norm.{w:scale=weight|bias}              pool.norm.{w}
    pool.mlp.{fc}.kernel                         pool.mlp.{fc}.weight           linear
    pool.mlp.{fc}.bias                           pool.mlp.{fc}.bias
    head.hidden.{j}.kernel                       head.hidden.{j}.weight         linear
    head.hidden.{j}.bias                         head.hidden.{j}.bias
    head.out.kernel                              head.out.weight                linear
    head.out.bias                                head.out.bias
    head_dist.out.kernel                         head_dist.weight               linear
    head_dist.out.bias                           head_dist.bias
    """, "mlx port", out_bias=out_bias, pool_out_bias=pool_out_bias)


@cache
def plan(spec: ModelSpec) -> Plan:
    """The table bound to `spec`, kept: training converts every step."""
    return table(spec).bind(spec.derived.tensor_shapes)


def from_native(spec: ModelSpec, native: dict[str, np.ndarray]) -> Tensors:
    """This port's parameters (or their gradients) -> canonical names and layouts."""
    return plan(spec).from_native(native, "mlx port parameters")


def load_canonical(model: VisionTransformer, tensors: Tensors) -> None:
    native = plan(model.spec).to_native(tensors)
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
