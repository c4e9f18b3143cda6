"""Small ViTs written in the style of public code nobody here wrote (issue 38), in the project's own
words, at a tiny size: each keeps the habit of its source that portbench must read right, nothing
else of it. OpenAI CLIP's tower (a sequence-first `nn.MultiheadAttention`: the model permutes its
tokens to (L, N, D) itself, QuickGELU, no patch bias, `ln_pre`); the PyTorch paper-replicating ViT
(dropout 0.1 on the embeddings and in the MLP, the final norm inside the classifier)."""

from __future__ import annotations

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


# ---- factories for `--model tests/public_style_models.py:NAME` ------------------------------------
def clip_tower() -> ClipVisionTower:
    return ClipVisionTower(TINY)


def clip_tower_untransposed() -> ClipVisionTower:
    return ClipVisionTower(TINY, transpose=False)


def paper_vit() -> PaperViT:
    return PaperViT(TINY)
