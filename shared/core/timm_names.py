"""timm's `VisionTransformer` parameter names as a mapping table (`shared/core/mapping.py`).

Two users, one table: the `timm` checkpoint format (`shared/checkpoints/timm.py`) and the torch
port, which names its modules as timm does (`ports/torch/transfer.py` overrides a few rows). It
lives in the core because the port may import nothing above it.
"""

from __future__ import annotations

from shared.core.mapping import Table
from shared.core.spec import ModelSpec

ROWS = """
cls_token                                         cls_token                    batch_token
pos_embed                                         pos_embed                    batch
patch_embed.kernel                                patch_embed.proj.weight      conv
patch_embed.bias                                  patch_embed.proj.bias
blocks.{i}.{n:norm1|norm2}.{w:scale=weight|bias}  blocks.{i}.{n}.{w}
blocks.{i}.attn.{p:query|key|value}.kernel        blocks.{i}.attn.qkv.weight   heads_linear
blocks.{i}.attn.{p:query|key|value}.bias          blocks.{i}.attn.qkv.bias     heads_bias
blocks.{i}.attn.out.kernel                        blocks.{i}.attn.proj.weight  heads_out_linear
blocks.{i}.attn.out.bias                          blocks.{i}.attn.proj.bias
blocks.{i}.mlp.{fc}.kernel                        blocks.{i}.mlp.{fc}.weight   linear
blocks.{i}.mlp.{fc}.bias                          blocks.{i}.mlp.{fc}.bias
final_norm.{w:scale=weight|bias}                  {final}.{w}
head.out.kernel                                   head.weight                  linear
head.out.bias                                     head.bias
"""


def timm_table(name: str, spec: ModelSpec) -> Table:
    """The table, named `name` in messages, for `spec`: timm's final norm on the pooled vector is
    another module, fc_norm (the tokens' is norm)."""
    return Table(ROWS, name, final="fc_norm" if spec.final_norm == "pooled" else "norm")
