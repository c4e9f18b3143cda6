"""timm's `VisionTransformer` parameter names as a mapping table (`shared/core/mapping.py`).

Two users, one table: the timm plug-in (`shared/checkpoints/libraries/timm.py`) and the torch
port, which names its modules as timm does (`ports/torch/transfer.py` overrides a few rows). It
lives in the core because the port may import nothing above it.
"""

from __future__ import annotations

from shared.core.mapping import Table
from shared.core.spec import ModelSpec

ROWS = """
cls_token                                         cls_token                    batch_token
dist_token                                        dist_token                   batch_token
reg_tokens                                        reg_token                    batch
pos_embed                                         pos_embed                    batch
patch_embed.kernel                                patch_embed.proj.weight      conv
patch_embed.bias                                  patch_embed.proj.bias
patch_norm_out.{w:scale=weight|bias}              patch_embed.norm.{w}         # embed_norm_layer
norm_pre.{w:scale=weight|bias}                    norm_pre.{w}                 # pre_norm=True
blocks.{i}.{n:norm1|norm2}.{w:scale=weight|bias}  blocks.{i}.{n}.{w}
blocks.{i}.attn.{p:query|key|value}.kernel        blocks.{i}.attn.qkv.weight   heads_linear
blocks.{i}.attn.{p:query|key|value}.bias          blocks.{i}.attn.qkv.bias     heads_bias
blocks.{i}.attn.{n:q_norm|k_norm}.{w:scale=weight|bias}  blocks.{i}.attn.{n}.{w}
blocks.{i}.attn.out.kernel                        blocks.{i}.attn.proj.weight  heads_out_linear
blocks.{i}.attn.out.bias                          blocks.{i}.attn.proj.bias
blocks.{i}.{n:ls1|ls2}.gamma                      blocks.{i}.{n}.gamma         # init_values (LayerScale)
{mlp}
final_norm.{w:scale=weight|bias}                  {final}.{w}
pool.probe                                        attn_pool.latent             batch_token
pool.attn.query.kernel                            attn_pool.q.weight           heads_linear
pool.attn.query.bias                              attn_pool.q.bias             heads_bias
pool.attn.{p:key|value}.kernel                    attn_pool.kv.weight          heads_linear
pool.attn.{p:key|value}.bias                      attn_pool.kv.bias            heads_bias
pool.attn.out.kernel                              attn_pool.proj.weight        heads_out_linear
pool.attn.out.bias                                attn_pool.proj.bias
pool.norm.{w:scale=weight|bias}                   attn_pool.norm.{w}
pool.mlp.{fc:fc1|fc2}.kernel                      attn_pool.mlp.{fc}.weight    linear
pool.mlp.{fc:fc1|fc2}.bias                        attn_pool.mlp.{fc}.bias
head.out.kernel                                   head.weight                  linear
head.out.bias                                     head.bias
head_dist.out.kernel                              head_dist.weight             linear
head_dist.out.bias                                head_dist.bias
"""
MLP_ROWS = """
blocks.{i}.mlp.{fc:fc1|fc2}.kernel                blocks.{i}.mlp.{fc}.weight   linear
blocks.{i}.mlp.{fc:fc1|fc2}.bias                  blocks.{i}.mlp.{fc}.bias
"""
# timm's SwiGLUPacked (GluMlp, gate_last=False): one fc1 whose FIRST half is activated (the gate)
GATED_MLP_ROWS = """
blocks.{i}.mlp.{h:gate|fc1}.kernel                blocks.{i}.mlp.fc1.weight    stacked_linear
blocks.{i}.mlp.{h:gate|fc1}.bias                  blocks.{i}.mlp.fc1.bias      stacked_bias
blocks.{i}.mlp.fc2.kernel                         blocks.{i}.mlp.fc2.weight    linear
blocks.{i}.mlp.fc2.bias                           blocks.{i}.mlp.fc2.bias
"""

# timm's SwiGLU (AIMv2's): the gate and the linear half as two Linears, fc1_g and fc1_x
SPLIT_MLP_ROWS = """
blocks.{i}.mlp.{h:gate=fc1_g|fc1=fc1_x|fc2=fc2}.kernel  blocks.{i}.mlp.{h}.weight  linear
blocks.{i}.mlp.{h:gate=fc1_g|fc1=fc1_x|fc2=fc2}.bias    blocks.{i}.mlp.{h}.bias
"""


def timm_table(name: str, spec: ModelSpec, split: bool = False) -> Table:
    """The table, named `name` in messages, for `spec`: timm's final norm on the pooled vector is
    another module, fc_norm (the tokens' is norm); a gated MLP is SwiGLUPacked's one fc1, or with
    `split` SwiGLU's fc1_g and fc1_x (a live model's own names: checkpoints are read packed)."""
    mlp = (SPLIT_MLP_ROWS if split else GATED_MLP_ROWS) if spec.mlp == "gated" else MLP_ROWS
    return Table(ROWS.replace("{mlp}", mlp.strip()), name,
                 final="fc_norm" if spec.final_norm == "pooled" else "norm")
