"""The catalogue: every place where torch, Keras, Flax and MLX silently differ for this model, what the
spec (or the training recipe) pins, and a measured demonstration.

Each entry states what differs, reads each framework's default from the installed framework
(`shared.teaching.framework_defaults`, through `ports/<fw>/defaults.py`), names the pin, and
demonstrates the gap by running the same canonical weights with the pin and without it: through
the float64 reference with a changed spec/weights/images (`shared.teaching.variants`), or, where
the divergence lives in a framework API (batch_first, kernel layouts, optimizers, losses, dropout
flags, CPU precision), through that API (`shared.teaching.forward_demos`,
`shared.teaching.training_demos`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from shared.teaching import family_demos as family
from shared.teaching import forward_demos as fwd
from shared.teaching import position_demos as pos
from shared.teaching import precision_demos as prec
from shared.teaching import training_demos as train
from shared.teaching.demo import Demo, variants_on
from shared.teaching.framework_defaults import FRAMEWORKS, read_default


@dataclass(frozen=True)
class Entry:
    key: str
    title: str
    differs: str
    pin: str  # the spec / train-spec field or fixed convention that pins it
    kind: str  # forward | training | numerics
    rows: str  # where the measurement came from in the project's first survey (kept for JSON readers)
    demo: Callable[[], Demo]
    variants: tuple[str, ...] = ()  # shared.teaching.variants keys that model the unpinned port
    framework_default: bool = True  # False: a convention of the model code, no framework API to read

    def defaults(self) -> dict[str, str]:
        if not self.framework_default:
            return dict.fromkeys(FRAMEWORKS, "n/a")
        return {fw: read_default(self.key, fw) for fw in FRAMEWORKS}

    def run_demo(self) -> Demo:
        return self.demo()


CATALOGUE: tuple[Entry, ...] = (
    Entry("head_width", "What the integer in 'heads=4, dim 32' means",
          "torch nn.MultiheadAttention's and MLX nn.MultiHeadAttention's head width is dims/num_heads; "
          "Keras' key_dim is the width of each head, so passing the same integer gives heads four "
          "times wider",
          "ModelSpec.head_dim", "forward", "4", fwd.demo_head_width,
          ("attention scaled by 1/sqrt(dim)", "heads merged into one")),
    Entry("remainder", "Trailing pixels: drop or pad",
          "a 'valid' conv/unfold drops pixels that do not fill a patch; 'same' padding adds zeros "
          "and more tokens (32x31 with 8x4 patches: 28 vs 32)", "ModelSpec.remainder", "forward",
          "17", fwd.demo_remainder, ("remainder=pad", "remainder=drop")),
    Entry("patch_layout", "Patch flatten order and NCHW/NHWC",
          "torch flattens patches (C, ph, pw) and takes NCHW; Keras and Flax flatten (ph, pw, C) "
          "and take NHWC", "convention: NHWC input, (ph, pw, C) flatten (shared/core/spec.py)", "forward",
          "16", fwd.demo_patch_layout, ("patches flattened (C, ph, pw)", "images reshaped to NCHW")),
    Entry("layer_norm_eps", "LayerNorm epsilon",
          "torch and MLX 1e-5, Flax 1e-6, Keras 1e-3 by default; model configs differ too: "
          "Transformers' ViTConfig and DeiTConfig 1e-12 (BERT's) where timm's ViT and DeiT use 1e-6, "
          "so a converter must carry the source's value", "ModelSpec.layer_norm_eps", "forward", "1",
          fwd.demo_eps, tuple(f"layer_norm_eps={v:g}" for v in (1e-3, 1e-5, 1e-6, 1e-7, 1e-12))),
    Entry("gelu", "GELU: exact or tanh",
          "torch and keras.activations use exact erf; jax.nn.gelu, nnx.gelu and keras.ops.gelu "
          "default to the tanh approximation", "ModelSpec.activation / head_activation", "forward",
          "3", variants_on("quadrant", ("gelu form flipped (MLP)",)),
          ("gelu form flipped (MLP)", "gelu form flipped (head)", "gelu form flipped (MLP and head)")),
    Entry("norm_placement", "Pre-norm or post-norm",
          "x + f(LN(x)) (ViT) vs LN(x + f(x)) (torch TransformerEncoderLayer's default)",
          "ModelSpec.norm", "forward", "20", variants_on("quadrant", ("norm=post",)),
          ("norm=pre", "norm=post")),
    Entry("pooling", "Readout: class token, mean or flatten; where the final norm sits",
          "timm reads the class token, Keras' GlobalAveragePooling1D averages every token, "
          "big_vision averages the patches; timm's fc_norm normalises after pooling",
          "ModelSpec.pooling / final_norm", "forward", "-",
          variants_on("quadrant", ("pooling=mean", "final_norm=pooled", "final_norm=none"),
                      note="final_norm=pooled on the class token equals tokens (gap 0): LayerNorm "
                           "is per token"),
          ("pooling=cls", "pooling=mean", "pooling=mean_all", "final_norm=pooled", "final_norm=tokens",
           "final_norm=none")),
    Entry("pos_table_rows", "A position table larger than the sequence",
          "only the first rows receive a position; a port that slices differently (or interpolates) "
          "computes another function", "ModelSpec.pos_rows (first rows used)", "forward", "-",
          fwd.demo_pos_rows, ("position rows taken from the end", "no position embedding"),
          framework_default=False),
    Entry("batch_first", "torch nn.MultiheadAttention batch_first=False",
          "the default expects (T, B, E); a (B, T, E) tensor runs without error and attends across "
          "the batch", "convention: (B, T, E) everywhere; the torch port uses its own Attention",
          "forward", "8", fwd.demo_batch_first),
    Entry("attention_scale", "Attention scale 1/sqrt(head width)",
          "every framework scales by 1/sqrt of its own head width, so the scale follows the head "
          "width; a hand-written 1/sqrt(dim) or no scale changes the function",
          "ModelSpec.head_dim", "forward", "6",
          variants_on("quadrant", ("attention scaled by 1/sqrt(dim)", "attention not scaled")),
          ("attention scaled by 1/sqrt(dim)", "attention not scaled")),
    Entry("conv_kernel_layout", "Conv2d kernel OIHW vs HWIO vs OHWI",
          "torch stores (O, I, H, W) for NCHW input, Keras and Flax (H, W, I, O), MLX (O, H, W, I) "
          "for NHWC input; a reshape instead of a transpose keeps the shape and scrambles the values",
          "canonical HWIO + conv_hwio_to_oihw (torch) / conv_hwio_to_ohwi (MLX)", "forward", "14",
          fwd.demo_conv_layout,
          ("patch kernel reshaped to OIHW",)),
    Entry("dense_kernel_layout", "Dense kernel (out, in) vs (in, out)",
          "torch Linear weights are (out, in), Keras/Flax kernels (in, out); a square layer with a "
          "missed transpose raises nothing", "canonical (in, out) + shared.core.weights.dense_to_out_in",
          "forward", "13", fwd.demo_dense_layout, ("dense kernels reshaped to (out, in)",)),
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
          "training", "32", train.demo_cross_entropy),
    Entry("dropout_flags", "Dropout placement and train/eval flags",
          "a new torch module is in train mode; Keras layers are in inference unless training=True; "
          "nnx.Dropout is active by default and Flax attention shares one mask across batch and heads",
          "ModelSpec.dropout_* (rates); eval mode for every equivalence check", "forward", "18, 19",
          train.demo_dropout),
    Entry("cpu_precision", "Default float precision on CPU (oneDNN, XLA, bf16)",
          "torch 'medium' matmul precision runs bf16 on AMX CPUs; autocast/mixed policies change "
          "the numbers by 1e-2; oneDNN on/off and JAX precision flags are noise on CPU",
          "each port's pin_precision() ('highest')", "numerics", "36, 37", train.demo_precision),
    Entry("layer_norm_variance", "LayerNorm variance formula",
          "Flax computes E[x^2]-E[x]^2 by default (use_fast_variance=True): cancellation when "
          "tokens carry a large mean", "use_fast_variance=False in the Flax port", "numerics", "2",
          train.demo_variance),
    Entry("attention_bias", "Attention projection bias: on or off by default",
          "torch, Keras and Flax attention layers have q/k/v/output biases by default; MLX "
          "nn.MultiHeadAttention has bias=False: canonical biases have nowhere to go",
          "ModelSpec.qkv_bias, passed to MLX as bias= (a separate output bias when False)", "forward",
          "-", fwd.demo_attention_bias, ("attention biases dropped",)),
    Entry("gelu_names", "GELU variant names: 'tanh', 'precise', True, and MLX's 'fast'",
          "torch says approximate='tanh', Keras and JAX approximate=True, MLX approx='precise' (alias "
          "'tanh'); MLX's approx='fast' is x*sigmoid(1.702x), a third function 1e-2 away",
          "ModelSpec.activation: gelu -> approx='none', gelu_tanh -> approx='precise' (MLX)", "forward",
          "-", fwd.demo_gelu_names),
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
    Entry("layer_scale", "LayerScale dropped on load",
          "DINOv2 and DeiT-III scale each residual branch by a learned per-channel gamma (timm "
          "ls1/ls2.gamma, Transformers layer_scale1/2.lambda1); a loader that skips those tensors "
          "leaves the gammas at one and raises nothing (the public MLX DINOv2 port: cosine 0.9998 "
          "only after the fix)", "ModelSpec.layer_scale; every canonical tensor must be loaded",
          "forward", "-", family.demo_layer_scale, ("LayerScale gammas dropped",),
          framework_default=False),
    Entry("pool_qkv_bias", "Attention pool: query/key/value biases on or off",
          "big_vision's MAPHead (SigLIP) and timm's map pool have q/k/v biases; AlgoPerf's PyTorch "
          "attention-pool ViT had them off where its JAX one had them on (the key bias alone "
          "changes nothing: the softmax removes it)", "ModelSpec.pool_qkv_bias", "forward", "-",
          family.demo_pool_qkv_bias, ("pool q/k/v biases dropped",), framework_default=False),
    Entry("quick_gelu", "QuickGELU or exact GELU",
          "OpenAI CLIP computes x*sigmoid(1.702x) (QuickGELU), open_clip's own models and most "
          "ViTs exact GELU; MLX's gelu_fast_approx (nn.GELU(approx='fast')) is QuickGELU under a "
          "GELU name", "ModelSpec.activation (quick_gelu / gelu)", "forward", "-",
          family.demo_quick_gelu, ("QuickGELU and exact GELU swapped",), framework_default=False),
    Entry("swiglu", "SwiGLU: which half is the gate, and the hidden width",
          "a packed fc1 holds both halves: timm's SwiGLUPacked, DINOv2's w12 and Transformers' "
          "weights_in take the gate from the first, timm's GluMlp default (gate_last=True) from the "
          "second; DINOv2's hidden width is (int(h*2/3)+7)//8*8, a port that drops the rounding "
          "builds other shapes (refused on load, not silently wrong)",
          "ModelSpec.mlp=gated: fc2(act(gate x) * fc1 x); ModelSpec.mlp_dim is the width itself",
          "forward", "-", family.demo_swiglu, ("gated MLP halves swapped",), framework_default=False),
    Entry("register_pooling", "Registers in mean pooling",
          "timm and Transformers average the patch tokens only (class and register tokens "
          "excluded); a port that skips only the class token averages the registers in",
          "convention: mean pooling averages the patches (shared/core/spec.py)", "forward", "-",
          family.demo_register_pooling, ("registers averaged with the patches",),
          framework_default=False),
    Entry("register_positions", "Register tokens with or without position rows",
          "DINOv2 and Transformers give registers no position (inserted after the table is added); "
          "timm's reg models without no_embed_class give them rows: a port with the other "
          "convention cuts or shifts rows of the table", "ModelSpec.pos_embed_register_rows",
          "forward", "-", family.demo_register_positions,
          ("register position rows dropped", "register position rows read as patch rows"),
          framework_default=False),
    Entry("distilled_heads", "Distilled DeiT: the mean of two heads or one",
          "timm (eval) and Transformers' DeiTForImageClassificationWithTeacher output the mean of "
          "the class and distillation heads; DeiTForImageClassification reads the class head "
          "alone", "convention: logits = mean of both heads (ModelSpec.distill_token)", "forward",
          "-", variants_on("deit-distilled-tiny", ("class head alone", "distillation head alone"),
                           note="either head alone is |class - distillation| / 2 from the mean, so the "
                                "two gaps are equal; timm (eval) and Transformers' ...WithTeacher output "
                                "the mean"),
          ("class head alone", "distillation head alone"), framework_default=False),
    # positions at another resolution and 2-D rotary embeddings (issue 23)
    Entry("pos_resample", "Resampling a position table: bicubic, zoom or bilinear",
          "a table trained at another grid is resampled: Transformers' interpolate_pos_encoding and "
          "timm (antialias=False) by F.interpolate(bicubic, size, a=-0.75, half-pixel); big_vision by "
          "scipy.ndimage.zoom(order=1), corners on corners; a bilinear resize by the half-pixel grid",
          "ModelSpec.pos_resample (+ pos_grid_height/width: the table's own grid)", "forward", "-",
          pos.demo_pos_resample, ("table resampled by big_vision's first-order zoom",
                                  "table resampled bilinearly"), framework_default=False),
    Entry("pos_resample_antialias", "Resampling bicubic with antialiasing or without",
          "timm's resample_abs_pos_embed defaults to antialias=True (PIL's cubic, a=-0.5, renormalised "
          "at the edges); F.interpolate and Transformers default to antialias=False (a=-0.75, edge "
          "clamped): they differ when enlarging too", "ModelSpec.pos_resample (timm_bicubic_antialias "
          "/ timm_bicubic, hf_bicubic)", "forward", "-", pos.demo_pos_resample_antialias,
          ("table resampled by bicubic, size-based", "table resampled by antialiased bicubic"),
          framework_default=False),
    Entry("pos_resample_offset", "DINOv2's +0.1 scale factor or the size",
          "DINOv2's original code passes scale_factor=(out + 0.1) / in to F.interpolate (same output "
          "size, coordinate step in / (out + 0.1)); Transformers' Dinov2 and timm pass the size; ports "
          "keep both paths to match different checkpoints", "ModelSpec.pos_resample (dinov2_legacy / "
          "hf_bicubic)", "forward", "-", pos.demo_pos_resample_offset,
          ("table resampled with DINOv2's +0.1 scale factor",), framework_default=False),
    Entry("rope_layout", "RoPE: halves or interleaved pairs",
          "timm's default (EVA-02) rotates dimension 2i with 2i + 1; timm's rotate_half and DINOv3 "
          "rotate i with i + head_dim / 2: the same tables paired the other way run, train and are "
          "wrong", "ModelSpec.rope (axial_half / axial_interleaved)", "forward", "-",
          pos.demo_rope_layout, ("RoPE halves and interleaved pairs swapped",), framework_default=False),
    Entry("rope_coords", "RoPE coordinates: patch indices or centred",
          "timm rotates by integer patch indices (scaled to ref_feat_shape when set); DINOv3 by patch "
          "centres normalised to [-1, 1], times 2 pi", "ModelSpec.rope_coords (index / centered)",
          "forward", "-", pos.demo_rope_coords, ("RoPE index and centred coordinates swapped",),
          framework_default=False),
    Entry("rope_prefix", "RoPE on the class and register tokens, or not",
          "timm's EvaAttention and DINOv3 split the prefix tokens off and rotate the patches only; a "
          "port whose table is aligned to the sequence start rotates the prefix too (and shifts every "
          "patch)", "convention: prefix tokens unrotated (shared/core/rotary.py: cos 1, sin 0 rows)",
          "forward", "-", pos.demo_rope_prefix, framework_default=False),
)


def entry(key: str) -> Entry:
    for e in CATALOGUE:
        if e.key == key:
            return e
    raise KeyError(key)
