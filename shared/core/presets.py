"""Named specs. Each states every field (no framework default is left implicit) and says which
fields come from its source and which are this project's choice."""

from __future__ import annotations

from dataclasses import dataclass

from shared.core.record import pick
from shared.core.spec import ModelSpec

DEFAULT_PRESET = "archive-torch"


@dataclass(frozen=True)
class Preset:
    spec: ModelSpec
    description: str


_ARCHIVE_TORCH = ModelSpec(
    name="archive-torch",
    image_height=32, image_width=31, channels=1, patch_height=8, patch_width=4, remainder="drop",
    dim=32, class_token=False, pos_embed="learned", pos_embed_class_row=False, pos_rows=None,
    depth=4, heads=4, head_dim=8, mlp_dim=64, activation="gelu", norm="pre", layer_norm_eps=1e-5,
    qkv_bias=True, final_norm="tokens", pooling="flatten", head_hidden=(128, 64, 32),
    head_activation="gelu", num_classes=2,
    dropout_embed=0.0, dropout_attn=0.0, dropout_mlp=0.0, dropout_head=0.1,
)

_ARCHIVE_FINAL = _ARCHIVE_TORCH.replace(
    name="archive-final", image_height=25, patch_height=5, dim=128, heads=8, head_dim=16,
    mlp_dim=256, pos_rows=42,
)

_QUADRANT = ModelSpec(
    name="quadrant",
    image_height=8, image_width=8, channels=1, patch_height=4, patch_width=4, remainder="drop",
    dim=32, class_token=True, pos_embed="learned", pos_embed_class_row=True, pos_rows=None,
    depth=2, heads=4, head_dim=8, mlp_dim=64, activation="gelu", norm="pre", layer_norm_eps=1e-5,
    qkv_bias=True, final_norm="tokens", pooling="cls", head_hidden=(), head_activation="gelu",
    num_classes=4, dropout_embed=0.0, dropout_attn=0.0, dropout_mlp=0.0, dropout_head=0.0,
)

_MNIST_VIT = ModelSpec(
    name="mnist-vit",
    image_height=28, image_width=28, channels=1, patch_height=4, patch_width=4, remainder="drop",
    dim=128, class_token=True, pos_embed="learned", pos_embed_class_row=True, pos_rows=None,
    depth=6, heads=8, head_dim=16, mlp_dim=512, activation="gelu", norm="post",
    layer_norm_eps=1e-5, qkv_bias=True, final_norm="none", pooling="cls", head_hidden=(),
    head_activation="gelu", num_classes=10,
    dropout_embed=0.0, dropout_attn=0.0, dropout_mlp=0.1, dropout_head=0.0,
)

_VIT_B16 = ModelSpec(
    name="vit-b16",
    image_height=224, image_width=224, channels=3, patch_height=16, patch_width=16,
    remainder="drop", dim=768, class_token=True, pos_embed="learned", pos_embed_class_row=True,
    pos_rows=None, depth=12, heads=12, head_dim=64, mlp_dim=3072, activation="gelu", norm="pre",
    layer_norm_eps=1e-6, qkv_bias=True, final_norm="tokens", pooling="cls", head_hidden=(),
    head_activation="gelu", num_classes=1000,
    dropout_embed=0.0, dropout_attn=0.0, dropout_mlp=0.0, dropout_head=0.0,
)

# The families people port now, each at a tiny size for fast tests: the features that make the
# family (and that its public ports got wrong) on a 16x16x3 image, 4x4 patches, width 32, 2 blocks.
_ZOO_TINY = _QUADRANT.replace(
    name="zoo-tiny", image_height=16, image_width=16, channels=3, layer_norm_eps=1e-6, num_classes=10,
)

