"""The catalogue: every place where torch, Keras, Flax and MLX silently differ for this model, what the
spec (or the training recipe) pins, and a measured demonstration, one row per divergence.

Each row (`shared.teaching.row.Entry`) is the whole entry: what differs, the pin, its alternatives
(what a port that took the other setting computes, as a change to the reference's spec, weights or
images: `shared.teaching.transforms`), the specs they are measured on, its demonstration and its
lesson. Each framework's default is read from the installed framework
(`shared.teaching.framework_defaults`, through `ports/<fw>/defaults.py`). A demonstration runs the
same canonical weights with the pin and without it: through the float64 reference
(`Reference`, the template in `shared.teaching.demo`, with what else it measures in
`shared.teaching.forward_demos`, `family_demos` and `position_demos`; a dropped attention mask in
`batching_demos`), or, where the divergence
lives in a framework API (batch_first, optimizers, losses, dropout flags, CPU precision), through
that API (`shared.teaching.forward_demos`, `training_demos`, `precision_demos`).

A new divergence is one `Entry` in CATALOGUE; `compare.py divergences`, `diagnose`, `lessons`
and `lessons --rungs` read it from here.
"""

from __future__ import annotations

import math

from shared.teaching import batching_demos as batching
from shared.teaching import family_demos as family
from shared.teaching import family_transforms as ft
from shared.teaching import forward_demos as fwd
from shared.teaching import position_demos as pos
from shared.teaching import position_transforms as pt
from shared.teaching import precision_demos as prec
from shared.teaching import training_demos as train
from shared.teaching import transforms as t
from shared.teaching.demo import Reference
from shared.teaching.library_source import LibrarySelect
from shared.teaching.port_source import Select
from shared.teaching.row import Entry, Lesson, On
from shared.teaching.transforms import Variant

# Documented framework defaults. The catalogue (`shared.teaching.framework_defaults`) reads the
# installed frameworks' values at run time; tests/test_teaching_catalogue.py checks they agree,
# so diagnose can stay fast (no framework import) without drifting from the frameworks.
EPSILON_SOURCES: tuple[tuple[float, str], ...] = (
    (1e-3, "Keras' LayerNormalization default epsilon"),
    (1e-5, "torch's and MLX's nn.LayerNorm default eps"),
    (1e-6, "Flax's nnx.LayerNorm default epsilon"),
    (1e-7, "keras.ops.layer_normalization's default (backend.epsilon())"),
    (1e-12, "the epsilon of BERT-style Hugging Face configs (layer_norm_eps=1e-12: Transformers' "
            "ViTConfig and DeiTConfig, where timm's ViT and DeiT use 1e-6)"),
)
RMS_EPSILON_SOURCES: tuple[tuple[float, str], ...] = (
    (1.1920928955078125e-07, "torch's nn.RMSNorm default (eps=None: the dtype's machine epsilon, "
                             "float32's here)"),
    (1e-7, "keras.ops.rms_normalization's default (backend.epsilon())"),
    (1e-6, "the RMSNorm default of Keras' RMSNormalization, Flax's nnx.RMSNorm, timm's RmsNorm and "
           "Transformers' PixtralRMSNorm class"),
    (1e-5, "MLX's nn.RMSNorm default, and the epsilon Transformers' Pixtral hard-codes in each block "
           "(its config has no key for it)"),
)

# One alternative shows two entries (attention_scale's, shown by head_width too): a head width of
# dim where the spec means dim/heads scales the scores by 1/sqrt(dim).
SCALED_BY_DIM = Variant("attention scaled by 1/sqrt(dim)",
                        "your port's head width is dim, not dim/heads (the 'same integer' trap: Keras "
                        "key_dim=dim, or a hand-written 1/sqrt(dim))",
                        t.query_scaled(lambda s: math.sqrt(s.head_dim / s.dim)))

# The libraries' functions the issue-23 lessons show (shared/teaching/library_source.py reads them).
TIMM_RESAMPLE = LibrarySelect("timm", "timm.layers.pos_embed", "resample_abs_pos_embed")
HF_VIT_RESAMPLE = LibrarySelect("transformers", "transformers.models.vit.modeling_vit",
                                "ViTEmbeddings.interpolate_pos_encoding")
HF_DINOV2_RESAMPLE = LibrarySelect("transformers", "transformers.models.dinov2.modeling_dinov2",
                                   "Dinov2Embeddings.interpolate_pos_encoding")
BIG_VISION_RESAMPLE = LibrarySelect("big_vision", "big_vision.models.vit", "resample_posemb",
                                    calls="scipy.ndimage.zoom(..., order=1)")
DINOV2_RESAMPLE = LibrarySelect("dinov2", "dinov2.models.vision_transformer",
                                "DinoVisionTransformer.interpolate_pos_encoding",
                                calls="F.interpolate with scale_factor (out + 0.1) / in")
TIMM_SINCOS = "timm.layers.pos_embed_sincos"
HF_DINOV3 = "transformers.models.dinov3_vit.modeling_dinov3_vit"
TIMM_ROTATE = tuple(LibrarySelect("timm", TIMM_SINCOS, unit)
                    for unit in ("rot", "rope_rotate_half", "apply_rot_embed", "apply_rot_embed_cat"))
HF_DINOV3_ROTATE = (LibrarySelect("transformers", HF_DINOV3, "rotate_half"),
                    LibrarySelect("transformers", HF_DINOV3, "apply_rotary_pos_emb"))
# issue 36's vision towers: Pixtral's and Qwen2.5-VL's rotaries (tests/test_core_rotary_libraries.py)
HF_PIXTRAL = "transformers.models.pixtral.modeling_pixtral"
HF_QWEN2_5_VL = "transformers.models.qwen2_5_vl.modeling_qwen2_5_vl"
PIXTRAL_ROTARY, QWEN_ROTARY = "PixtralVisionRotaryEmbedding", "Qwen2_5_VLVisionRotaryEmbedding"
HF_VISION_UTILS = "transformers.vision_utils"
HF_2D_POSITIONS = LibrarySelect("transformers", HF_VISION_UTILS, "get_vision_position_ids")
HF_AXES_CONCATENATED = tuple(LibrarySelect("transformers", module, f"{unit}.recomposition_frequencies")
                             for module, unit in ((HF_PIXTRAL, PIXTRAL_ROTARY), (HF_QWEN2_5_VL, QWEN_ROTARY)))

