"""Small ViTs written in the style of public code nobody here wrote (issue 38), in the project's own
words, at a tiny size: each keeps the habit of its source that portbench must read right, nothing
else of it. OpenAI CLIP's tower (a sequence-first `nn.MultiheadAttention`: the model permutes its
tokens to (L, N, D) itself, QuickGELU, no patch bias, `ln_pre`); the PyTorch paper-replicating ViT
(dropout 0.1 on the embeddings and in the MLP, the final norm inside the classifier); the official
DINOv2 repository's ViT (a `mask_token` the forward reads only when masks are passed, LayerScale,
register tokens without positions); lucidrains' vit-pytorch `ViT` copied into a user's file (patch
LayerNorms around a Linear, a bias-free packed qkv, and with `pool='mean'` an empty (0, dim) class
token); open_clip's tower (a batch-first attention, LayerScale, the output a bare `pooled @ proj`
parameter); DeiT's own distilled model (a subclass of timm's VisionTransformer with a distillation
token and head, the mean of both heads in eval); big_vision's MAPHead transcribed to torch (an
attention pool whose torch attention is one more than the blocks'); google-research vit_jax's linen
ViT (a required `train` keyword, dropout 0.1, linen's tanh GELU); mlx-image's ViT (MLX's own OHWI
`Conv2d` and `MultiHeadAttention`) and mlx-examples' CLIP tower (its own q/k/v Linears, an inline
QuickGELU, positions in an `nn.Embedding`); equinox's example (layers that take one example, a
channels-first Conv2d whose bias is (D, 1, 1), Dropout modules). The linen, MLX and equinox builders
import their framework when called."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from shared.core.spec import ModelSpec

# The tiny model every public-style case builds: 32x32 images of 8x8 patches, width 16, two heads.
TINY = ModelSpec(image_height=32, image_width=32, patch_height=8, patch_width=8, dim=16, depth=2, heads=2,
                 head_dim=8, mlp_dim=32, num_classes=5, layer_norm_eps=1e-5, name="tiny-public")


# ---- OpenAI CLIP's VisionTransformer -------------------------------------------------------------
class QuickGELU(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(1.702 * x)


class ResidualAttentionBlock(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(width, heads)  # sequence-first: torch's default
        self.ln_1 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, width * 2), QuickGELU(), nn.Linear(width * 2, width))
        self.ln_2 = nn.LayerNorm(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (L, N, D)
        y = self.ln_1(x)
        x = x + self.attn(y, y, y, need_weights=False)[0]
        return x + self.mlp(self.ln_2(x))


class ClipVisionTower(nn.Module):
    """CLIP's tower with a classifier where CLIP has its bias-free `proj`; `transpose=False` is the
    mistake CLIP does not make: (N, L, D) tokens into the sequence-first attention."""

    def __init__(self, s: ModelSpec, transpose: bool = True) -> None:
        super().__init__()
        width, grid = s.dim, s.derived.grid_rows * s.derived.grid_cols
        self.transpose = transpose
        self.conv1 = nn.Conv2d(s.channels, width, s.patch_height, s.patch_height, bias=False)
        self.class_embedding = nn.Parameter(torch.randn(width) * width ** -0.5)
        self.positional_embedding = nn.Parameter(torch.randn(grid + 1, width) * width ** -0.5)
        self.ln_pre = nn.LayerNorm(width)
        self.resblocks = nn.Sequential(*[ResidualAttentionBlock(width, s.heads) for _ in range(s.depth)])
        self.ln_post = nn.LayerNorm(width)
        self.head = nn.Linear(width, s.num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv1(x).flatten(2).permute(0, 2, 1)
        cls = self.class_embedding.to(x.dtype) + torch.zeros(x.shape[0], 1, x.shape[-1], dtype=x.dtype)
        x = self.ln_pre(torch.cat([cls, x], dim=1) + self.positional_embedding)
        x = self.resblocks(x.permute(1, 0, 2)).permute(1, 0, 2) if self.transpose else self.resblocks(x)
        return self.head(self.ln_post(x[:, 0, :]))


def clip_spec(s: ModelSpec = TINY) -> ModelSpec:
    return s.replace(patch_bias=False, norm_before_blocks=True, activation="quick_gelu", mlp_dim=2 * s.dim)


# ---- the PyTorch paper-replicating ViT -----------------------------------------------------------
class PatchEmbedding(nn.Module):
    def __init__(self, in_channels: int, patch_size: int, embedding_dim: int) -> None:
        super().__init__()
        self.patcher = nn.Conv2d(in_channels, embedding_dim, patch_size, patch_size)
        self.flatten = nn.Flatten(start_dim=2, end_dim=3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.flatten(self.patcher(x)).permute(0, 2, 1)


class MultiheadSelfAttentionBlock(nn.Module):
    def __init__(self, embedding_dim: int, num_heads: int, attn_dropout: float = 0.0) -> None:
        super().__init__()
        self.layer_norm = nn.LayerNorm(embedding_dim)
        self.multihead_attn = nn.MultiheadAttention(embedding_dim, num_heads, dropout=attn_dropout,
                                                    batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer_norm(x)
        return self.multihead_attn(x, x, x, need_weights=False)[0]


class MLPBlock(nn.Module):
    def __init__(self, embedding_dim: int, mlp_size: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.layer_norm = nn.LayerNorm(embedding_dim)
        self.mlp = nn.Sequential(nn.Linear(embedding_dim, mlp_size), nn.GELU(), nn.Dropout(dropout),
                                 nn.Linear(mlp_size, embedding_dim), nn.Dropout(dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.layer_norm(x))


class TransformerEncoderBlock(nn.Module):
    def __init__(self, embedding_dim: int, num_heads: int, mlp_size: int, mlp_dropout: float,
                 attn_dropout: float) -> None:
        super().__init__()
        self.msa_block = MultiheadSelfAttentionBlock(embedding_dim, num_heads, attn_dropout)
        self.mlp_block = MLPBlock(embedding_dim, mlp_size, mlp_dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.msa_block(x) + x
        return self.mlp_block(x) + x


class PaperViT(nn.Module):
    def __init__(self, s: ModelSpec, mlp_dropout: float = 0.1, embedding_dropout: float = 0.1,
                 attn_dropout: float = 0.0) -> None:
        super().__init__()
        patches = s.derived.grid_rows * s.derived.grid_cols
        self.class_embedding = nn.Parameter(torch.randn(1, 1, s.dim))
        self.position_embedding = nn.Parameter(torch.randn(1, patches + 1, s.dim))
        self.embedding_dropout = nn.Dropout(embedding_dropout)
        self.patch_embedding = PatchEmbedding(s.channels, s.patch_height, s.dim)
        self.transformer_encoder = nn.Sequential(*[
            TransformerEncoderBlock(s.dim, s.heads, s.mlp_dim, mlp_dropout, attn_dropout)
            for _ in range(s.depth)])
        self.classifier = nn.Sequential(nn.LayerNorm(s.dim), nn.Linear(s.dim, s.num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch_embedding(x)
        x = torch.cat((self.class_embedding.expand(len(x), -1, -1), x), dim=1) + self.position_embedding
        x = self.transformer_encoder(self.embedding_dropout(x))
        return self.classifier(x[:, 0])



# ---- the official DINOv2 repository ----------------------------------------------------------------
class LayerScale(nn.Module):
    def __init__(self, dim: int, init_values: float = 1e-5) -> None:
        super().__init__()
        self.gamma = nn.Parameter(init_values * torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gamma


class DinoAttention(nn.Module):
    def __init__(self, dim: int, num_heads: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.num_heads, c // self.num_heads).permute(2, 0, 3, 1, 4)
        return self.proj(nn.functional.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, c))


class DinoMlp(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class DinoBlock(nn.Module):
    def __init__(self, dim: int, num_heads: int, hidden: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = DinoAttention(dim, num_heads)
        self.ls1 = LayerScale(dim)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = DinoMlp(dim, hidden)
        self.ls2 = LayerScale(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.ls1(self.attn(self.norm1(x)))
        return x + self.ls2(self.mlp(self.norm2(x)))


class DinoVisionTransformer(nn.Module):
    def __init__(self, s: ModelSpec) -> None:
        super().__init__()
        d, patches = s.dim, s.derived.grid_rows * s.derived.grid_cols
        self.patch_embed = nn.Conv2d(s.channels, d, s.patch_height, s.patch_height)
        self.cls_token = nn.Parameter(torch.randn(1, 1, d) * 0.02)
        self.pos_embed = nn.Parameter(torch.randn(1, patches + 1, d) * 0.02)
        self.register_tokens = nn.Parameter(torch.randn(1, s.registers, d) * 0.02) if s.registers else None
        self.mask_token = nn.Parameter(torch.zeros(1, d))  # read only for masked pretraining
        self.blocks = nn.ModuleList(DinoBlock(d, s.heads, s.mlp_dim) for _ in range(s.depth))
        self.norm = nn.LayerNorm(d, eps=1e-6)
        self.head = nn.Linear(d, s.num_classes)

    def prepare_tokens_with_masks(self, x: torch.Tensor, masks: torch.Tensor | None = None) -> torch.Tensor:
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        if masks is not None:
            x = torch.where(masks.unsqueeze(-1), self.mask_token.to(x.dtype).unsqueeze(0), x)
        x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1) + self.pos_embed
        if self.register_tokens is not None:
            x = torch.cat((x[:, :1], self.register_tokens.expand(x.shape[0], -1, -1), x[:, 1:]), dim=1)
        return x

    def forward(self, x: torch.Tensor, masks: torch.Tensor | None = None) -> torch.Tensor:
        x = self.prepare_tokens_with_masks(x, masks)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x)[:, 0])


def dino_spec(s: ModelSpec = TINY, registers: int = 0) -> ModelSpec:
    return s.replace(layer_scale=True, layer_norm_eps=1e-6, registers=registers)


# ---- lucidrains' vit-pytorch ViT ---------------------------------------------------------------------
class FeedForward(nn.Module):
    def __init__(self, dim: int, hidden_dim: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, hidden_dim), nn.GELU(),
                                 nn.Dropout(dropout), nn.Linear(hidden_dim, dim), nn.Dropout(dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int, dim_head: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.heads = heads
        self.norm = nn.LayerNorm(dim)
        self.to_qkv = nn.Linear(dim, heads * dim_head * 3, bias=False)
        self.to_out = nn.Sequential(nn.Linear(heads * dim_head, dim), nn.Dropout(dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = (t.unflatten(-1, (self.heads, -1)).transpose(1, 2)
                   for t in self.to_qkv(self.norm(x)).chunk(3, dim=-1))
        out = nn.functional.scaled_dot_product_attention(q, k, v)
        return self.to_out(out.transpose(1, 2).flatten(2))


class Transformer(nn.Module):
    def __init__(self, dim: int, depth: int, heads: int, dim_head: int, mlp_dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)  # the final norm, registered before the layers
        self.layers = nn.ModuleList(
            nn.ModuleList([Attention(dim, heads, dim_head), FeedForward(dim, mlp_dim)]) for _ in range(depth))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for attn, ff in self.layers:
            x = attn(x) + x
            x = ff(x) + x
        return self.norm(x)


class ViT(nn.Module):
    def __init__(self, s: ModelSpec, pool: str = "cls") -> None:
        super().__init__()
        self.ph, self.pw, self.pool = s.patch_height, s.patch_width, pool
        patch_dim, patches = s.derived.patch_features, s.derived.grid_rows * s.derived.grid_cols
        num_cls_tokens = 1 if pool == "cls" else 0
        self.to_patch_embedding = nn.Sequential(nn.LayerNorm(patch_dim), nn.Linear(patch_dim, s.dim),
                                                nn.LayerNorm(s.dim))
        self.cls_token = nn.Parameter(torch.randn(num_cls_tokens, s.dim))
        self.pos_embedding = nn.Parameter(torch.randn(patches + num_cls_tokens, s.dim))
        self.transformer = Transformer(s.dim, s.depth, s.heads, s.head_dim, s.mlp_dim)
        self.mlp_head = nn.Linear(s.dim, s.num_classes)

    def forward(self, img: torch.Tensor) -> torch.Tensor:
        b, c, h, w = img.shape
        grid = img.reshape(b, c, h // self.ph, self.ph, w // self.pw, self.pw)  # b c (h p1) (w p2)
        x = self.to_patch_embedding(grid.permute(0, 2, 4, 3, 5, 1).flatten(3).flatten(1, 2))
        x = torch.cat((self.cls_token.expand(b, -1, -1), x), dim=1) + self.pos_embedding
        x = self.transformer(x)
        return self.mlp_head(x.mean(dim=1) if self.pool == "mean" else x[:, 0])


def vit_pytorch_spec(s: ModelSpec = TINY, pool: str = "cls") -> ModelSpec:
    spec = s.replace(patch_norm_in=True, patch_norm_out=True, qkv_bias=False)
    if pool == "mean":
        return spec.replace(class_token=False, pos_embed_class_row=False, pooling="mean")
    return spec


# ---- open_clip's VisionTransformer ---------------------------------------------------------------
class ClipLayerNorm(nn.LayerNorm):
    """open_clip's LayerNorm: torch's, cast back to the input's dtype (a subclass, read as its base)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        orig_type = x.dtype
        x = nn.functional.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return x.to(orig_type)