PRESETS: dict[str, Preset] = {
    "archive-torch": Preset(_ARCHIVE_TORCH, (
        "The archive's PyTorch model. From the source: 1x32x31 input (channels-first there; NHWC "
        "here), 8x4 patches with trailing pixels dropped (4x7 = 28 tokens, the 3 rightmost "
        "columns discarded), a patch Linear 32->32 (stored as a 8x4x1x32 kernel, the same "
        "function), a learned table of 28 positions and no class token, 4 pre-norm blocks of "
        "width 32 with 4 heads of width 8 (torch divides 32 by 4), MLP 32->64->32 with GELU, "
        "then LayerNorm on every token, flatten 28x32 = 896 -> 128 -> 64 -> 32 with GELU and "
        "dropout between, -> 2 logits. Left at torch defaults in the source and stated here: "
        "LayerNorm eps 1e-5, exact GELU, qkv bias. This project's choices: head dropout 0.1 "
        "(the rate is not recoverable from the source), other dropouts 0."
    )),
    "archive-keras": Preset(
        _ARCHIVE_TORCH.replace(
            name="archive-keras", remainder="pad", depth=3, head_dim=32, layer_norm_eps=1e-3,
            pooling="mean", final_norm="tokens",
        ),
        "The Keras model the archive's torch model was ported from. From the source: the same "
        "1x32x31 input and 8x4 patches, but zero-padded to 4x8 = 32 tokens ('same' patching), 3 "
        "blocks, 4 heads with key_dim=32, i.e. head width 32 (four times torch's 8: the 'same "
        "integer 32' trap), and token averaging before the head. LayerNorm eps 1e-3 is Keras' "
        "LayerNormalization default, which the source left implicit. Assumptions (the sources do "
        "not state them; they follow archive-torch): width 32, MLP 64 with exact GELU, learned "
        "positions (32 rows), no class token, LayerNorm on every token before pooling, head "
        "32 -> 128 -> 64 -> 32 -> 2 with GELU and dropout 0.1.",
    ),
    "archive-final": Preset(_ARCHIVE_FINAL, (
        "The archive's last training configuration. From the source: 1x25x31 input, 5x4 patches "
        "(5x7 = 35 tokens, 3 columns dropped), width 128 with 8 heads (width 16), and a position "
        "table sized from a hard-coded height of 32: (32/5)x7 = 42 rows, of which only the first "
        "35 are ever used (the other 7 never receive a gradient; this preset keeps the defect so "
        "it can be shown). Otherwise as archive-torch (4 pre-norm blocks, eps 1e-5, exact GELU, "
        "flatten head 4480 -> 128 -> 64 -> 32 -> 2). Assumption: MLP width 256, keeping "
        "archive-torch's MLP ratio of 2."
    )),
    "archive-final-repaired": Preset(
        _ARCHIVE_FINAL.replace(name="archive-final-repaired", pos_rows=35),
        "archive-final with the position table sized from the real image height: 35 rows, all "
        "used. Everything else is identical, so the two differ only in 7 dead table rows.",
    ),
    "mnist-vit": Preset(_MNIST_VIT, (
        "The archive's MNIST ViT. From the source: 1x28x28, 4x4 patches (7x7 = 49 tokens) plus a "
        "class token, learned positions (50 rows, class row included), width 128, 8 heads, 6 "
        "post-norm blocks (x = LN(x + attn(x)); x = LN(x + mlp(x))), MLP 512 with GELU, no final "
        "norm, class-token pooling, Linear 128 -> 10. torch defaults stated: eps 1e-5, exact "
        "GELU. This project's choice: MLP dropout 0.1, others 0."
    )),
    "mnist-vit-small": Preset(
        _MNIST_VIT.replace(name="mnist-vit-small", patch_height=7, patch_width=7, depth=2, dim=64,
                           heads=4, head_dim=16, mlp_dim=256),
        "A quick variant of mnist-vit: 7x7 patches (16 tokens) plus a class token, 2 post-norm "
        "blocks of width 64 with 4 heads. Assumption: MLP 256 (mnist-vit's ratio of 4).",
    ),
    "quadrant": Preset(_QUADRANT, (
        "The archive's toy task: 1x8x8 images with one bright quadrant, 4x4 patches (4 tokens) "
        "plus a class token, learned positions, width 32, 4 heads of width 8, 2 pre-norm blocks, "
        "MLP 64, class-token pooling, 4 classes. torch defaults stated: eps 1e-5, exact GELU. "
        "This project's choice: final LayerNorm on every token (the usual pre-norm ViT), no "
        "dropout."
    )),
    "quadrant-narrow": Preset(
        _QUADRANT.replace(name="quadrant-narrow", dim=16, heads=2, head_dim=8),
        "quadrant with width 16 and 2 heads (of width 8): the archive's narrower model, which "
        "stalls at a fixed loss on some seeds. Assumption: MLP 64 as in quadrant.",
    ),
    "vit-b16": Preset(_VIT_B16, (
        "ViT-B/16 from the ViT paper, as torchvision builds it: 3x224x224, 16x16 patches (196) "
        "plus a class token, learned positions with a class row, width 768, 12 pre-norm blocks, "
        "12 heads of 64, MLP 3072 with exact GELU, LayerNorm eps 1e-6, final norm, class-token "
        "pooling, Linear 768 -> 1000. 86,567,656 parameters."
    )),
    "vit-s16": Preset(
        _VIT_B16.replace(name="vit-s16", dim=384, heads=6, mlp_dim=1536),
        "ViT-S/16 (timm/DeiT-small sizes): vit-b16 with width 384, 6 heads of 64, MLP 1536.",
    ),
    "vit-ti16": Preset(
        _VIT_B16.replace(name="vit-ti16", dim=192, heads=3, mlp_dim=768),
        "ViT-Ti/16 (DeiT-tiny sizes): vit-b16 with width 192, 3 heads of 64, MLP 768.",
    ),
    "digits": Preset(
        _QUADRANT.replace(name="digits", patch_height=2, patch_width=2, num_classes=10),
        "This project's model for scikit-learn's bundled 8x8 digits (real data, for the position "
        "embedding and attention-map experiments): 2x2 patches (16 tokens) plus a class token, "
        "learned positions, otherwise as quadrant (width 32, 4 heads of 8, 2 pre-norm blocks, MLP "
        "64, final LayerNorm, class-token pooling, no dropout), 10 classes.",
    ),
    "dinov2-reg-tiny": Preset(
        _ZOO_TINY.replace(name="dinov2-reg-tiny", registers=2, layer_scale=True, mlp="gated",
                          activation="silu", mlp_dim=48),
        "DINOv2's features at a tiny size: 2 register tokens after the class token (no position "
        "rows, as DINOv2 and Transformers), LayerScale on both branches, and the SwiGLU MLP of "
        "ViT-g/14 (silu(gate x) * fc1 x, width 48). 16x16x3 input, 4x4 patches, width 32, 4 heads "
        "of 8, 2 pre-norm blocks, eps 1e-6, final norm, class-token pooling, 10 classes.",
    ),
    "deit3-tiny": Preset(
        _ZOO_TINY.replace(name="deit3-tiny", layer_scale=True, pos_embed_class_row=False, qk_norm=True),
        "DeiT-III's features at a tiny size: LayerScale and a position table over the patches only "
        "(timm's no_embed_class), plus timm's qk_norm option (LayerNorm over each head's queries "
        "and keys). Otherwise as dinov2-reg-tiny without registers, with the plain GELU MLP (64).",
    ),
    "siglip-tiny": Preset(
        _ZOO_TINY.replace(name="siglip-tiny", class_token=False, pos_embed_class_row=False,
                          activation="gelu_tanh", pooling="map", num_classes=0),
        "SigLIP's image tower at a tiny size: no class token, positions over the patches, tanh "
        "GELU, final norm on every token, then the attention-pool (MAP) head, whose pooled vector "
        "is the output (no classifier: num_classes 0, an embedding of width 32).",
    ),
    "naflex-tiny": Preset(
        _ZOO_TINY.replace(name="naflex-tiny", image_height=32, image_width=32, patch_height=8, patch_width=8,
                          batching="naflex", max_patches=12, class_token=False, pos_embed="none",
                          pos_embed_class_row=False, heads=2, head_dim=16, activation="gelu_tanh",
                          pooling="map"),
        "SigLIP2's NaFlex batching at a tiny size: each image patchified at its own grid of 8x8x3 "
        "patches (at most 4 x 4, rows x cols <= 12), padded to 12 tokens with a key-padding mask that "
        "attention and the attention-pool (MAP) head read; no class token, no positions "
        "(siglip2-naflex-tiny has SigLIP2's, resized to each image's grid), tanh GELU, width 32, 2 heads "
        "of 16, 2 pre-norm blocks, final norm, 10 classes.",
    ),
    "siglip2-naflex-tiny": Preset(
        _ZOO_TINY.replace(name="siglip2-naflex-tiny", image_height=32, image_width=32, patch_height=8,
                          patch_width=8, batching="naflex", max_patches=12, class_token=False,
                          pos_embed_class_row=False, pos_resample="bilinear_antialias", heads=2, head_dim=16,
                          activation="gelu_tanh", pooling="map"),
        "naflex-tiny with SigLIP2's positions: a learned 4x4 table resized to each image's own grid by "
        "antialiased bilinear (Transformers' Siglip2VisionModel), the padding given none. 32,682 "
        "parameters.",
    ),
    "packed-tiny": Preset(
        _ZOO_TINY.replace(name="packed-tiny", image_height=32, image_width=32, patch_height=8, patch_width=8,
                          batching="packed", max_patches=16, pack_images=3, class_token=False,
                          pos_embed="none", pos_embed_class_row=False, heads=2, head_dim=16,
                          activation="gelu_tanh", pooling="mean"),
        "Pixtral's packing at a tiny size: each sequence of 16 tokens holds 3 images of 8x8x3 patches at "
        "their own grids (each at most 4 x 4) one after another, then padding; attention is "
        "block-diagonal (an image's tokens attend to its own), each image's patches are averaged on "
        "their own, and the logits have a row per image. No class token, no positions, tanh GELU, "
        "width 32, 2 heads of 16, 2 pre-norm blocks, final norm, 10 classes.",
    ),
    "clip-tiny": Preset(
        _ZOO_TINY.replace(name="clip-tiny", norm_before_blocks=True, patch_bias=False,
                          activation="quick_gelu", layer_norm_eps=1e-5, final_norm="pooled"),
        "CLIP's image tower at a tiny size: a patch projection without bias, a LayerNorm before the "
        "blocks (ln_pre), QuickGELU "
        "(x * sigmoid(1.702 x), OpenAI's), eps 1e-5, and the final LayerNorm on the pooled class "
        "token (post_layernorm), then a Linear to 10 (the projection's place, with a bias).",
    ),
    "deit-distilled-tiny": Preset(
        _ZOO_TINY.replace(name="deit-distilled-tiny", distill_token=True),
        "DeiT distilled at a tiny size: a distillation token after the class token (with a "
        "position row), a second head on it, and logits that are the mean of the two heads "
        "(timm's and Transformers' inference output).",
    ),
    "rope-tiny": Preset(
        _ZOO_TINY.replace(name="rope-tiny", depth=1, registers=1, layer_scale=True, pos_embed="none",
                          pos_embed_class_row=False, rope="axial_half", rope_theta=100.0,
                          rope_coords="centered", num_classes=0),
        "A RoPE ViT at a tiny size, as Transformers' DINOv3ViTModel: no position table; each head's "
        "patch queries and keys rotated by 2-D rotary embeddings (theta 100, patch centres in "
        "[-1, 1], rotate_half pairs), the class and register token unrotated; LayerScale, one "
        "block, and the final-normed class token as the output (num_classes 0, width 32).",
    ),
    "dinov2-reg-tiny-24px": Preset(
        _ZOO_TINY.replace(name="dinov2-reg-tiny-24px", registers=2, layer_scale=True, mlp="gated",
                          activation="silu", mlp_dim=48, image_height=24, image_width=20,
                          pos_grid_height=4, pos_grid_width=4, pos_resample="timm_bicubic_antialias"),
        "dinov2-reg-tiny run at another resolution than its table's, as timm runs DINOv2 with "
        "dynamic_img_size: the 4x4 position table (16x16 images) resampled in the forward to a "
        "24x20 image's 6x5 grid by antialiased bicubic (timm's resample_abs_pos_embed default), the "
        "class row kept aside. Every port computes this method with its own framework's resize.",
    ),
    "internvit-tiny": Preset(
        _ZOO_TINY.replace(name="internvit-tiny", norm_type="rms_norm", layer_scale=True, qk_norm=True,
                          final_norm_eps=1e-5),
        "InternViT-6B's block at a tiny size (its config's norm_type 'rms_norm'): RMSNorm (a scale, no "
        "bias, no mean subtracted) for every norm, LayerScale on both branches, eps 1e-6; qk-norm per "
        "head, as timm's qk_norm (InternViT-6B's own normalises q and k across all heads at once, which "
        "no spec field states: Transformers' use_qk_norm is refused in one line for that reason). "
        "This project's choice: the final norm's epsilon 1e-5, to exercise a place's own epsilon. "
        "Otherwise as the other tiny presets.",
    ),
    "aimv2-tiny": Preset(
        _ZOO_TINY.replace(name="aimv2-tiny", class_token=False, pos_embed_class_row=False,
                          patch_norm_out=True, norm_type="rms_norm", layer_norm_eps=1e-5, qkv_bias=False,
                          bias_free=("attn.out", "mlp.gate", "mlp.fc1", "mlp.fc2"), mlp="gated",
                          activation="silu", mlp_dim=88, pooling="mean", num_classes=0),
        "AIMv2's block at a tiny size, as timm's aimv2_* and Transformers' Aimv2VisionModel build it: "
        "no class token, RMSNorm (eps 1e-5) on the embedded patches, in the blocks and on every token "
        "at the end, no bias on q/k/v, the attention output or the SwiGLU's three linears (the patch "
        "projection keeps its bias), SwiGLU of width 88 (timm's int(32 x 2.75)). This project's choice, "
        "as timm's global_pool='avg': the mean of the tokens as the output (num_classes 0; Transformers' "
        "use_head=False returns the tokens). Otherwise as the other tiny presets.",
    ),
    "dinov3-tiny": Preset(
        _ZOO_TINY.replace(name="dinov3-tiny", depth=1, registers=1, layer_scale=True, pos_embed="none",
                          pos_embed_class_row=False, rope="axial_half", rope_theta=100.0,
                          rope_coords="centered", num_classes=0, bias_free=("attn.key",)),
        "DINOv3's block at a tiny size, as Transformers' DINOv3ViTModel: rope-tiny's rotary "
        "embeddings, register, LayerScale and output, and no key bias (its query, value and output "
        "projections have one).",
    ),
    "gqa-tiny": Preset(
        _ZOO_TINY.replace(name="gqa-tiny", kv_heads=2, qk_norm=True),
        "Grouped-query attention at a tiny size: 4 query heads sharing 2 key/value heads, each "
        "k/v head serving two consecutive query heads, with qk-norm on each head's queries and "
        "keys. Otherwise as the other tiny presets.",
    ),
    "pixtral-tiny": Preset(
        _ZOO_TINY.replace(name="pixtral-tiny", patch_bias=False, class_token=False, pos_embed="none",
                          pos_embed_class_row=False, norm_before_blocks=True, norm_type="rms_norm",
                          layer_norm_eps=1e-5, mlp="gated", activation="silu", qkv_bias=False,
                          bias_free=("attn.out", "mlp.gate", "mlp.fc1", "mlp.fc2", "head.out"),
                          rope="axial_half", rope_bands="alternating", rope_theta=10_000.0,
                          final_norm="none", pooling="mean"),
        "Pixtral's vision block at a tiny size, as Transformers' PixtralVisionModel builds it: a patch "
        "projection without bias, RMSNorm (eps 1e-5) before the blocks (ln_pre) and in each pre-norm "
        "block, SwiGLU (silu(gate x) * fc1 x, width 64), no bias anywhere, no class token and no "
        "position table: 2-D rotary embeddings on every patch query and key (rotate_half pairs, "
        "Pixtral's alternating bands, integer row and column, theta 1e4), no final norm. This "
        "project's choice: the patches averaged and a Linear 32 -> 10 without bias as the head "
        "(Pixtral's tower has none). 16x16x3 input, 4x4 patches, width 32, 4 heads of 8, 2 blocks.",
    ),
    "qwen2.5-vl-tiny": Preset(
        _ZOO_TINY.replace(name="qwen2.5-vl-tiny", image_height=32, image_width=32, patch_bias=False,
                          batching="packed", max_patches=64, pack_images=3, class_token=False,
                          pos_embed="none", pos_embed_class_row=False, window_size=4,
                          full_attention_blocks=(1,), norm_type="rms_norm", mlp="gated", activation="silu",
                          rope="axial_half", final_norm="none", token_order="merge_block", merge_size=2,
                          merger_dim=24, pooling="mean", temporal_patch_size=2),
        "Qwen2.5-VL's vision tower at a tiny size, as Transformers' "
        "Qwen2_5_VisionTransformerPretrainedModel builds it: 3 images of their own grids (even, up to 8 x"
        " 8 patches of 4x4x3) packed into each sequence of 64 tokens in its processor's merge-block order"
        " (each 2 x 2 merge unit's patches together); block 0 attends within each image's 4 x 4-patch "
        "windows (2 x 2 merge units from the image's top-left corner), block 1 over the whole image "
        "(fullatt_block_indexes); RMSNorm eps 1e-6, q/k/v and output biases, SwiGLU 64 with biases, 2-D "
        "RoPE with half pairs and shared bands (theta 1e4), no position table, no final norm; the patch "
        "merger (RMSNorm on each token, each unit's 4 tokens side by side, fc2(GELU(fc1 x)) 128 -> 128 ->"
        " 24). This project's choice: each image's merged tokens averaged and a Linear 24 -> 10 as the "
        "head. Its two-frame Conv3d patch projection, without bias, sees each image repeated to fill "
        "both frames, as its processor repeats a still. Width 32, 4 heads of 8.",
    ),
    "qwen3-vl-tiny": Preset(
        _ZOO_TINY.replace(name="qwen3-vl-tiny", image_height=32, image_width=32, batching="packed",
                          max_patches=64, pack_images=3, class_token=False, pos_embed_class_row=False,
                          pos_grid_height=4, pos_grid_width=4, pos_resample="big_vision_zoom",
                          activation="gelu_tanh", rope="axial_half", final_norm="none",
                          token_order="merge_block", merge_size=2, merger_dim=24, pooling="mean",
                          temporal_patch_size=2, deepstack_blocks=(0,)),
        "Qwen3-VL's vision tower at a tiny size, as Transformers' Qwen3VLVisionModel builds it: "
        "qwen2.5-vl-tiny's packing, merge-block order and 2x2 merger, with a learned 4 x 4 position table"
        " (num_position_embeddings 16) resized to each image's grid by bilinear with corners aligned and "
        "added in merge-block order, 2-D RoPE on top (half pairs, shared bands, theta 1e4), LayerNorm eps"
        " 1e-6 everywhere (the merger's too), a patch projection with bias, a tanh-GELU MLP 64 with "
        "biases, no windows and no final norm; a deepstack merger on block 0's tokens (its norm after "
        "each unit's 4 tokens are side by side, 128 -> 128 -> 24), whose merged tokens are an extra output"
        " (deepstack.0) compared like the logits; its two-frame Conv3d sees each image repeated to fill "
        "both frames. This project's head: each image's merged tokens averaged, a Linear 24 -> 10.",
    ),
    "vit-pytorch-tiny": Preset(
        _ZOO_TINY.replace(name="vit-pytorch-tiny", patch_norm_in=True, patch_norm_out=True),
        "lucidrains' vit-pytorch patch embedding at a tiny size: LayerNorm over each flattened "
        "patch, the projection, then LayerNorm on each token. Otherwise as the other tiny presets.",
    ),
}