# `tried` and `place` keep the order `diagnose` tried the first entries' alternatives in (spec
# fields first) and the lessons' reading order; an entry without them comes after, in catalogue order.
CATALOGUE: tuple[Entry, ...] = (
    Entry("head_width", "What the integer in 'heads=4, dim 32' means",
          "torch nn.MultiheadAttention's and MLX nn.MultiHeadAttention's head width is dims/num_heads; "
          "Keras' key_dim is the width of each head, so passing the same integer gives heads four "
          "times wider",
          "ModelSpec.head_dim", "forward", "4", Reference(more=fwd.key_dim_params),
          also=(SCALED_BY_DIM,),
          alternatives=(
              Variant("heads merged into one", "your port runs one head of width heads*head_dim "
                      "(num_heads=1, or heads folded into key_dim)", t.heads_merged, group="heads"),),
          lesson=Lesson("torch/Flax/MLX take the total width, Keras the per-head width",
                        (Select(unit="Attention.__init__"),), place=4),
          tried=7),
    Entry("remainder", "Trailing pixels: drop or pad",
          "a 'valid' conv/unfold drops pixels that do not fill a patch; 'same' padding adds zeros "
          "and more tokens (32x31 with 8x4 patches: 28 vs 32)", "ModelSpec.remainder", "forward",
          "17", Reference(only=("remainder=pad",), more=fwd.remainder_tokens),
          alternatives=(
              Variant("remainder=pad", "your port zero-pads the image to whole patches (Keras/Flax "
                      "padding='same')", t.spec_field("remainder", "pad")),
              Variant("remainder=drop", "your port drops the trailing pixels (a 'valid' conv, torch's "
                      "unfold)", t.spec_field("remainder", "drop"))),
          # pos_rows=32 fits both remainders (drop uses the first 28 rows)
          cases=(On("archive-keras", {"remainder": "drop", "pos_rows": 32}, name="archive-keras"),),
          lesson=Lesson("padding is explicit; the conv itself is 'valid'",
                        (Select(unit="PatchEmbed.__init__"),), place=7),
          tried=5),
    Entry("patch_layout", "Patch flatten order and NCHW/NHWC",
          "torch flattens patches (C, ph, pw) and takes NCHW; Keras and Flax flatten (ph, pw, C) "
          "and take NHWC", "convention: NHWC input, (ph, pw, C) flatten (shared/core/spec.py)", "forward",
          "16", Reference(note="with one channel both flatten orders coincide (gap 0): test with C > 1"),
          alternatives=(
              Variant("patches flattened (C, ph, pw)", "your port flattens patches channel-first "
                      "(F.unfold order) against a (ph, pw, C) kernel", t.patch_flatten_chw,
                      group="patch_order"),
              Variant("images reshaped to NCHW", "your port reshapes NHWC images to NCHW instead of "
                      "transposing them", t.images_reshaped_nchw, group="image_layout")),
          cases=(On("quadrant", {"channels": 3}, name="quadrant-rgb"),),  # one channel: both orders coincide
          lesson=Lesson("torch alone converts NHWC to NCHW", (Select(unit="Port.prepare"),), place=8),
          tried=8),
    Entry("layer_norm_eps", "LayerNorm epsilon",
          "torch and MLX 1e-5, Flax 1e-6, Keras 1e-3 by default; model configs differ too: "
          "Transformers' ViTConfig and DeiTConfig 1e-12 (BERT's) where timm's ViT and DeiT use 1e-6, "
          "so a converter must carry the source's value", "ModelSpec.layer_norm_eps", "forward", "1",
          fwd.demo_eps,
          alternatives=(*(Variant(f"layer_norm_eps={value:g}", f"your port uses {source} ({value:g})",
                                  t.epsilon(value)) for value, source in EPSILON_SOURCES),
                        Variant("patch_norm_eps=0.001", "your port passes the spec's epsilon to the "
                                "blocks' norms but builds the patch norms (vit-pytorch's LayerNorms on "
                                "each flattened patch and each token) with Keras' LayerNormalization "
                                "default", t.place_epsilon("patch", 1e-3), group="patch_norm_eps")),
          cases=(On("quadrant"), On("vit-pytorch-tiny")),  # quadrant has no patch norm
          lesson=Lesson("each port passes the spec's epsilon; none keeps its own",
                        (Select(unit="norm_layer"),), place=1),
          tried=1),
    Entry("gelu", "GELU: exact or tanh",
          "torch and keras.activations use exact erf; jax.nn.gelu, nnx.gelu and keras.ops.gelu "
          "default to the tanh approximation", "ModelSpec.activation / head_activation", "forward",
          "3", Reference(only=("gelu form flipped (MLP)",)),
          alternatives=(
              Variant("gelu form flipped (MLP)", "your port's MLP uses the other GELU form (torch and "
                      "keras.activations: exact; jax.nn.gelu, nnx.gelu and keras.ops.gelu: tanh by "
                      "default)", t.gelu("mlp"), group="activation"),
              Variant("gelu form flipped (head)", "your port's head uses the other GELU form",
                      t.gelu("head"), group="head_activation"),
              Variant("gelu form flipped (MLP and head)", "your port uses the other GELU form "
                      "everywhere", t.gelu("all"), group="activation")),
          cases=(On("quadrant"), On("archive-torch")),  # quadrant has no head MLP
          lesson=Lesson("the GELU form is passed explicitly in every port", (Select(unit="activation"),),
                        place=3),
          tried=2),
    Entry("norm_placement", "Pre-norm or post-norm",
          "x + f(LN(x)) (ViT) vs LN(x + f(x)) (torch TransformerEncoderLayer's default)",
          "ModelSpec.norm", "forward", "20", Reference(only=("norm=post",)),
          alternatives=(
              Variant("norm=pre", "your port normalises before each sub-block (pre-norm) where the "
                      "spec says post-norm", t.spec_field("norm", "pre"), group="norm"),
              Variant("norm=post", "your port normalises after each residual sum (post-norm, torch's "
                      "TransformerEncoderLayer default)", t.spec_field("norm", "post"), group="norm")),
          lesson=Lesson("pre- and post-norm are both written out", (Select(unit="Block.call"),), place=11),
          tried=3),
    Entry("pooling", "Readout: class token, mean or flatten; where the final norm sits",
          "timm reads the class token, Keras' GlobalAveragePooling1D averages every token, "
          "big_vision averages the patches; timm's fc_norm normalises after pooling",
          "ModelSpec.pooling / final_norm", "forward", "-",
          Reference(only=("pooling=mean", "final_norm=pooled", "final_norm=none"),
                    note="final_norm=pooled on the class token equals tokens (gap 0): LayerNorm "
                         "is per token"),
          alternatives=(
              Variant("pooling=cls", "your port reads the class token", t.spec_field("pooling", "cls")),
              Variant("pooling=mean", "your port averages the patch tokens", t.spec_field("pooling", "mean")),
              Variant("pooling=mean_all", "your port averages every token, the class token included "
                      "(keras-hub's ViT with pooling='gap')", t.spec_field("pooling", "mean_all")),
              Variant("final_norm=pooled", "your port applies the final LayerNorm after pooling "
                      "(timm's fc_norm)", t.spec_field("final_norm", "pooled"), group="final_norm"),
              Variant("final_norm=tokens", "your port applies the final LayerNorm to every token "
                      "before pooling", t.spec_field("final_norm", "tokens"), group="final_norm"),
              Variant("final_norm=none", "your port has no final LayerNorm", t.drop_final_norm,
                      group="final_norm")),
          lesson=Lesson("readout and final norm follow the spec",
                        (Select(fields=("pooling", "final_norm"), file="model.py"),), place=12),
          tried=4),
    Entry("pos_table_rows", "A position table larger than the sequence",
          "only the first rows receive a position; a port that slices differently (or interpolates) "
          "computes another function", "ModelSpec.pos_rows (first rows used)", "forward", "-",
          Reference(only=("position rows taken from the end",), more=fwd.first_rows_alone),
          alternatives=(
              Variant("position rows taken from the end", "your port reads the last rows of the larger "
                      "position table, not the first", t.pos_last_rows, group="pos_rows"),
              Variant("no position embedding", "your port never adds the position table", t.no_positions,
                      group="pos_embed")),
          cases=(On("archive-final"),),  # a position table larger than the sequence
          lesson=Lesson("only the first pos_rows_used rows are added",
                        (Select(unit="VisionTransformer.positions"),), place=13),
          tried=11, framework_default=False),
    Entry("batch_first", "torch nn.MultiheadAttention batch_first=False",
          "the default expects (T, B, E); a (B, T, E) tensor runs without error and attends across "
          "the batch", "convention: (B, T, E) everywhere; the torch port uses its own Attention",
          "forward", "8", fwd.demo_batch_first,
          lesson=Lesson("why torch does not use nn.MultiheadAttention",
                        (Select(unit="Attention", docstring=True),), place=6)),
    Entry("attention_scale", "Attention scale 1/sqrt(head width)",
          "every framework scales by 1/sqrt of its own head width, so the scale follows the head "
          "width; a hand-written 1/sqrt(dim) or no scale changes the function",
          "ModelSpec.head_dim", "forward", "6", Reference(),
          alternatives=(
              SCALED_BY_DIM,
              Variant("attention not scaled", "your port omits the 1/sqrt(head width) scale",
                      t.query_scaled(lambda s: math.sqrt(s.head_dim)))),
          lesson=Lesson("the scale is 1/sqrt(head width) in every port",
                        (Select(unit="Attention.call", contains=("scale",)),
                         Select(unit="Attention.explicit", contains=("scale",))), place=5),
          tried=6),
    Entry("conv_kernel_layout", "Conv2d kernel OIHW vs HWIO vs OHWI",
          "torch stores (O, I, H, W) for NCHW input, Keras and Flax (H, W, I, O), MLX (O, H, W, I) "
          "for NHWC input; a reshape instead of a transpose keeps the shape and scrambles the values",
          "canonical HWIO + conv_hwio_to_oihw (torch) / conv_hwio_to_ohwi (MLX)", "forward", "14",
          Reference(more=fwd.conv_in_frameworks),
          alternatives=(
              Variant("patch kernel reshaped to OIHW", "your port loads the HWIO patch kernel into an "
                      "OIHW Conv2d with reshape instead of transpose(3, 2, 0, 1)", t.conv_kernel_reshaped,
                      group="patch_kernel"),),
          lesson=Lesson("HWIO is copied as is, or transposed for torch",
                        (Select(file="transfer.py", contains=("patch_embed.kernel", "patch_embed.proj")),),
                        place=9),
          tried=9),
    Entry("dense_kernel_layout", "Dense kernel (out, in) vs (in, out)",
          "torch Linear weights are (out, in), Keras/Flax kernels (in, out); a square layer with a "
          "missed transpose raises nothing", "canonical (in, out) + shared.core.weights.dense_to_out_in",
          "forward", "13", Reference(more=fwd.linear_in_torch),
          alternatives=(
              Variant("dense kernels reshaped to (out, in)", "your port loads (in, out) dense kernels "
                      "into (out, in) weights with reshape instead of a transpose", t.dense_reshaped,
                      group="dense_kernel"),),
          lesson=Lesson("(in, out) kernels; torch transposes",
                        (Select(file="transfer.py", contains=("mlp.{fc}", "mlp.{name}", "fc1", "fc2")),),
                        place=10),
          tried=10),
    Entry("adamw_epsilon", "AdamW epsilon placement and defaults",
          "torch/optax add eps to sqrt(v_hat); Keras adds it before bias correction (effective "
          "eps/sqrt(1-b2^t)); defaults 1e-8 / 1e-7 / 1e-8", "TrainSpec.epsilon (Keras' epsilon hat)",
          "training", "21, 22", train.demo_adamw_eps),
    Entry("weight_decay", "Weight-decay semantics",
          "torch Adam(weight_decay) is L2, AdamW decoupled; Keras and optax decay every variable "
          "unless told otherwise (so does MLX's AdamW); defaults torch 1e-2, Keras 4e-3, optax 1e-4, "
          "MLX 1e-2",
          "TrainSpec.weight_decay / weight_decay_on", "training", "23, 24", train.demo_weight_decay),
    Entry("clipnorm", "Keras clipnorm (per variable) vs global-norm clipping",
          "clipnorm clips each variable on its own; global_clipnorm, optax.clip_by_global_norm and "
          "torch clip_grad_norm_ and MLX optim.clip_grad_norm clip the global norm (torch and MLX "
          "with a 1e-6 in the denominator)",
          "TrainSpec.clip_global_norm (global, no epsilon)", "training", "25, 26", train.demo_clipnorm),
    Entry("cross_entropy", "Cross-entropy reduction and from_logits",
          "torch takes logits and averages; Keras' sparse CE defaults to probabilities "
          "(from_logits=False); optax returns per-example losses", "loss: mean softmax CE from logits",
          "training", "32", train.demo_cross_entropy,
          lesson=Lesson("mean CE from logits in every port",
                        (Select(unit="Port.loss_and_gradients",
                                contains=("cross_entropy", "from_logits", "mean", "CrossEntropy",
                                          "optax.")),),
                        place=16)),
    Entry("dropout_flags", "Dropout placement and train/eval flags",
          "a new torch module is in train mode; Keras layers are in inference unless training=True; "
          "nnx.Dropout is active by default and Flax attention shares one mask across batch and heads",
          "ModelSpec.dropout_* (rates); eval mode for every equivalence check", "forward", "18, 19",
          train.demo_dropout,
          lesson=Lesson("dropout runs only when train=True", (Select(unit="Port.forward"),), place=14)),
    Entry("cpu_precision", "Default float precision on CPU (oneDNN, XLA, bf16)",
          "torch 'medium' matmul precision runs bf16 on AMX CPUs; autocast/mixed policies change "
          "the numbers by 1e-2; oneDNN on/off and JAX precision flags are noise on CPU",
          "each port's pin_precision() ('highest')", "numerics", "36, 37", train.demo_precision,
          lesson=Lesson("each port pins full float32 matmuls", (Select(unit="pin_precision"),), place=15)),
    Entry("layer_norm_variance", "LayerNorm variance formula",
          "Flax computes E[x^2]-E[x]^2 by default (use_fast_variance=True): cancellation when "
          "tokens carry a large mean", "use_fast_variance=False in the Flax port", "numerics", "2",
          train.demo_variance,
          lesson=Lesson("Flax alone needs use_fast_variance=False", (Select(unit="norm_layer"),), place=2)),
    Entry("attention_bias", "Attention projection bias: on or off by default",
          "torch, Keras and Flax attention layers have q/k/v/output biases by default; MLX "
          "nn.MultiHeadAttention has bias=False: canonical biases have nowhere to go",
          "ModelSpec.qkv_bias, passed to MLX as bias= (a separate output bias when False)", "forward",
          "-", Reference(more=fwd.mlx_attention_bias),
          alternatives=(
              Variant("attention biases dropped", "your port's attention has no biases (MLX "
                      "nn.MultiHeadAttention's default bias=False)", t.attention_biases_zeroed),),
          lesson=Lesson("every port passes the spec's qkv_bias; MLX's default is none",
                        (Select(unit="Attention.__init__"),), place=17),
          tried=12),
    Entry("gelu_names", "GELU variant names: 'tanh', 'precise', True, and MLX's 'fast'",
          "torch says approximate='tanh', Keras and JAX approximate=True, MLX approx='precise' (alias "
          "'tanh'); MLX's approx='fast' is x*sigmoid(1.702x), a third function 1e-2 away",
          "ModelSpec.activation: gelu -> approx='none', gelu_tanh -> approx='precise' (MLX)", "forward",
          "-", fwd.demo_gelu_names,
          lesson=Lesson("four spellings of the same two forms; MLX's 'fast' is neither",
                        (Select(unit="activation"),), place=18)),
    Entry("adam_bias_correction", "Adam bias correction: always, or off by default",
          "torch, Keras and optax always divide by (1 - beta^t); MLX's Adam/AdamW default "
          "bias_correction=False (and weight_decay=0.01), so its first steps are another update",
          "bias_correction=True and every weight_decay given (ports/mlx/train.py)", "training", "-",
          train.demo_bias_correction),
    Entry("float64_devices", "Where float64 runs",
          "MPS and MLX's GPU have no float64; JAX makes float32 unless jax_enable_x64; MLX makes a "
          "float64 NumPy array float32 unless dtype= is given, and its float64 CPU convolution keeps "
          "float32 precision", "the oracle is NumPy float64 (shared/core/reference.py), no framework's",
          "numerics", "-", train.demo_float64),
    Entry("mixed_precision_stream", "Mixed precision: the dtype of the residual stream",
          "torch autocast and Flax (dtype=bfloat16 beside float32 param_dtype) keep a float32 stream "
          "only by type promotion, once a float32 tensor (position table, class token) enters the sum: "
          "without one it stays bfloat16; Keras' global mixed_bfloat16 policy casts every layer's "
          "inputs, so every block's input is bfloat16 whatever the spec; MLX has no mixed precision. "
          "Measured 2026-12-01 without position table or class token: the logits' gap to float64 is "
          "rounding either way (quadrant 1.3e-2 global policy, 8.0e-3 pinned; vit-ti16 2.5e-2, "
          "2.4e-2); the stream's error grows faster over depth in bfloat16 (vit-ti16, relative rms "
          "after block 0 / 11: 5.2e-3 / 1.1e-2 vs 4.6e-3 / 7.5e-3)",
          "the stream in the parameter dtype (shared/core/precision.py, point 1): every port casts the "
          "patch embedding to it; Keras gives mixed_<dtype> to computing layers only, float32 to "
          "containers and LayerNorms", "numerics", "-", prec.demo_mixed_stream),
    # the newer families' parts: each measured on the tiny preset that has the feature
    Entry("layer_scale", "LayerScale dropped on load",
          "DINOv2 and DeiT-III scale each residual branch by a learned per-channel gamma (timm "
          "ls1/ls2.gamma, Transformers layer_scale1/2.lambda1); a loader that skips those tensors "
          "leaves the gammas at one and raises nothing (the public MLX DINOv2 port: cosine 0.9998 "
          "only after the fix)", "ModelSpec.layer_scale; every canonical tensor must be loaded",
          "forward", "-", Reference(more=family.trace_without_gammas),
          alternatives=(
              Variant("LayerScale gammas dropped", "your loader ignores the LayerScale gammas (timm "
                      "ls1/ls2.gamma, Transformers layer_scale1/2.lambda1) and leaves them at one (the "
                      "public MLX DINOv2 bug)", ft.layer_scale_dropped),),
          cases=(On("dinov2-reg-tiny"),),
          lesson=Lesson("the gammas are parameters every port maps and loads",
                        (Select(unit="LayerScale"),
                         Select(file="transfer.py", contains=("ls1", "ls{", ".gamma")))),
          framework_default=False),
    Entry("pool_qkv_bias", "Attention pool: query/key/value biases on or off",
          "big_vision's MAPHead (SigLIP) and timm's map pool have q/k/v biases; AlgoPerf's PyTorch "
          "attention-pool ViT had them off where its JAX one had them on (the key bias alone "
          "changes nothing: the softmax removes it)", "ModelSpec.pool_qkv_bias", "forward", "-",
          Reference(more=family.key_bias_alone),
          alternatives=(
              Variant("pool q/k/v biases dropped", "your attention pool has no query/key/value biases "
                      "(AlgoPerf's PyTorch MAP head; its JAX one has them)", ft.pool_qkv_biases_dropped),),
          cases=(On("siglip-tiny"),),
          lesson=Lesson("the pool's attention takes the spec's pool_qkv_bias",
                        (Select(unit="AttentionPool.__init__"),)),
          framework_default=False),
    Entry("quick_gelu", "QuickGELU or exact GELU",
          "OpenAI CLIP computes x*sigmoid(1.702x) (QuickGELU), open_clip's own models and most "
          "ViTs exact GELU; MLX's gelu_fast_approx (nn.GELU(approx='fast')) is QuickGELU under a "
          "GELU name", "ModelSpec.activation (quick_gelu / gelu)", "forward", "-",
          Reference(more=family.quick_gelu_values),
          alternatives=(
              Variant("QuickGELU and exact GELU swapped", "your port runs exact GELU where the spec says "
                      "QuickGELU x*sigmoid(1.702x) (OpenAI CLIP), or QuickGELU (MLX's gelu_fast_approx, "
                      "approx='fast') where it says exact GELU", ft.quick_gelu_swapped, group="activation"),),
          cases=(On("clip-tiny"),),
          lesson=Lesson("QuickGELU is written out, x * sigmoid(1.702 x), in every port",
                        (Select(unit="QuickGELU"),)),
          framework_default=False),
    Entry("swiglu", "SwiGLU: which half is the gate, and the hidden width",
          "a packed fc1 holds both halves: timm's SwiGLUPacked, DINOv2's w12 and Transformers' "
          "weights_in take the gate from the first, timm's GluMlp default (gate_last=True) from the "
          "second; DINOv2's hidden width is (int(h*2/3)+7)//8*8, a port that drops the rounding "
          "builds other shapes (refused on load, not silently wrong)",
          "ModelSpec.mlp=gated: fc2(act(gate x) * fc1 x); ModelSpec.mlp_dim is the width itself",
          "forward", "-", Reference(more=family.swiglu_widths),
          alternatives=(
              Variant("gated MLP halves swapped", "your port reads the gate from the other half of the "
                      "packed fc1 (timm's GluMlp default gate_last=True; SwiGLUPacked, DINOv2's w12 and "
                      "Transformers' weights_in are gate first)", ft.gated_halves_swapped,
                      group="gated_halves"),),
          cases=(On("dinov2-reg-tiny"),),
          lesson=Lesson("the gate is its own layer, and the activated one", (Select(unit="Mlp.call"),)),
          framework_default=False),
    Entry("norm_type", "RMSNorm or LayerNorm",
          "AIMv2, Pixtral and the Qwen2.5-VL encoder normalise with RMSNorm (x / sqrt(mean(x^2) + eps) "
          "* scale: no mean subtracted, no bias), InternViT with RMSNorm or LayerNorm by its config's "
          "norm_type; a port that builds the other kind, or loads an RMSNorm's scale into a LayerNorm "
          "with a zero bias, computes another function with the same scales",
          "ModelSpec.norm_type (every norm), each place's epsilon in derived.norm_eps", "forward", "-",
          Reference(),
          alternatives=(
              Variant("RMSNorm and LayerNorm swapped", "your port builds LayerNorms where the spec says "
                      "RMSNorm (the mean subtracted, a zero bias), or RMSNorms where it says LayerNorm",
                      ft.norm_type_swapped),),
          cases=(On("internvit-tiny"),),
          lesson=Lesson("each port builds the spec's norm kind, with its place's epsilon",
                        (Select(unit="norm_layer"),)),
          framework_default=False),
    Entry("rms_norm_eps", "RMSNorm epsilon",
          "torch's nn.RMSNorm left without eps takes the dtype's machine epsilon (1.2e-7 in float32), "
          "keras.ops.rms_normalization backend.epsilon() (1e-7), Keras' RMSNormalization, Flax and "
          "timm 1e-6, MLX 1e-5. The towers disagree too: Transformers' Pixtral hard-codes 1e-5 in "
          "its blocks where its PixtralRMSNorm class defaults to 1e-6 and its config has no key, so "
          "a port that builds the class with its default, or reads the language model's config, "
          "gets another value", "ModelSpec.layer_norm_eps and each place's <place>_norm_eps "
          "(derived.norm_eps)", "forward", "-", fwd.demo_rms_eps,
          alternatives=tuple(Variant(f"rms_norm_eps={value:g}", f"your port's RMSNorms use {source} "
                                     f"({value:g})", t.epsilon(value, "rms_norm"))
                             for value, source in RMS_EPSILON_SOURCES),
          cases=(On("internvit-tiny"),)),
    Entry("absent_key_bias", "A key bias present or absent",
          "DINOv3 has no key bias (its query, value and output have one); a key bias adds q.b to "
          "every score of a query, which the softmax cancels, so leaving it out is exact. The slip is "
          "in the packing: a port that packs the q and v biases into the first two thirds of a qkv "
          "bias gives the key the value's bias, where it cancels, and the values none",
          "ModelSpec.bias_free (attn.key), derived.has_bias", "forward", "-", Reference(),
          alternatives=(
              Variant("key bias given the value's", "your port packs the biases it has (q's, v's) into "
                      "a packed qkv bias without a zero slot for the key: the value's bias lands on the "
                      "key", ft.key_bias_given_the_values),),
          cases=(On("dinov3-tiny"),),
          lesson=Lesson("each projection has a bias only where the spec gives it one",
                        (Select(unit="Attention.__init__", contains=("bias",)),)),
          framework_default=False),
    Entry("kv_head_order", "GQA with k/v repeated in the wrong order",
          "In grouped-query attention each key/value head serves heads / kv_heads consecutive query "
          "heads (torch's repeat_interleave, Keras' and MLX's repeat, Flax's grouped reshape). Tiling "
          "them instead (torch's repeat, NumPy's tile) pairs query head h with k/v head h mod kv_heads: "
          "every shape still fits, and the heads attend with the wrong keys",
          "ModelSpec.kv_heads, derived.kv_heads", "forward", "-", Reference(),
          alternatives=(
              Variant("k/v heads tiled", "your port widens k and v to every query head with tile (or "
                      "torch's repeat) where the tower repeats each head in place", ft.kv_heads_tiled),),
          cases=(On("gqa-tiny"),),
          lesson=Lesson("each k/v head serves its own consecutive group of query heads",
                        (Select(unit="Attention", contains=("kv_heads", "group", "enable_gqa")),)),
          framework_default=False),
    Entry("register_pooling", "Registers in mean pooling",
          "timm and Transformers average the patch tokens only (class and register tokens "
          "excluded); a port that skips only the class token averages the registers in",
          "convention: mean pooling averages the patches (shared/core/spec.py)", "forward", "-",
          Reference(more=family.registers_counted),
          alternatives=(
              Variant("registers averaged with the patches", "your mean pooling skips only the class "
                      "token and averages the registers too", ft.registers_in_mean),),
          cases=(On("dinov2-reg-tiny", {"pooling": "mean"}),),
          lesson=Lesson("mean pooling skips every prefix token",
                        (Select(unit="VisionTransformer.call", contains=("prefix_tokens",)),)),
          framework_default=False),
    Entry("register_positions", "Register tokens with or without position rows",
          "DINOv2 and Transformers give registers no position (inserted after the table is added); "
          "timm's reg models without no_embed_class give them rows: a port with the other "
          "convention cuts or shifts rows of the table", "ModelSpec.pos_embed_register_rows",
          "forward", "-", Reference(more=family.register_rows_counted),
          alternatives=(
              Variant("register position rows dropped", "your port gives the registers no position "
                      "(DINOv2, Transformers) and cuts their rows from a table that has them (timm "
                      "without no_embed_class)", ft.register_rows_dropped, group="register_rows"),
              Variant("register position rows read as patch rows", "your port gives the registers no "
                      "position and adds the table's first rows, so the patches receive the register "
                      "rows", ft.register_rows_read_as_patches, group="register_rows")),
          cases=(On("dinov2-reg-tiny", {"pos_embed_register_rows": True}),),
          lesson=Lesson("zero rows for the prefix tokens the table skips",
                        (Select(unit="VisionTransformer.positions"),)),
          framework_default=False),
    Entry("distilled_heads", "Distilled DeiT: the mean of two heads or one",
          "timm (eval) and Transformers' DeiTForImageClassificationWithTeacher output the mean of "
          "the class and distillation heads; DeiTForImageClassification reads the class head "
          "alone", "convention: logits = mean of both heads (ModelSpec.distill_token)", "forward",
          "-", Reference(note="either head alone is |class - distillation| / 2 from the mean, so the "
                              "two gaps are equal; timm (eval) and Transformers' ...WithTeacher output "
                              "the mean"),
          alternatives=(
              Variant("class head alone", "your port reads the class head only, not the mean of the "
                      "class and distillation heads (Transformers' DeiTForImageClassification)",
                      ft.distilled_head_alone("class")),
              Variant("distillation head alone", "your port reads the distillation head only "
                      "(DeiTForImageClassificationWithTeacher's distillation_logits)",
                      ft.distilled_head_alone("distillation"))),
          cases=(On("deit-distilled-tiny"),),
          lesson=Lesson("the logits are the mean of both heads",
                        (Select(unit="VisionTransformer.call", contains=("head_dist",)),)),
          framework_default=False),
    # positions at another resolution and 2-D rotary embeddings (issue 23): the tables come from
    # shared/core; a resampling entry is measured with a 4x4 table resampled to the 6x5 grid of a
    # 24x20 image, one block (position_demos.resampled_on)
    Entry("pos_resample", "Resampling a position table: bicubic, zoom or bilinear",
          "a table trained at another grid is resampled: Transformers' interpolate_pos_encoding and "
          "timm (antialias=False) by F.interpolate(bicubic, size, a=-0.75, half-pixel); big_vision by "
          "scipy.ndimage.zoom(order=1), corners on corners; a bilinear resize by the half-pixel grid",
          "ModelSpec.pos_resample (+ pos_grid_height/width: the table's own grid)", "forward", "-",
          Reference(template=pos.over_grids, more=pos.conventions_paired),
          alternatives=(
              Variant("table resampled by big_vision's first-order zoom", "your port resamples the "
                      "position table with scipy.ndimage.zoom(order=1) (big_vision's resample_posemb: "
                      "corners on corners)", pt.resampled_by("big_vision_zoom")),
              Variant("table resampled bilinearly", "your port resamples the position table with a "
                      "bilinear resize (F.interpolate(mode='bilinear'))", pt.resampled_by("bilinear"))),
          cases=(pos.resampled_on("hf_bicubic"),),
          lesson=Lesson("the rows added are the table's, resampled as the spec names",
                        (Select(unit="VisionTransformer.positions"),),
                        (TIMM_RESAMPLE, HF_VIT_RESAMPLE, BIG_VISION_RESAMPLE)),
          framework_default=False),
    Entry("pos_resample_antialias", "Resampling bicubic with antialiasing or without",
          "timm's resample_abs_pos_embed defaults to antialias=True (PIL's cubic, a=-0.5, renormalised "
          "at the edges); F.interpolate and Transformers default to antialias=False (a=-0.75, edge "
          "clamped): they differ when enlarging too", "ModelSpec.pos_resample (timm_bicubic_antialias "
          "/ timm_bicubic, hf_bicubic)", "forward", "-",
          Reference(only=("table resampled by bicubic, size-based",), template=pos.over_grids,
                    note="the antialiased kernel is PIL's (a = -0.5, taps outside the table "
                         "dropped and renormalised), so it differs when enlarging too",
                    more=pos.antialias_kernels),
          alternatives=(
              Variant("table resampled by bicubic, size-based", "your port resamples the position table "
                      "with F.interpolate(bicubic, size=...) (Transformers' interpolate_pos_encoding, "
                      "timm's resample_abs_pos_embed(antialias=False))", pt.resampled_by("hf_bicubic"),
                      group="pos_resample"),
              Variant("table resampled by antialiased bicubic", "your port resamples the position table "
                      "with timm's default, antialiased bicubic (resample_abs_pos_embed(antialias=True))",
                      pt.resampled_by("timm_bicubic_antialias"), group="pos_resample")),
          cases=(pos.resampled_on("timm_bicubic_antialias"),),
          lesson=Lesson("timm passes antialias=True by default, Transformers none: each port names it "
                        "per method", (Select(unit="resample_positions"),), (TIMM_RESAMPLE, HF_VIT_RESAMPLE)),
          framework_default=False),
    Entry("pos_resample_offset", "DINOv2's +0.1 scale factor or the size",
          "DINOv2's original code passes scale_factor=(out + 0.1) / in to F.interpolate (same output "
          "size, coordinate step in / (out + 0.1)); Transformers' Dinov2 and timm pass the size; ports "
          "keep both paths to match different checkpoints", "ModelSpec.pos_resample (dinov2_legacy / "
          "hf_bicubic)", "forward", "-",
          Reference(template=pos.over_grids,
                    note="both give the same output size; the +0.1 path samples with the step "
                         "in / (out + 0.1), not in / out (shared/core/resample.py)"),
          alternatives=(
              Variant("table resampled with DINOv2's +0.1 scale factor", "your port resamples with "
                      "DINOv2's original scale_factor=(out + 0.1) / in, not the size",
                      pt.resampled_by("dinov2_legacy"), group="pos_resample"),),
          cases=(pos.resampled_on("hf_bicubic"),),
          lesson=Lesson("Transformers' Dinov2 passes the size; DINOv2's own code a scale factor with +0.1",
                        (Select(unit="resample_positions"),),
                        (HF_DINOV2_RESAMPLE, DINOV2_RESAMPLE, TIMM_RESAMPLE)),
          framework_default=False),
    Entry("rope_layout", "RoPE: halves or interleaved pairs",
          "timm's default (EVA-02) rotates dimension 2i with 2i + 1; timm's rotate_half and DINOv3 "
          "rotate i with i + head_dim / 2: the same tables paired the other way run, train and are "
          "wrong", "ModelSpec.rope (axial_half / axial_interleaved)", "forward", "-",
          Reference(template=pos.with_trace_lines, more=pos.on_timm_layout),
          alternatives=(
              Variant("RoPE halves and interleaved pairs swapped", "your port pairs each dimension with "
                      "the other partner: i with i + head_dim / 2 (timm rotate_half, DINOv3) where the "
                      "model pairs 2i with 2i + 1 (timm's default, EVA-02), or the reverse",
                      pt.rope_layout_swapped, group="rope"),),
          cases=(On("rope-tiny"),),
          lesson=Lesson("one formula, x * cos + x[partner] * sin: the partner is the layout",
                        (Select(unit="Rotary"),), (*TIMM_ROTATE, *HF_DINOV3_ROTATE)),
          framework_default=False),
    Entry("rope_coords", "RoPE coordinates: patch indices or centred",
          "timm rotates by integer patch indices (scaled to ref_feat_shape when set); DINOv3 by patch "
          "centres normalised to [-1, 1], times 2 pi", "ModelSpec.rope_coords (index / centered)",
          "forward", "-",
          Reference(template=pos.with_trace_lines,
                    note="the patch queries and keys alone move: the class and register tokens "
                         "are unrotated in both"),
          alternatives=(
              Variant("RoPE index and centred coordinates swapped", "your port rotates by integer patch "
                      "indices (timm) where the model uses patch centres in [-1, 1] times 2 pi (DINOv3), "
                      "or the reverse", pt.rope_coords_swapped),),
          cases=(On("rope-tiny"),),
          lesson=Lesson("the ports take their angles from shared/core/rotary.py; timm "
                        "rotates by patch indices, DINOv3 by centres in [-1, 1]",
                        (Select(unit="Rotary.__init__"),),
                        (LibrarySelect("timm", TIMM_SINCOS, "_build_grid"),
                         LibrarySelect("timm", TIMM_SINCOS, "RotaryEmbeddingCat.get_embed"),
                         LibrarySelect("transformers", HF_DINOV3, "get_patches_center_coordinates"),
                         LibrarySelect("transformers", HF_DINOV3, "DINOv3ViTRopePositionEmbedding.forward"))),
          framework_default=False),
    Entry("rope_axes", "RoPE axis order: rows' angles first or columns' first",
          "timm's default grid_indexing='ij', DINOv3, Pixtral and Qwen give each head's first angles to "
          "the rows; timm's rope_grid_indexing='xy' (the Perception Encoder) builds its grid with meshgrid's "
          "'xy' and gives them to the columns: same shapes, same bands, the two axes exchanged",
          "ModelSpec.rope_axes (rows_first / cols_first)", "forward", "-",
          Reference(template=pos.with_trace_lines),
          alternatives=(
              Variant("RoPE axes swapped", "your port gives each head's first angles to the rows where the "
                      "model gives them to the columns (timm's rope_grid_indexing='xy'), or the reverse",
                      pt.rope_axes_swapped),),
          cases=(On("rope-tiny"),),
          lesson=Lesson("the ports take their angles from shared/core/rotary.py; timm's 'xy' grid puts the "
                        "columns' coordinate first",
                        (Select(unit="Rotary.__init__"),),
                        (LibrarySelect("timm", TIMM_SINCOS, "_build_grid"),)),
          framework_default=False),
    Entry("rope_bands", "RoPE frequency bands: shared by both axes or alternating",
          "timm, DINOv3 and Qwen2.5-VL give rows and columns the same head_dim / 4 bands; Pixtral "
          "(Mistral's precompute_freqs_cis_2d, Transformers' PixtralVisionRotaryEmbedding) takes the "
          "1-D RoPE's head_dim / 2 bands and deals them out, the even ones to rows, the odd ones to "
          "columns: same shapes, same pairing, other angles",
          "ModelSpec.rope_bands (shared / alternating)", "forward", "-",
          Reference(template=pos.with_trace_lines),
          alternatives=(
              Variant("RoPE shared and alternating bands swapped", "your port gives both axes the same "
                      "head_dim / 4 bands (timm, DINOv3, Qwen2.5-VL) where the model deals out the 1-D "
                      "bands, even ones to rows and odd ones to columns (Pixtral), or the reverse",
                      pt.rope_bands_swapped),),
          cases=(On("pixtral-tiny"),),
          lesson=Lesson("the ports take their bands from shared/core/rotary.py; Pixtral's rows take the "
                        "even 1-D bands and its columns the odd ones",
                        (Select(unit="Rotary.__init__"),),
                        (LibrarySelect("transformers", HF_PIXTRAL,
                                       f"{PIXTRAL_ROTARY}.compute_axial_rope_parameters"),
                         LibrarySelect("transformers", HF_QWEN2_5_VL,
                                       f"{QWEN_ROTARY}.compute_axial_rope_parameters"))),
          framework_default=False),
    Entry("rope_1d", "RoPE by a 1-D token index or by 2-D positions",
          "a vision tower rotates each patch by its (row, column) position; a port that reuses a "
          "language model's rotary op with position ids 0 .. N-1 (onnxruntime's RotaryEmbedding, as "
          "onnxruntime-mobius-style ports do) rotates patch t by t times the 1-D bands: every shape "
          "fits and it runs", "convention: 2-D (row, column) positions (shared/core/rotary.py)",
          "forward", "-", pos.demo_rope_1d,
          lesson=Lesson("each patch's angles come from its row and its column, never its index",
                        (Select(unit="Rotary.__init__"),),
                        (HF_2D_POSITIONS,
                         LibrarySelect("transformers", HF_PIXTRAL, f"{PIXTRAL_ROTARY}.forward"))),
          framework_default=False),
    Entry("rope_half_reused", "RoPE with one axis's table on both halves",
          "the row angles fill one half of each head's rotary dimensions and the column angles the "
          "other; a port that computes one axis's table and reuses it for both (as ncnn-style ports "
          "do) rotates every patch of a row alike: the columns are told apart by nothing",
          "convention: [row angles, column angles] per patch (shared/core/rotary.py)", "forward", "-",
          pos.demo_rope_half_reused,
          lesson=Lesson("the row table and the column table are concatenated, never one reused",
                        (Select(unit="Rotary.__init__"),),
                        HF_AXES_CONCATENATED),
          framework_default=False),
    Entry("rope_prefix", "RoPE on the class and register tokens, or not",
          "timm's EvaAttention and DINOv3 split the prefix tokens off and rotate the patches only; a "
          "port whose table is aligned to the sequence start rotates the prefix too (and shifts every "
          "patch)", "convention: prefix tokens unrotated (shared/core/rotary.py: cos 1, sin 0 rows)",
          "forward", "-", pos.demo_rope_prefix,
          lesson=Lesson("the prefix rows of the table are cos 1, sin 0",
                        (Select(unit="Rotary", docstring=True),),
                        (LibrarySelect("timm", "timm.models.eva", "EvaAttention.forward"),
                         LibrarySelect("timm", TIMM_SINCOS, "apply_rot_embed_cat"),
                         LibrarySelect("transformers", HF_DINOV3, "apply_rotary_pos_emb"))),
          framework_default=False),
    # issue 37: images at their own sizes in one batch
    Entry("attention_mask", "The padding mask and the block-diagonal mask, or none",
          "a NaFlex batch pads each image's patches to one length and masks the padding keys; a packed "
          "sequence holds several images and attends block-diagonally (Pixtral). A port that drops the "
          "mask (an MLX port of a SigLIP2 tower dropped pixel_attention_mask) lets every real token "
          "read the padding, or the other images of its sequence",
          "convention: the batch's mask (shared/core/batching.py's attention_mask, keys only) in every "
          "attention", "forward", "-", batching.demo_attention_mask,
          lesson=Lesson("each port's attention takes the mask the batch carries, keys only",
                        (Select(unit="Attention.call", contains=("key_mask",)),),
                        (LibrarySelect("transformers", "transformers.models.siglip2.modeling_siglip2",
                                       "Siglip2VisionModel.forward"),
                         LibrarySelect("transformers", HF_PIXTRAL, "generate_block_attention_mask"))),
          framework_default=False),
    Entry("naflex_resize", "Each image's positions: antialiased bilinear, bicubic, or corners aligned",
          "a NaFlex tower resizes its learned table to every image's own grid in the forward: SigLIP2 by "
          "antialiased bilinear (Transformers' Siglip2VisionEmbeddings, timm's naflexvit_*_siglip), timm's "
          "NaFlexVit by default antialiased bicubic, Qwen3-VL by bilinear with corners aligned (no "
          "antialiasing); an MLX port of LFM2-VL's SigLIP2 tower resized by bicubic and lost a third of "
          "its top-1 agreement",
          "ModelSpec.pos_resample (bilinear_antialias / timm_bicubic_antialias / big_vision_zoom) with "
          "batching naflex", "forward", "-", Reference(),
          alternatives=(
              Variant("positions resized by antialiased bicubic", "your port resizes the table to each "
                      "image's grid by F.interpolate(bicubic, antialias=True) (timm's NaFlexVit default)",
                      pt.resampled_by("timm_bicubic_antialias")),
              Variant("positions resized with corners aligned", "your port resizes the table to each "
                      "image's grid by bilinear with align_corners=True (Qwen3-VL's linspace(0, n - 1, size) "
                      "sampling) where the half-pixel, antialiased grid was meant",
                      pt.resampled_by("big_vision_zoom"))),
          cases=(On("siglip2-naflex-tiny"),),
          lesson=Lesson("each port resizes the table to every image's grid by the spec's method",
                        (Select(unit="image_positions"),),
                        (LibrarySelect("transformers", "transformers.models.siglip2.modeling_siglip2",
                                       "Siglip2VisionEmbeddings.resize_positional_embeddings"),
                         LibrarySelect("timm", "timm.models.naflexvit",
                                       "NaFlexEmbeds._apply_learned_naflex_pos_embed"),
                         LibrarySelect("transformers", HF_VISION_UTILS,
                                       "get_vision_interpolation_indices_and_weights"))),
          framework_default=False),
    Entry("window_attention", "Window attention: each image's windows, and the blocks that attend whole",
          "Qwen2.5-VL's blocks attend within windows of 2x2 merge units (8 x 8 patches at its sizes), "
          "tiled from each image's top-left corner, except the blocks in fullatt_block_indexes, which "
          "attend over the whole image; a port that hands its window blocks the images' boundaries "
          "(windows ignored) or windows every block computes another function with every shape right "
          "(vLLM built this mask wrong, its correctness test passed, and OCR lost about 10 % of words "
          "on large images)",
          "ModelSpec.window_size and full_attention_blocks (shared/core/batching.py's window_mask)",
          "forward", "-", Reference(),
          alternatives=(
              Variant("windows ignored", "your port's window blocks attend over the whole image (the "
                      "images' boundaries handed where the windows' were meant)",
                      lambda case: t.with_spec(case, window_size=0, full_attention_blocks=())),
              Variant("every block windowed", "your port windows the full-attention blocks too "
                      "(fullatt_block_indexes not read)",
                      lambda case: t.with_spec(case, full_attention_blocks=()))),
          cases=(On("qwen2.5-vl-tiny"),),
          lesson=Lesson("the window blocks read the window mask, the full ones the batch's",
                        (Select(unit="VisionTransformer.call", contains=("window_mask",)),
                         Select(unit="Block.__init__", contains=("windowed",))),
                        (LibrarySelect("transformers", HF_QWEN2_5_VL,
                                       "Qwen2_5_VisionTransformerPretrainedModel.forward"),
                         LibrarySelect("transformers", HF_VISION_UTILS, "get_vision_window_index"))),
          framework_default=False),
    Entry("token_order", "Each image's patches in merge-block or row-major order",
          "Qwen's processors hand the tower each image's patches in merge-block order (each 2x2 merge "
          "unit's four patches together) and the merger puts four consecutive tokens side by side; a "
          "port that feeds the patches row-major (or reads merge-block patches as row-major) merges "
          "patches that are not neighbours and rotates each by another position, with every shape "
          "right (an MLX runtime's Qwen-VL tower emitted raster order; a Swift port had the merge "
          "layout wrong)", "ModelSpec.token_order (shared/core/batching.py's patch_coordinates, merge_index)",
          "forward", "-", Reference(),
          alternatives=(
              Variant("patches read in the other order", "your port lays each image's patches out in the "
                      "other order than the batch's (row-major for merge-block, or the reverse)",
                      lambda case: t.with_spec(case, token_order="raster" if case.spec.token_order ==
                                               "merge_block" else "merge_block")),),
          cases=(On("qwen2.5-vl-tiny"),),
          lesson=Lesson("the merger gathers each merge unit by the batch's index, whatever the order",
                        (Select(unit="Merger.call"),),
                        (HF_2D_POSITIONS,
                         LibrarySelect("transformers", HF_QWEN2_5_VL, "Qwen2_5_VLPatchMerger.forward"))),
          framework_default=False),
)


def entry(key: str) -> Entry:
    for e in CATALOGUE:
        if e.key == key:
            return e
    raise KeyError(key)
