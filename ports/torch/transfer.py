"""Canonical weights <-> this port's parameters.

torch stores Linear weights (out, in), Conv2d weights OIHW and q/k/v packed in one Linear, so
this side's table (shared/core/mapping.py) names a layout transform in the rows that need one;
Keras and Flax copy as they are.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

import numpy as np
import torch

from shared.core.mapping import Plan, Table
from shared.core.spec import ModelSpec
from shared.core.timm_names import timm_table
from shared.core.weights import Tensors

if TYPE_CHECKING:  # annotations only: a port's table is read without its model (a user's worker)
    from ports.torch.model import VisionTransformer


def table(spec: ModelSpec) -> Table:
    """The port names its modules as timm's VisionTransformer does (`patch_embed.proj` OIHW,
    `attn.qkv` packed, `mlp.fc1` / `mlp.fc2` (out, in)), so its table is timm's but for these rows."""
    # q, k and v not all with a bias: each that has one is a parameter of its own (model.py's Attention).
    parts = [spec.derived.has_bias[f"attn.{p}"] for p in ("query", "key", "value")]
    own_biases = "" if all(parts) or not any(parts) else (
        "blocks.{i}.attn.{p:query=q_bias|key=k_bias|value=v_bias}.bias  blocks.{i}.attn.{p}  flat")
    return Table("""
    cls_token                         cls_token                     # timm's has batch axes: (1, 1, D)
    dist_token                        dist_token
    reg_tokens                        reg_tokens
    pos_embed                         pos_embed
    patch_norm_{n:in|out}.{w:scale=weight|bias}  patch_embed.norm_{n}.{w}
    norm_pre.{w:scale=weight|bias}    norm_pre.{w}
    blocks.{i}.attn.out.kernel        blocks.{i}.attn.out.weight    heads_out_linear
    blocks.{i}.attn.out.bias          blocks.{i}.attn.out.bias
    blocks.{i}.attn.{n:q_norm|k_norm}.{w:scale=weight|bias}  blocks.{i}.attn.{n}.{w}
    blocks.{i}.{n:ls1|ls2}.gamma      blocks.{i}.{n}.gamma
    blocks.{i}.mlp.{fc:gate|fc1|fc2}.kernel  blocks.{i}.mlp.{fc}.weight  linear
    blocks.{i}.mlp.{fc:gate|fc1|fc2}.bias    blocks.{i}.mlp.{fc}.bias
    pool.probe                        pool.probe
    pool.attn.{p:query|key|value}.kernel  pool.attn.qkv.weight       heads_linear
    pool.attn.{p:query|key|value}.bias    pool.attn.qkv.bias         heads_bias
    pool.attn.out.kernel              pool.attn.out.weight          heads_out_linear
    pool.attn.out.bias                pool.attn.out.bias
    pool.norm.{w:scale=weight|bias}   pool.norm.{w}
    pool.mlp.{fc:fc1|fc2}.kernel      pool.mlp.{fc}.weight          linear
    pool.mlp.{fc:fc1|fc2}.bias        pool.mlp.{fc}.bias
    final_norm.{w:scale=weight|bias}  final_norm.{w}                # on tokens or pooled: one name
    merger.norm.{w:scale=weight|bias}  merger.norm.{w}
    merger.{fc:fc1|fc2}.kernel        merger.{fc}.weight            linear
    merger.{fc:fc1|fc2}.bias          merger.{fc}.bias
    deepstack.{j}.norm.{w:scale=weight|bias}  deepstack.{j}.norm.{w}
    deepstack.{j}.{fc:fc1|fc2}.kernel  deepstack.{j}.{fc}.weight    linear
    deepstack.{j}.{fc:fc1|fc2}.bias    deepstack.{j}.{fc}.bias
    head.hidden.{j}.kernel            head.hidden.{j}.weight        linear
    head.hidden.{j}.bias              head.hidden.{j}.bias
    head.out.kernel                   head.out.weight               linear
    head.out.bias                     head.out.bias
    head_dist.out.kernel              head_dist.weight              linear
    head_dist.out.bias                head_dist.bias
    {own_biases}
    """, "torch port", base=timm_table("timm", spec), own_biases=own_biases)


@cache
def plan(spec: ModelSpec) -> Plan:
    """The table bound to `spec`, kept: training converts every step."""
    return table(spec).bind(spec.derived.tensor_shapes)


def from_native(spec: ModelSpec, native: dict[str, np.ndarray]) -> Tensors:
    """This port's parameters (or their gradients) -> canonical names and layouts."""
    return plan(spec).from_native(native, "torch port parameters")


def load_canonical(model: VisionTransformer, tensors: Tensors) -> None:
    native = plan(model.spec).to_native(tensors)
    params = dict(model.named_parameters())
    if set(params) != set(native):  # a mapping bug, never a user error
        raise AssertionError(f"torch mapping mismatch: {sorted(set(params) ^ set(native))}")
    with torch.no_grad():
        for name, value in native.items():
            params[name].copy_(torch.from_numpy(np.array(value)))  # a writable copy


def export_canonical(model: VisionTransformer) -> Tensors:
    # .copy(): on CPU .numpy() is a view of the live parameter, which training would change.
    native = {n: p.detach().float().cpu().numpy().copy() for n, p in model.named_parameters()}
    return from_native(model.spec, native)


def export_gradients(model: VisionTransformer) -> Tensors:
    native = {n: p.grad.detach().float().cpu().numpy().copy() for n, p in model.named_parameters()}
    return from_native(model.spec, native)