# The same families at their sources' full sizes, each parameter count equal to the library's
# own constructor's (tests/test_checkpoints_families.py builds them on the meta device).
_VIT_S16 = _VIT_B16.replace(dim=384, heads=6, mlp_dim=1536)
_PIXTRAL = PRESETS["pixtral-tiny"].spec
FULL_SIZE_PRESETS: dict[str, Preset] = {
    "dinov2-s14-reg4": Preset(
        _VIT_S16.replace(name="dinov2-s14-reg4", image_height=518, image_width=518, patch_height=14,
                         patch_width=14, registers=4, pos_embed_class_row=False, layer_scale=True,
                         num_classes=0),
        "DINOv2 ViT-S/14 with 4 registers as timm builds it (vit_small_patch14_reg4_dinov2): 3x518x518, "
        "14x14 patches (37x37 = 1369), a class token and 4 register tokens, a position table over the "
        "patches only (timm's no_embed_class: the class and register tokens get none), width 384, 12 "
        "pre-norm blocks, 6 heads of 64, MLP 1536 with exact GELU, LayerScale on both branches, eps "
        "1e-6, final norm, the class token as the output embedding (num_classes 0). 22,057,344 "
        "parameters.",
    ),
    "deit3-s16": Preset(
        _VIT_S16.replace(name="deit3-s16", pos_embed_class_row=False, layer_scale=True),
        "DeiT-III Small/16 as timm builds it (deit3_small_patch16_224): vit-s16 with LayerScale on "
        "both branches and a position table over the patches only (no_embed_class; added before the "
        "class token is prepended). 224x224, width 384, 12 blocks, 6 heads, MLP 1536, exact GELU, eps "
        "1e-6, Linear 384 -> 1000. 22,059,496 parameters.",
    ),
    "siglip-b16": Preset(
        _VIT_B16.replace(name="siglip-b16", class_token=False, pos_embed_class_row=False,
                         activation="gelu_tanh", pooling="map", num_classes=0),
        "SigLIP B/16's image tower (timm vit_base_patch16_siglip_224; big_vision's and Transformers' "
        "SiglipVisionModel): no class token, 196 learned positions, width 768, 12 pre-norm blocks, 12 "
        "heads of 64, MLP 3072, eps 1e-6, final norm on every token, then the MAP head (a learned "
        "probe, attention with biases, LayerNorm, MLP 3072 with a residual) whose vector is the output "
        "(num_classes 0). tanh GELU as big_vision and Transformers (timm uses exact GELU: the same "
        "parameters). 92,884,224 parameters.",
    ),
    "siglip2-b16-256": Preset(
        _VIT_B16.replace(name="siglip2-b16-256", image_height=256, image_width=256, class_token=False,
                         pos_embed_class_row=False, activation="gelu_tanh", pooling="map", num_classes=0),
        "SigLIP2 B/16's image tower at 256x256 (timm vit_base_patch16_siglip_256, the v2 weights' "
        "architecture; Transformers' Siglip2VisionModel with num_patches 256, one image of its table's "
        "16x16 grid): siglip-b16 with 256 learned positions. Siglip2VisionModel's Linear patch "
        "projection on (ph, pw, C)-flattened patches is this spec's patch convolution. 92,930,304 "
        "parameters.",
    ),
    "siglip2-b16-naflex": Preset(
        _VIT_B16.replace(name="siglip2-b16-naflex", image_height=512, image_width=512, batching="naflex",
                         max_patches=256, pos_grid_height=16, pos_grid_width=16,
                         pos_resample="bilinear_antialias", class_token=False, pos_embed_class_row=False,
                         activation="gelu_tanh", pooling="map", num_classes=0),
        "SigLIP2 B/16 NaFlex (Transformers' Siglip2VisionModel with num_patches 256, timm's "
        "naflexvit_base_patch16_siglip): each image patchified at its own aspect ratio, up to 256 "
        "patches of a grid at most 32x32, padded to 256 tokens with a key-padding mask; the 16x16 table "
        "resized to each image's grid by antialiased bilinear. siglip2-b16-256's weights: 92,930,304 "
        "parameters.",
    ),
    "pixtral-12b-encoder": Preset(
        _PIXTRAL.replace(name="pixtral-12b-encoder", image_height=1024, image_width=1024, patch_height=16,
                         patch_width=16, dim=1024, heads=16, head_dim=64, mlp_dim=4096, depth=24,
                         bias_free=("attn.out", "mlp.gate", "mlp.fc1", "mlp.fc2"), num_classes=0),
        "Pixtral-12B's vision encoder (its vision_config; Transformers' PixtralVisionModel defaults but "
        "hidden_act, which the checkpoint sets to silu): 1024x1024, 16x16 patches (64x64), no class token "
        "and no table, RMSNorm eps 1e-5 before and in the blocks, width 1024, 24 blocks, 16 heads of "
        "64 with Pixtral's alternating-band RoPE (theta 1e4), SwiGLU 4096, no bias anywhere, no final "
        "norm; the tokens' mean as the output (the tower returns its tokens). 403,489,792 parameters, "
        "as PixtralVisionModel's.",
    ),
    "qwen2.5-vl-blocks-112": Preset(
        _PIXTRAL.replace(name="qwen2.5-vl-blocks-112", image_height=112, image_width=112, patch_height=14,
                         patch_width=14, dim=1280, heads=16, head_dim=80, mlp_dim=3420, depth=32,
                         norm_before_blocks=False, layer_norm_eps=1e-6, qkv_bias=True, bias_free=(),
                         rope_bands="shared", num_classes=0, temporal_patch_size=2),
        "Qwen2.5-VL's vision blocks (its 7B vision_config) on one 112x112 image: 8x8 patches of 14, one "
        "112-pixel window, so its window blocks attend as its full ones do; width 1280, 32 pre-norm "
        "blocks with RMSNorm eps 1e-6, 16 heads of 80 with q/k/v and output biases, 2-D RoPE with half "
        "pairs and shared bands (theta 1e4), SwiGLU 3420 with biases, after its bias-free two-frame "
        "Conv3d patch projection (the image repeated to fill both frames). Not modelled: the 2x2 patch "
        "merger; the tokens' mean is the output, which the merge-window token order does not change. Its "
        "patch projection and blocks hold 631,975,680 parameters, as "
        "Qwen2_5_VisionTransformerPretrainedModel's.",
    ),
    "clip-b16": Preset(
        _VIT_B16.replace(name="clip-b16", norm_before_blocks=True, patch_bias=False, activation="quick_gelu",
                         layer_norm_eps=1e-5, final_norm="pooled", num_classes=0),
        "CLIP ViT-B/16's image tower as Transformers' CLIPVisionModel (OpenAI's weights): 224x224, "
        "16x16 patches plus a class token, positions with a class row, LayerNorm before the blocks "
        "(pre_layrnorm), width 768, 12 blocks, 12 heads, MLP 3072 with QuickGELU, eps 1e-5, the final "
        "LayerNorm on the pooled class token (post_layernorm; pooler_output is the output, num_classes "
        "0), and no patch bias. 85,799,424 parameters, as CLIPVisionModel's.",
    ),
    "aimv2-l14": Preset(
        _VIT_B16.replace(name="aimv2-l14", patch_height=14, patch_width=14, class_token=False,
                         pos_embed_class_row=False, patch_norm_out=True, dim=1024, depth=24, heads=8,
                         head_dim=128, norm_type="rms_norm", layer_norm_eps=1e-5, qkv_bias=False,
                         bias_free=("attn.out", "mlp.gate", "mlp.fc1", "mlp.fc2"), mlp="gated",
                         activation="silu", mlp_dim=2816, pooling="mean", num_classes=0),
        "AIMv2-L/14 at 224 as timm builds it (aimv2_large_patch14_224; Transformers' Aimv2VisionModel "
        "with use_head=False has the same tensors): 16x16 = 256 patches, no class token, 256 learned "
        "positions, RMSNorm eps 1e-5 on the embedded patches, in 24 blocks and on every token at the "
        "end, width 1024, 8 heads of 128, SwiGLU 2816 (int(1024 x 2.75)), no bias but the patch "
        "projection's, the mean of the tokens as the output (timm's global_pool='avg', num_classes 0). "
        "309,197,824 parameters.",
    ),
    "internvit-300m": Preset(
        _VIT_B16.replace(name="internvit-300m", image_height=448, image_width=448, patch_height=14,
                         patch_width=14, dim=1024, depth=24, heads=16, mlp_dim=4096, layer_scale=True,
                         final_norm="none", num_classes=0),
        "InternViT-300M-448px as timm builds it (vit_intern300m_patch14_448; Transformers' "
        "InternVLVisionModel with attention_bias=True has the same tensors): 32x32 = 1024 patches and "
        "a class token, positions with a class row, width 1024, 24 pre-norm blocks of LayerNorm eps "
        "1e-6 (its config's norm_type 'layer_norm'), 16 heads of 64, MLP 4096 with exact GELU, "
        "q/k/v with biases, LayerScale on both branches, no final norm, the class token as the "
        "output (timm's global_pool='token', num_classes 0). 304,012,288 parameters.",
    ),
    "deit-s16-distilled": Preset(
        _VIT_S16.replace(name="deit-s16-distilled", distill_token=True),
        "DeiT-S/16 distilled as timm builds it (deit_small_distilled_patch16_224): vit-s16 with a "
        "distillation token after the class token (both with position rows: 198), a second Linear "
        "384 -> 1000 on it, and logits that are the mean of the two heads. 22,436,432 parameters.",
    ),
}
PRESETS |= FULL_SIZE_PRESETS


def get_preset(name: str) -> ModelSpec:
    return pick("preset", PRESETS, name).spec


def resolve_spec(value: str | None, overrides: list[str] | None = None) -> ModelSpec:
    """Turn a `--spec` argument into a spec: a preset name, a JSON/TOML file, or a JSON document
    (a bare spec or the `compare.py spec --json` output); then apply `--set` overrides."""
    named = {name: preset.spec for name, preset in PRESETS.items()}
    spec = ModelSpec.from_argument(value or DEFAULT_PRESET, named, "--spec", "preset")
    return spec.with_overrides(overrides or [])