class ClipLayerScale(nn.Module):
    def __init__(self, dim: int, init_values: float = 1e-5) -> None:
        super().__init__()
        self.gamma = nn.Parameter(init_values * torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gamma


class OpenClipBlock(nn.Module):
    """open_clip's ResidualAttentionBlock: a batch-first `nn.MultiheadAttention`, LayerScale as
    `ls_1`/`ls_2`, the MLP an ordered `c_fc`, `gelu`, `c_proj`."""

    def __init__(self, width: int, heads: int, mlp_width: int, ls_init_value: float | None) -> None:
        super().__init__()
        from collections import OrderedDict

        self.ln_1 = ClipLayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.ls_1 = ClipLayerScale(width, ls_init_value) if ls_init_value is not None else nn.Identity()
        self.ln_2 = ClipLayerNorm(width)
        self.mlp = nn.Sequential(OrderedDict([("c_fc", nn.Linear(width, mlp_width)), ("gelu", nn.GELU()),
                                              ("c_proj", nn.Linear(mlp_width, width))]))
        self.ls_2 = ClipLayerScale(width, ls_init_value) if ls_init_value is not None else nn.Identity()

    def forward(self, q_x: torch.Tensor) -> torch.Tensor:
        y = self.ln_1(q_x)
        x = q_x + self.ls_1(self.attn(y, y, y, need_weights=False)[0])
        return x + self.ls_2(self.mlp(self.ln_2(x)))


class OpenClipVisionTransformer(nn.Module):
    """open_clip's tower: no patch bias, a class embedding and positions scaled by width ** -0.5,
    `ln_pre`, `ln_post` then the class token, and the output a bias-free `pooled @ proj` with the
    (width, output_dim) parameter open_clip stores, not a Linear."""

    def __init__(self, s: ModelSpec, ls_init_value: float | None = None) -> None:
        super().__init__()
        width, grid = s.dim, s.derived.grid_rows * s.derived.grid_cols
        scale = width ** -0.5
        self.conv1 = nn.Conv2d(s.channels, width, s.patch_height, s.patch_height, bias=False)
        self.class_embedding = nn.Parameter(scale * torch.randn(width))
        self.positional_embedding = nn.Parameter(scale * torch.randn(grid + 1, width))
        self.ln_pre = ClipLayerNorm(width)
        self.transformer = nn.Sequential(*[OpenClipBlock(width, s.heads, s.mlp_dim, ls_init_value)
                                           for _ in range(s.depth)])
        self.ln_post = ClipLayerNorm(width)
        self.proj = nn.Parameter(scale * torch.randn(width, s.num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv1(x)
        x = x.reshape(x.shape[0], x.shape[1], -1).permute(0, 2, 1)
        cls = self.class_embedding.view(1, 1, -1).expand(x.shape[0], -1, -1).to(x.dtype)
        x = self.ln_pre(torch.cat([cls, x], dim=1) + self.positional_embedding.to(x.dtype))
        x = self.ln_post(self.transformer(x))
        return x[:, 0] @ self.proj


def open_clip_spec(s: ModelSpec = TINY, layer_scale: bool = False) -> ModelSpec:
    return s.replace(patch_bias=False, norm_before_blocks=True, layer_scale=layer_scale,
                     bias_free=("head.out",))


# ---- the official DeiT repository: a distilled subclass of timm's VisionTransformer ------------
def deit_distilled(s: ModelSpec) -> Any:
    """DeiT's `DistilledVisionTransformer`: timm's VisionTransformer subclassed with a `dist_token`,
    a position table two rows longer and a `head_dist`; in eval it returns the mean of both heads."""
    from timm.models.vision_transformer import VisionTransformer

    class DistilledVisionTransformer(VisionTransformer):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.dist_token = nn.Parameter(torch.zeros(1, 1, self.embed_dim))
            self.pos_embed = nn.Parameter(torch.zeros(1, self.patch_embed.num_patches + 2, self.embed_dim))
            self.head_dist = nn.Linear(self.embed_dim, self.num_classes)
            nn.init.trunc_normal_(self.dist_token, std=0.02)
            nn.init.trunc_normal_(self.pos_embed, std=0.02)

        def forward_features(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            b = x.shape[0]
            x = self.patch_embed(x)
            x = torch.cat((self.cls_token.expand(b, -1, -1), self.dist_token.expand(b, -1, -1), x), dim=1)
            x = self.pos_drop(x + self.pos_embed)
            for blk in self.blocks:
                x = blk(x)
            x = self.norm(x)
            return x[:, 0], x[:, 1]

        def forward(self, x: torch.Tensor) -> Any:
            x, x_dist = self.forward_features(x)
            x, x_dist = self.head(x), self.head_dist(x_dist)
            return (x, x_dist) if self.training else (x + x_dist) / 2

    return DistilledVisionTransformer(img_size=s.image_height, patch_size=s.patch_height, embed_dim=s.dim,
                                      depth=s.depth, num_heads=s.heads, mlp_ratio=s.mlp_dim / s.dim,
                                      num_classes=s.num_classes, qkv_bias=True)


def deit_spec(s: ModelSpec = TINY) -> ModelSpec:
    return s.replace(distill_token=True, layer_norm_eps=1e-6)


# ---- big_vision's MAPHead, transcribed to torch (a SigLIP-style tower) -----------------------------
class MapBlock(nn.Module):
    def __init__(self, d: int, heads: int, hidden: int) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(d, eps=1e-6), nn.LayerNorm(d, eps=1e-6)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, hidden), nn.GELU(), nn.Linear(hidden, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm1(x)
        x = x + self.attn(y, y, y, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class MAPHead(nn.Module):
    """big_vision's MAPHead: a learned probe attends to the tokens, then a residual MLP."""

    def __init__(self, d: int, heads: int, hidden: int) -> None:
        super().__init__()
        self.probe = nn.Parameter(torch.randn(1, 1, d) * 0.02)
        self.attention = nn.MultiheadAttention(d, heads, batch_first=True)
        self.norm = nn.LayerNorm(d, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(d, hidden), nn.GELU(), nn.Linear(hidden, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.attention(self.probe.expand(x.shape[0], -1, -1), x, x, need_weights=False)[0]
        return (x + self.mlp(self.norm(x)))[:, 0]


class MapPoolViT(nn.Module):
    """A SigLIP-style tower in torch: no class token, torch's attention in the blocks and in the
    pool (so three attention layers for two blocks), the head after the pool."""

    def __init__(self, s: ModelSpec) -> None:
        super().__init__()
        d, patches = s.dim, s.derived.grid_rows * s.derived.grid_cols
        self.patch_embed = nn.Conv2d(s.channels, d, s.patch_height, s.patch_height)
        self.pos_embed = nn.Parameter(torch.randn(1, patches, d) * 0.02)
        self.blocks = nn.ModuleList(MapBlock(d, s.heads, s.mlp_dim) for _ in range(s.depth))
        self.norm = nn.LayerNorm(d, eps=1e-6)
        self.head_pool = MAPHead(d, s.heads, s.mlp_dim)
        self.head = nn.Linear(d, s.num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(x).flatten(2).transpose(1, 2) + self.pos_embed
        for block in self.blocks:
            x = block(x)
        return self.head(self.head_pool(self.norm(x)))


def map_pool_spec(s: ModelSpec = TINY) -> ModelSpec:
    return s.replace(class_token=False, pos_embed_class_row=False, pooling="map", layer_norm_eps=1e-6)


# ---- google-research vit_jax (flax linen) ---------------------------------------------------------
def vit_jax_module(spec: ModelSpec) -> Any:
    """google-research vit_jax's habits: `__call__(inputs, *, train)` with no default, dropout 0.1
    after the positions, in the attention and the MLP (`deterministic=not train`), positions with a
    class row added after the class token, linen's tanh GELU."""
    import flax.linen as nn
    import jax.numpy as jnp

    class MlpBlock(nn.Module):
        mlp_dim: int

        @nn.compact
        def __call__(self, x: Any, *, deterministic: bool) -> Any:
            y = nn.Dropout(0.1)(nn.gelu(nn.Dense(self.mlp_dim)(x)), deterministic=deterministic)
            return nn.Dropout(0.1)(nn.Dense(x.shape[-1])(y), deterministic=deterministic)

    class Encoder1DBlock(nn.Module):
        @nn.compact
        def __call__(self, x: Any, *, deterministic: bool) -> Any:
            y = nn.LayerNorm(epsilon=spec.layer_norm_eps)(x)
            y = nn.MultiHeadDotProductAttention(num_heads=spec.heads, dropout_rate=0.1)(
                y, y, deterministic=deterministic)
            x = x + nn.Dropout(0.1)(y, deterministic=deterministic)
            return x + MlpBlock(spec.mlp_dim)(nn.LayerNorm(epsilon=spec.layer_norm_eps)(x),
                                               deterministic=deterministic)

    class VisionTransformer(nn.Module):
        @nn.compact
        def __call__(self, inputs: Any, *, train: bool) -> Any:
            x = nn.Conv(spec.dim, (spec.patch_height, spec.patch_width), strides=(spec.patch_height,
                        spec.patch_width), padding="VALID", name="embedding")(inputs)
            n, h, w, c = x.shape
            x = jnp.reshape(x, (n, h * w, c))
            cls = self.param("cls", nn.initializers.normal(0.02), (1, 1, c))
            x = jnp.concatenate([jnp.tile(cls, (n, 1, 1)), x], axis=1)
            x = x + self.param("pos_embedding", nn.initializers.normal(0.02), (1, h * w + 1, c))
            x = nn.Dropout(0.1)(x, deterministic=not train)
            for i in range(spec.depth):
                x = Encoder1DBlock(name=f"encoderblock_{i}")(x, deterministic=not train)
            x = nn.LayerNorm(epsilon=spec.layer_norm_eps, name="encoder_norm")(x)
            return nn.Dense(spec.num_classes, name="head")(x[:, 0])

    return VisionTransformer()


LINEN_SPEC = TINY.replace(activation="gelu_tanh", layer_norm_eps=1e-6)


# ---- mlx-image's ViT and mlx-examples' CLIP tower (MLX) -------------------------------------------
def mlx_image_vit(spec: ModelSpec, bias: bool = True) -> Any:
    """mlx-image's ViT (torchvision's names in MLX): `conv_proj` an mlx.nn.Conv2d on NHWC images,
    `nn.MultiHeadAttention` (query_proj, key_proj, value_proj, out_proj), `heads.head`."""
    import mlx.core as mx
    from mlx import nn

    class MLPBlock(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear_1, self.act = nn.Linear(spec.dim, spec.mlp_dim), nn.GELU()
            self.linear_2 = nn.Linear(spec.mlp_dim, spec.dim)

        def __call__(self, x: Any) -> Any:
            return self.linear_2(self.act(self.linear_1(x)))

    class EncoderBlock(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln_1 = nn.LayerNorm(spec.dim, eps=spec.layer_norm_eps)
            self.self_attention = nn.MultiHeadAttention(spec.dim, spec.heads, bias=bias)
            self.ln_2 = nn.LayerNorm(spec.dim, eps=spec.layer_norm_eps)
            self.mlp = MLPBlock()

        def __call__(self, x: Any) -> Any:
            y = self.ln_1(x)
            x = x + self.self_attention(y, y, y)
            return x + self.mlp(self.ln_2(x))

    class VisionTransformer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv_proj = nn.Conv2d(spec.channels, spec.dim, spec.patch_height, stride=spec.patch_height)
            self.class_token = mx.zeros((1, 1, spec.dim))
            self.pos_embedding = 0.02 * mx.random.normal((1, spec.derived.num_patches + 1, spec.dim))
            self.layers = [EncoderBlock() for _ in range(spec.depth)]
            self.ln = nn.LayerNorm(spec.dim, eps=spec.layer_norm_eps)
            self.head = nn.Linear(spec.dim, spec.num_classes)

        def __call__(self, x: Any) -> Any:
            x = self.conv_proj(x)
            x = x.reshape(x.shape[0], -1, spec.dim)
            x = mx.concatenate([mx.broadcast_to(self.class_token, (x.shape[0], 1, spec.dim)), x], axis=1)
            x = x + self.pos_embedding
            for layer in self.layers:
                x = layer(x)
            return self.head(self.ln(x)[:, 0])

    return VisionTransformer()


def mlx_clip_tower(spec: ModelSpec) -> Any:
    """mlx-examples' CLIP vision tower: q_proj / k_proj / v_proj / out_proj Linears of its own
    attention, a bias-free Conv2d, positions in an nn.Embedding, `pre_layrnorm`, QuickGELU, the
    post-layernorm on the class token, and a head."""
    import mlx.core as mx
    from mlx import nn

    class Attention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.q_proj, self.k_proj = nn.Linear(spec.dim, spec.dim), nn.Linear(spec.dim, spec.dim)
            self.v_proj, self.out_proj = nn.Linear(spec.dim, spec.dim), nn.Linear(spec.dim, spec.dim)

        def __call__(self, x: Any) -> Any:
            b, n, _ = x.shape
            q, k, v = (p(x).reshape(b, n, spec.heads, -1).transpose(0, 2, 1, 3)
                       for p in (self.q_proj, self.k_proj, self.v_proj))
            out = mx.fast.scaled_dot_product_attention(q, k, v, scale=spec.head_dim ** -0.5)
            return self.out_proj(out.transpose(0, 2, 1, 3).reshape(b, n, -1))

    class EncoderLayer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.self_attn, self.layer_norm1 = Attention(), nn.LayerNorm(spec.dim, eps=spec.layer_norm_eps)
            self.fc1, self.fc2 = nn.Linear(spec.dim, spec.mlp_dim), nn.Linear(spec.mlp_dim, spec.dim)
            self.layer_norm2 = nn.LayerNorm(spec.dim, eps=spec.layer_norm_eps)

        def __call__(self, x: Any) -> Any:
            x = x + self.self_attn(self.layer_norm1(x))
            y = self.fc1(self.layer_norm2(x))
            return x + self.fc2(y * mx.sigmoid(1.702 * y))

    class ClipVisionModel(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.class_embedding = mx.zeros((spec.dim,))
            self.patch_embedding = nn.Conv2d(spec.channels, spec.dim, spec.patch_height,
                                             stride=spec.patch_height, bias=False)
            self.position_embedding = nn.Embedding(spec.derived.num_patches + 1, spec.dim)
            self.pre_layrnorm = nn.LayerNorm(spec.dim, eps=spec.layer_norm_eps)
            self.layers = [EncoderLayer() for _ in range(spec.depth)]
            self.post_layernorm = nn.LayerNorm(spec.dim, eps=spec.layer_norm_eps)
            self.head = nn.Linear(spec.dim, spec.num_classes)

        def __call__(self, x: Any) -> Any:
            x = self.patch_embedding(x).reshape(x.shape[0], -1, spec.dim)
            cls = mx.broadcast_to(self.class_embedding, (x.shape[0], 1, spec.dim))
            x = self.pre_layrnorm(mx.concatenate([cls, x], axis=1) + self.position_embedding.weight)
            for layer in self.layers:
                x = layer(x)
            return self.head(self.post_layernorm(x[:, 0]))

    return ClipVisionModel()


MLX_CLIP_SPEC = TINY.replace(activation="quick_gelu", patch_bias=False, norm_before_blocks=True,
                             final_norm="pooled")


# ---- an equinox ViT (equinox's own example's idiom) -----------------------------------------------
def equinox_vit(spec: ModelSpec) -> Any:
    """equinox's ViT example in its own idiom: layers that take one example, `jax.vmap` over the
    tokens written by hand, a channels-first Conv2d (its bias (dim, 1, 1)), equinox's
    MultiheadAttention, Dropout modules, the class token and table as bare array fields, and a
    Sequential head."""
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    keys = iter(jax.random.split(jax.random.PRNGKey(0), 64))
    tokens = spec.derived.num_patches + 1

    class Block(eqx.Module):
        norm1: eqx.nn.LayerNorm
        attention: eqx.nn.MultiheadAttention
        norm2: eqx.nn.LayerNorm
        linear1: eqx.nn.Linear
        linear2: eqx.nn.Linear
        dropout: eqx.nn.Dropout

        def __init__(self) -> None:
            self.norm1 = eqx.nn.LayerNorm(spec.dim, eps=spec.layer_norm_eps)
            self.attention = eqx.nn.MultiheadAttention(spec.heads, spec.dim, use_query_bias=True,
                                                       use_key_bias=True, use_value_bias=True,
                                                       use_output_bias=True, key=next(keys))
            self.norm2 = eqx.nn.LayerNorm(spec.dim, eps=spec.layer_norm_eps)
            self.linear1 = eqx.nn.Linear(spec.dim, spec.mlp_dim, key=next(keys))
            self.linear2 = eqx.nn.Linear(spec.mlp_dim, spec.dim, key=next(keys))
            self.dropout = eqx.nn.Dropout(0.1)

        def __call__(self, x: Any) -> Any:
            y = jax.vmap(self.norm1)(x)
            x = x + self.attention(y, y, y)
            y = jax.vmap(self.linear1)(jax.vmap(self.norm2)(x))
            return x + self.dropout(jax.vmap(self.linear2)(jax.nn.gelu(y, approximate=False)))

    class VisionTransformer(eqx.Module):
        patch_embedding: eqx.nn.Conv2d
        cls_token: jax.Array
        positional_embedding: jax.Array
        blocks: list[Block]
        norm: eqx.nn.LayerNorm
        head: eqx.nn.Linear

        def __init__(self) -> None:
            self.patch_embedding = eqx.nn.Conv2d(spec.channels, spec.dim, spec.patch_height,
                                                 stride=spec.patch_height, key=next(keys))
            self.cls_token = jax.random.normal(next(keys), (1, spec.dim))
            self.positional_embedding = jax.random.normal(next(keys), (tokens, spec.dim))
            self.blocks = [Block() for _ in range(spec.depth)]
            self.norm = eqx.nn.LayerNorm(spec.dim, eps=spec.layer_norm_eps)
            self.head = eqx.nn.Linear(spec.dim, spec.num_classes, key=next(keys))

        def __call__(self, x: Any) -> Any:  # one (C, H, W) image
            x = self.patch_embedding(x).reshape(spec.dim, -1).T
            x = jnp.concatenate([self.cls_token, x]) + self.positional_embedding
            for block in self.blocks:
                x = block(x)
            return self.head(self.norm(x[0]))

    return VisionTransformer()


# ---- factories for `--model tests/public_style_models.py:NAME` ------------------------------------
def clip_tower() -> ClipVisionTower:
    return ClipVisionTower(TINY)


def clip_tower_untransposed() -> ClipVisionTower:
    return ClipVisionTower(TINY, transpose=False)


def paper_vit() -> PaperViT:
    return PaperViT(TINY)



def dino_vit() -> DinoVisionTransformer:
    return DinoVisionTransformer(dino_spec())


def vit_pytorch_mean() -> ViT:
    return ViT(TINY, pool="mean")


def open_clip() -> OpenClipVisionTransformer:
    return OpenClipVisionTransformer(TINY, ls_init_value=1e-5)


def deit() -> Any:
    return deit_distilled(TINY)


def map_pool() -> MapPoolViT:
    return MapPoolViT(TINY)


def vit_jax() -> Any:
    """The vit_jax-style linen module with its variables, as linen holds a model."""
    import jax
    import jax.numpy as jnp

    module = vit_jax_module(LINEN_SPEC)
    return module, module.init(jax.random.PRNGKey(0), jnp.zeros((1, 32, 32, 3)), train=False)


def mlx_image() -> Any:
    return mlx_image_vit(TINY)


def equinox() -> Any:
    return equinox_vit(TINY)


def keras_functional() -> Any:
    """The repository's Keras functional example (examples/keras_functional_vit.py) at
    mnist-vit-small: post-norm, as it ships."""
    import importlib.util
    from pathlib import Path

    from shared.core.presets import get_preset

    path = Path(__file__).resolve().parent.parent / "examples" / "keras_functional_vit.py"
    found = importlib.util.spec_from_file_location("keras_functional_vit", path)
    module = importlib.util.module_from_spec(found)
    found.loader.exec_module(module)
    return module.build(get_preset("mnist-vit-small"))

