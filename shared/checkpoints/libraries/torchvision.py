"""torchvision `VisionTransformer` (`vit_b_16` family) state dicts.

torchvision builds: a class token `class_token (1, 1, D)`, `conv_proj` (OIHW), a position table
`encoder.pos_embedding (1, N+1, D)` with a class row, `encoder.layers.encoder_layer_i` blocks
with `nn.MultiheadAttention` (packed `in_proj_weight (3D, D)`, head width D / heads), an MLP
`mlp.0` / `mlp.3`, `encoder.ln` and `heads.head`. Its conventions, applied without asking:
LayerNorm eps 1e-6 (`partial(nn.LayerNorm, eps=1e-6)`), exact GELU, square images and patches,
3 input channels. The head count is not stored anywhere: it must be given (`--set heads=12`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from shared.checkpoints.common import (
    Inference,
    Raw,
    require,
    require_class_token_readout,
    require_plain_blocks,
    square_grid,
    width_per_head,
)
from shared.checkpoints.decoding import tensor_shape
from shared.checkpoints.live import Reading, module_of
from shared.checkpoints.tensor_files import TORCH_SUFFIXES, check_written_type, encode_tensors, read_tensors
from shared.core.files import write_output
from shared.core.mapping import Table
from shared.core.spec import ModelSpec
from shared.errors import WeightsError

# The plug-in's place in the format list, its formats (name -> what `convert --help` says), and
# whether its checkpoint is a folder: literals, read without importing the module.
ORDER = 10
FORMATS = {
    "torchvision": ("torchvision.models.VisionTransformer state dict (.pth/.pt/.safetensors)"),
}
WRITES_FOLDER = False
# The file types `convert --to torchvision` writes: torchvision publishes its weights as torch files
# (`torch.hub.load_state_dict_from_url` -> torch.load) and a user may load a safetensors state dict
# into the same model; an `.npz` is no torchvision file at all.
OUT_SUFFIXES = (".safetensors", *TORCH_SUFFIXES)

TARGET = "torchvision VisionTransformer"


def read(path: Path, config: Path | None) -> tuple[Raw, dict[str, Any] | None, str]:
    if config is not None:
        raise WeightsError("--config: torchvision checkpoints have no config file; pass --set heads=N")
    return read_tensors(path), None, repr(str(path))


def refuse_unsupported(fmt: str, source: str, raw: Raw) -> None:
    if any(k.startswith("heads.pre_logits") for k in raw):
        raise WeightsError(f"{fmt} checkpoint {source}: tensor 'heads.pre_logits.weight' "
                           "(representation_size, a Linear + tanh before the head) has no spec "
                           "field (head_activation is gelu or gelu_tanh)")
    if any(k.startswith("conv_proj.conv_") for k in raw):
        raise WeightsError(f"{fmt} checkpoint {source}: tensors 'conv_proj.conv_*' (a convolutional "
                           "stem, conv_stem_configs) have no spec field")


def infer(fmt: str, raw: Raw, config: dict[str, Any] | None, given: dict[str, Any]) -> Inference:
    inf = Inference(fmt)
    conv = tensor_shape(inf, raw, "conv_proj.weight", "out, in, height, width")
    dim, channels, ph, pw = conv
    where = f"tensor 'conv_proj.weight' {conv}"
    for name, value in (("dim", dim), ("channels", channels), ("patch_height", ph), ("patch_width", pw)):
        inf.fact(name, value, where)
    rows = tensor_shape(inf, raw, "encoder.pos_embedding", "batch, rows, width")[1]
    side = square_grid(rows - 1)
    if side is None:
        raise WeightsError(f"{fmt} checkpoint: tensor 'encoder.pos_embedding' has {rows} rows; "
                           "torchvision needs (image/patch)^2 + 1 (a square grid plus the class row)")
    where = f"tensor 'encoder.pos_embedding' ({rows} rows = {side}x{side} patches + class row)"
    inf.fact("image_height", side * ph, where)
    inf.fact("image_width", side * pw, where)
    depth = sum(1 for k in raw if k.endswith(".ln_1.weight"))
    inf.fact("depth", depth, f"{depth} 'encoder.layers.encoder_layer_*' blocks")
    fc1 = "encoder.layers.encoder_layer_0.mlp.0.weight"
    inf.fact("mlp_dim", tensor_shape(inf, raw, fc1, "out, in")[0], f"tensor {fc1!r}")
    inf.fact("num_classes", tensor_shape(inf, raw, "heads.head.weight", "classes, width")[0],
             "tensor 'heads.head.weight'")
    fixed = {"class_token": True, "pos_embed": "learned", "pos_embed_class_row": True, "pos_rows": None,
             "norm": "pre", "qkv_bias": True, "final_norm": "tokens", "pooling": "cls",
             "head_hidden": (), "remainder": "drop"}
    for name, value in fixed.items():
        inf.fact(name, value, "torchvision's VisionTransformer architecture")
    inf.convention("layer_norm_eps", 1e-6, "torchvision's norm_layer")
    inf.convention("activation", "gelu", "torchvision's nn.GELU")
    inf.asks["heads"] = "torchvision state dicts do not record it; head width = width / heads"
    if "heads" in given and given.get("dim", dim) == dim:  # a contradicting dim is reported first
        inf.fact("head_dim", width_per_head(fmt, dim, "tensor 'conv_proj.weight'",
                                            given["heads"], "spec field heads"),
                 "width / heads (nn.MultiheadAttention)")
    return inf


def check_exportable(fmt: str, s: ModelSpec) -> None:
    require_class_token_readout(TARGET, s)
    require_plain_blocks(TARGET, s)
    require(s.qkv_bias, TARGET, "qkv_bias", s.qkv_bias, "true")
    require(s.image_height == s.image_width, TARGET, "image_width", s.image_width, "square images")
    require(s.patch_height == s.patch_width, TARGET, "patch_width", s.patch_width, "square patches")
    require(s.image_height % s.patch_height == 0, TARGET, "image_height", s.image_height,
            "a multiple of the patch size")
    require(s.channels == 3, TARGET, "channels", s.channels, "3 (conv_proj is built for RGB)")
    require(s.layer_norm_eps == 1e-6, TARGET, "layer_norm_eps", s.layer_norm_eps, "1e-06")
    require(s.activation == "gelu", TARGET, "activation", s.activation, "gelu (exact)")


ROWS = """
cls_token                                  class_token                                   batch_token
pos_embed                                  encoder.pos_embedding                         batch
patch_embed.kernel                         conv_proj.weight                              conv
patch_embed.bias                           conv_proj.bias
blocks.{i}.{n:norm1=ln_1|norm2=ln_2}.{w:scale=weight|bias}  {block}.{n}.{w}
blocks.{i}.attn.{p:query|key|value}.kernel {block}.self_attention.in_proj_weight         heads_linear
blocks.{i}.attn.{p:query|key|value}.bias   {block}.self_attention.in_proj_bias           heads_bias
blocks.{i}.attn.out.kernel                 {block}.self_attention.out_proj.weight        heads_out_linear
blocks.{i}.attn.out.bias                   {block}.self_attention.out_proj.bias
blocks.{i}.mlp.{fc:fc1=0|fc2=3}.kernel     {block}.mlp.{fc}.weight                       linear
blocks.{i}.mlp.{fc:fc1=0|fc2=3}.bias       {block}.mlp.{fc}.bias
final_norm.{w:scale=weight|bias}           encoder.ln.{w}
head.out.kernel                            heads.head.weight                             linear
head.out.bias                              heads.head.bias
"""


def table(fmt: str, s: ModelSpec) -> Table:
    return Table(ROWS, fmt, block="encoder.layers.encoder_layer_{i}")


def write(fmt: str, s: ModelSpec, raw: Raw, out: Path, force: bool = False) -> list[str]:
    check_written_type(fmt, out, OUT_SUFFIXES)
    write_output(out, encode_tensors(out, raw), force=force)
    return [f"load with torchvision.models.VisionTransformer(image_size={s.image_height}, "
            f"patch_size={s.patch_height}, num_layers={s.depth}, num_heads={s.heads}, "
            f"hidden_dim={s.dim}, mlp_dim={s.mlp_dim}, num_classes={s.num_classes})"]


# ==== a live model ==================================================================================
def read_live(model: Any) -> Reading | None:
    """torchvision's VisionTransformer keeps its constructor arguments as attributes; the head
    count is its attention modules' (`encoder.layers[0].self_attention.num_heads`)."""
    if not module_of(model).startswith("torchvision.models.vision_transformer"):
        return None
    r = Reading(f"torchvision {type(model).__name__}", fmt="torchvision")
    for name, attr in (("image_height", "image_size"), ("image_width", "image_size"),
                       ("patch_height", "patch_size"), ("patch_width", "patch_size"), ("dim", "hidden_dim"),
                       ("mlp_dim", "mlp_dim"), ("num_classes", "num_classes")):
        if isinstance(getattr(model, attr, None), int):
            r.fact(name, int(getattr(model, attr)), f"torchvision: model.{attr}")
    r.plain_vit("torchvision VisionTransformer's architecture")
    layers = getattr(getattr(model, "encoder", None), "layers", None)
    if layers is not None and len(layers):
        r.fact("heads", int(layers[0].self_attention.num_heads),
               "torchvision: model.encoder.layers[0].self_attention.num_heads")
    if getattr(model, "representation_size", None):
        r.notes.append(f"torchvision: model.representation_size = {model.representation_size} (a Linear + "
                       "tanh before the head) has no spec field")
    return r
