"""keras-hub (Keras 3's model library, v0.32), as one plug-in: its presets read and written (a
`save_to_preset` directory, or a `.weights.h5` file with `--config`), a live keras-hub model read
as its preset is (`read_live`), and the ViT the peers time built (`build_model`). Each vision
class is a family (`Family`: its variable paths as a mapping table, what its `get_config()` says
with keras-hub's own defaults applied and printed where a key is absent, what its architecture
fixes, and how its `.weights.h5` groups are named when portbench writes one). Sections: the
presets, then each family, then a live model.

## Presets

keras-hub (Keras 3's model library) presets: a `save_to_preset` directory (config.json +
model.weights.h5, and task.json + task.weights.h5 for a task such as ViTImageClassifier), or a
`.weights.h5` file with `--config` (a config.json or task.json).

The config's class picks the family (`FAMILIES`: ViT, DeiT, DINOv2, the SigLIP and CLIP image
towers); a field the config omits takes the class's keyword default, and each default applied
is printed. Each key a family reads is held to its row (`BACKBONE_KEYS`, `TASK_KEYS`) under its path
in the file (`config.num_layers`; `config.backbone.config.num_layers` in task.json) before it is used,
and a task's `num_classes` to its head's columns.

Names are Keras' variable paths, `<layer path>/<variable name>` (`v.path`: what a Keras model
names its variables in memory, so one table binds a preset and a live keras-hub object, as
`verify --model` does). The h5 file stores each layer's variables by index under the attribute
path Keras saves it at (`layers/vi_t_encoder/encoder_layers/vi_t_encoder_block/layer_norm_1/vars/0`),
with the layer's name in each `vars` group's `name` attribute: the layer path is read from those
names (the backbone nested in a task adds none, as in `v.path`; a top layer's `<backbone name>_`
prefix, which DINOv2, SigLIP and CLIP add when built with a name as `from_preset` does, is
dropped), and the variable's name from its index (the family's `variables`, which for DINOv2
depend on the config). The h5 is read through `shared/core/hdf5.py`, which reads nothing outside
the file and no data before the whole file is checked; a dataset the family does not
name is refused in one line naming it. The optimizer's state (`optimizer/...`) is training
state, not part of the function: it is not read. Integer variables are read only where a family
names index tensors (`position_ids`), which it checks and marks inert.


## ViT and DeiT

- `ViTBackbone` (+ `ViTImageClassifier`): `vit_patching_and_embedding/{class_token (1, 1, D),
  patch_embedding (Conv2D, HWIO), position_embedding (Embedding, (N[+1], D))}`,
  `vit_encoder/transformer_block_{k}/{ln_1, mha/{query,key,value,attention_output} (Keras
  MultiHeadAttention: (D, H, hd) kernels, the canonical layout), ln_2, mlp/{dense_1, dense_2}}`
  with k = block + 1 (Keras' own 1-based names), `vit_encoder/ln` on every token, then the task's
  `predictions`. The MLP's "gelu" is Keras' exact one; every LayerNorm has the config's
  `layer_norm_epsilon`. Pooling `token` reads the class token, `gap` averages every token, the
  class token included (`pooling=mean_all`). A backbone alone outputs every token: the spec reads
  the class token, ViTImageClassifier's default.
- `DeiTBackbone` (+ `DeiTImageClassifier`): the same blocks under `deit_encoder` (the MLP as
  `mlp/dense` and `output_layer/output`), with `deit_patching_and_embedding/{class_token,
  distillation_token, position_embedding (1, N+2, D)}`: the table covers both tokens. keras-hub
  gives the distillation token no head (its classifier reads the class token, or averages every
  token with `gap`), so it is not the spec's `distill_token` (whose output averages two heads):
  it is one learned token after the class token with its own position row, the spec's
  `registers=1` with `pos_embed_register_rows`. A backbone alone outputs every token: the spec
  reads the class token.

## DINOv2

`embeddings/{cls_token (1, 1, D), mask_token, register_tokens (1, R, D), interpolated_position_embeddings,
position_embeddings (1, N+1, D), patch_embeddings/projection (Conv2D, HWIO)}`,
`encoder/layers_{i}/{norm1, attention/attention/{query,key,value,attention_output}, layer_scale1/lambda1,
norm2, mlp/{fc1, fc2} or mlp/{weights_in, weights_out}, layer_scale2/lambda1}` (0-based), and
`layernorm` on every token. Every LayerNorm's epsilon is fixed at 1e-6; the MLP's "gelu" is
Keras' exact one. The registers are inserted after the class token once the position table
(class row + patches) is added: they get no row. A backbone alone outputs every token: the spec
reads the class token (keras-hub 0.32 has no DINOv2 task).

- The embedding layer saves its trainable variables first, then `position_embeddings` (not
  trainable): which index holds which variable depends on `use_mask_token` and
  `num_register_tokens` (`variables`).
- `position_embeddings` is the table the model computes with: loading a preset rebuilds
  `interpolated_position_embeddings` from it (`load_own_variables`), so the saved copy is inert,
  and so is `mask_token` (used only with training masks). A `position_embedding_shape` other than
  `image_shape` makes keras-hub resize the table at load by `keras.ops.image.resize(bicubic)`,
  whose kernel depends on the Keras backend: no method of shared/core/resample.py is exactly
  that, so it is refused.
- The SwiGLU MLP (`use_swiglu_ffn`) packs its two first layers in `weights_in` (D, 2h), the
  SiLU half first, with h = (int(intermediate_dim * 2/3) + 7) // 8 * 8 (the spec's mlp_dim).

## The SigLIP and CLIP image towers

keras-hub's image towers of its contrastive models (v0.32) as checkpoint families: the
`SigLIPVisionEncoder` and the `CLIPVisionEncoder`, each saved alone (`save_to_preset` on the
encoder). Their output is the pooled image embedding (the spec with `num_classes = 0`).

- SigLIP: `embedding/{patch_embedding (Conv2D, HWIO), position_embedding (Embedding, (N, D): the
  patches only, no class token), position_ids}`, `encoder_block_{i}/{layer_norm1, self_attn,
  layer_norm2, mlp/{fc1, fc2}}` (0-based), `post_layer_norm` on every token, then the MAP head
  `head/{variable (the probe, (1, 1, D): keras-hub's add_weight gives it no name), attention,
  layernorm, mlp/{fc1, fc2}}` with the blocks' heads, width and activation (`map` pooling, the
  attention's biases on). The blocks' and the head's LayerNorms have `layer_norm_epsilon`, but
  `post_layer_norm`'s is fixed at 1e-6: another epsilon is refused (the spec has one).
  `intermediate_activation` "gelu_approximate" (its default) is the tanh GELU, "gelu" the exact one.
- CLIP: `embedding/{class_embedding (D,), position_ids, patch_embedding (no bias),
  position_embedding ((N+1, D))}`, `pre_layer_norm` (the spec's `norm_before_blocks`),
  `encoder_block_{i}/{layer_norm_1, attention, layer_norm_2, dense_1, dense_2}` and `layer_norm`
  on every token; every epsilon is fixed at 1e-5. The encoder outputs every token: the spec reads
  the class token (what CLIPBackbone's vision pooler does). "quick_gelu" (its default) is
  x * sigmoid(1.702 x).
- `position_ids` (an int64 (1, rows) variable) picks the table row each token reads. The spec
  adds row i to token i, so it must hold 0 .. rows-1 and is then inert. SigLIP fills it at build;
  CLIP builds it as zeros and leaves it so (a preset converted from another library brings its
  ids), so a random-initialised keras-hub CLIP gives every token row 0: such a file is refused
  naming the tensor. Export writes 0 .. rows-1.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from shared.checkpoints.common import (
    LATER_FEATURES,
    Inference,
    Raw,
    require,
    require_plain_blocks,
    swiglu_width,
)
from shared.checkpoints.decoding import SIZE, Key, decode_config, pair
from shared.checkpoints.live import Reading, module_of
from shared.checkpoints.tensor_files import read_config
from shared.core.files import write_folder
from shared.core.hdf5 import Dataset, Group, open_hdf5
from shared.core.mapping import Table
from shared.core.spec import ModelSpec
from shared.errors import SpecError, WeightsError

# The plug-in's place in the format list, its formats (name -> what `convert --help` says), and
# whether its checkpoint is a folder: literals, read without importing the module.
ORDER = 50
FORMATS = {
    "keras_hub": ("keras-hub ViT, DeiT (backbone or classifier), DINOv2, SigLIP and CLIP image towers: a "
                  "save_to_preset directory (config.json + model.weights.h5, task.json + "
                  "task.weights.h5), or a .weights.h5 with --config"),
}
WRITES_FOLDER = True

# ==== families =======================================================================================
Variables = dict[str, tuple[str, ...]]


@dataclass(frozen=True)
class Family:
    """One keras-hub backbone class (and the task class that holds it), as a checkpoint family."""

    backbone: str
    task: str | None  # None: keras-hub has no task portbench can express around this backbone
    rows: Callable[[ModelSpec], str]
    infer: Callable[[Inference, Raw, dict[str, Any], dict[str, Any] | None], None]
    check: Callable[[str, ModelSpec], None]
    configs: Callable[[ModelSpec], tuple[dict[str, Any], dict[str, Any] | None]]
    group: Callable[[str], str]
    # A layer's variables in saving order, by the layer's name, for a backbone config: the h5
    # file stores them by index (`vars/0`, `vars/1`), and Keras names them `<layer path>/<name>`.
    variables: Callable[[dict[str, Any]], Variables]
    task_layers: tuple[str, ...] = ()  # the task's own layers (task.weights.h5); the rest is the backbone's
    inert: tuple[str, ...] = ()  # saved, but no part of the function (keras-hub rebuilds or ignores them)
    extras: Callable[[ModelSpec, Raw], Raw] = field(default=lambda s, raw: {})  # inert ones export writes
    features: tuple[str, ...] = ()  # the spec's later features (common.LATER_FEATURES) it builds
    keys: tuple[str, ...] = ()  # the backbone's get_config() keys it reads (BACKBONE_KEYS)
    task_keys: tuple[str, ...] = ()  # the task's (TASK_KEYS)


# ---- what the families share ---------------------------------------------------------------
COMMON_VARIABLES: Variables = {  # Keras' own layers: LayerNormalization, Dense/Conv2D, MultiHeadAttention
    **dict.fromkeys(("query", "key", "value", "attention_output"), ("kernel", "bias")),
}
NORM = ("gamma", "beta")
DENSE = ("kernel", "bias")


# Every get_config() key a family reads, its type as the JSON holds it and the spec fields it sets
# (decoding.py's `Key`): held to it under its path in the file read (`config.num_layers` in
# config.json, `config.backbone.config.num_layers` in task.json), before anything uses it.
IMAGE_SHAPE = tuple[int, int, int]  # [height, width, channels]
BACKBONE_KEYS: dict[str, Key] = {key.name: key for key in (
    Key("image_shape", IMAGE_SHAPE, ("image_height", "image_width", "channels")),
    Key("patch_size", SIZE, ("patch_height", "patch_width")),  # one side, or [height, width]
    Key("num_layers", int, ("depth",)),
    Key("num_heads", int, ("heads",)),
    Key("hidden_dim", int, ("dim",)),
    Key("mlp_dim", int, ("mlp_dim",)),  # ViT's
    Key("intermediate_dim", int, ("mlp_dim",)),  # DeiT's, DINOv2's and the towers'
    Key("layer_norm_epsilon", float, ("layer_norm_eps",)),
    Key("use_mha_bias", bool, ("qkv_bias",)),
    Key("use_mlp_bias", bool, ("bias_free",)),
    Key("use_class_token", bool, ("class_token",)),
    Key("use_patch_bias", bool, ("patch_bias",)),
    Key("num_register_tokens", int, ("registers",), positive=False),  # DINOv2's
    Key("use_mask_token", bool),
    Key("use_swiglu_ffn", bool, ("mlp",)),
    # (height, width), as keras-hub's DINOv2 converter writes it, or image_shape's three: it reads two
    Key("position_embedding_shape", tuple[int, int] | IMAGE_SHAPE, ("image_height", "image_width")),
    Key("intermediate_activation", str, ("activation",)),  # the towers'
    Key("intermediate_output_index", int | None, positive=False, at_most=1 << 10),  # CLIP's
    Key("name", str),  # a named backbone's weights file prefixes its layers' paths with it
)}
TASK_KEYS: dict[str, Key] = {key.name: key for key in (  # ViTImageClassifier's and DeiTImageClassifier's
    Key("num_classes", int, ("num_classes",)),
    Key("pooling", Literal["token", "gap"], ("pooling",)),
    Key("activation", str | None),
    Key("intermediate_dim", int | None, ("head_hidden",)),
)}


def decoded(config: dict[str, Any], path: str, names: tuple[str, ...],
            table: dict[str, Key]) -> dict[str, Any]:
    """The keys `names` of the object at `path` in the file read ('config.', 'config.backbone.config.'),
    each held to its row in `table` under its whole path; an absent one is left out."""
    values = decode_config(config, [replace(table[name], name=path + name) for name in names])
    return {name.removeprefix(path): value for name, value in values.items()}


def size_pair(value: Any) -> tuple[int, int]:
    """A decoded `patch_size` as (height, width)."""
    return pair(value)


def with_defaults(inf: Inference, cls: str, required: tuple[str, ...], defaults: dict[str, Any],
                  backbone: dict[str, Any], task: dict[str, Any] | None = None) -> dict[str, Any]:
    """The config with the class's keyword defaults for absent keys (each one noted)."""
    for key in required:
        if key not in backbone:
            raise SpecError(f"keras_hub config: {cls}'s {key!r} is missing (a required argument)")
    for key, value in defaults.items():
        if key not in backbone and key not in (task or {}):
            inf.notes.append(f"keras-hub default applied: {key}={value!r}")
    return {**defaults, **backbone, **(task or {})}


def size_facts(inf: Inference, raw: Raw, cfg: dict[str, Any], kernel: str, block: str) -> dict[str, Any]:
    """The sizes every family's config states: image_shape, patch_size and hidden_dim checked
    against the patch kernel (channels_last HWIO), num_layers against the blocks the checkpoint
    holds (`block`: one variable per block, its number as {i}), and num_heads."""
    dim, depth, heads = int(cfg["hidden_dim"]), int(cfg["num_layers"]), int(cfg["num_heads"])
    shape = cfg["image_shape"]
    if not (isinstance(shape, (list, tuple)) and len(shape) == 3):
        raise SpecError(f"keras_hub config image_shape = {shape!r}: expected [height, width, channels]")
    found = inf.need(raw, kernel)
    (ph, pw) = size_pair(cfg["patch_size"])
    if tuple(found.shape) != (ph, pw, shape[2], dim):
        raise SpecError(f"keras_hub config image_shape = {shape!r}, patch_size = {cfg['patch_size']!r} and "
                        f"hidden_dim = {dim} contradict tensor {kernel!r} {found.shape} (channels_last HWIO)")
    pattern = re.escape(block).replace(re.escape("{i}"), r"\d+")
    found = sum(1 for k in raw if re.fullmatch(pattern, k))
    what = block.partition("{i}")[0] + "*"
    if found != depth:
        raise SpecError(f"keras_hub config num_layers = {depth} contradicts the {found} {what!r} blocks "
                        "in the checkpoint")
    return {"image_height": int(shape[0]), "image_width": int(shape[1]), "channels": int(shape[2]),
            "patch_height": ph, "patch_width": pw, "dim": dim, "depth": depth, "heads": heads,
            "head_dim": dim // heads}


def check_position_ids(raw: Raw, name: str, rows: int) -> None:
    """SigLIP's and CLIP's embedding saves the row each token reads from the position table
    (`position_ids`): the spec adds row i to token i, so the file must hold 0 .. rows-1."""
    ids = raw.get(name)
    expected = np.arange(rows)[None]
    if ids is None or ids.shape != expected.shape or not np.array_equal(ids, expected):
        seen = "missing" if ids is None else f"{ids.shape} starting {np.asarray(ids).ravel()[:4].tolist()}"
        raise WeightsError(f"keras_hub checkpoint: tensor {name!r} is {seen}; expected [[0 .. {rows - 1}]] "
                           "(token i reads position row i; keras-hub's CLIP builds it as zeros and "
                           "relies on the preset to fill it)")


def position_ids(name: str, s: ModelSpec) -> Raw:
    """The position ids an exported SigLIP or CLIP preset needs: 0 .. rows-1, Keras' int64."""
    return {name: np.arange(s.derived.pos_rows_total, dtype=np.int64)[None]}


# Keras' MultiHeadAttention saves its four Dense layers under these attributes, in every family.
MHA_GROUPS = {"query": "query_dense", "key": "key_dense", "value": "value_dense",
              "attention_output": "output_dense"}


def layer_groups(stem: str, saved: str, base: int, named: dict[str, str]) -> Callable[[str], str]:
    """A family's `group`: one segment of a variable's layer path -> its h5 group (the attribute
    Keras saves the layer under). A block (`{stem}{k}`, numbered from `base`) is in the list Keras
    saves under the class's name, deduplicated (`saved`, `saved_1`, ...); another layer is
    `named`'s or Keras' MultiHeadAttention's, else its own name."""
    def group(name: str) -> str:
        number = name[len(stem):]
        if name.startswith(stem) and number.isdigit():
            k = int(number) - base
            return saved + (f"_{k}" if k else "")
        return named.get(name, MHA_GROUPS.get(name, name))

    return group


def keras_object(module: str, cls: str, config: dict[str, Any]) -> dict[str, Any]:
    """A keras-hub class as Keras serialises it (config.json, task.json); `module` under
    `keras_hub.src.models`."""
    return {"module": f"keras_hub.src.models.{module}", "class_name": cls,
            "registered_name": f"keras_hub>{cls}", "config": config}


def numbered_blocks(text: str, s: ModelSpec, layer: str) -> str:
    """A table's block rows once per block: Keras numbers these blocks from 1 (`layer` has {k})."""
    return "".join(text.replace("{b}", str(i)).replace("{layer}", layer.replace("{k}", str(i + 1)))
                   for i in range(s.depth))


# ==== ViT and DeiT ===================================================================================
# ---- ViTBackbone (+ ViTImageClassifier) ------------------------------------------------------
VIT_VARIABLES: Variables = {
    **COMMON_VARIABLES,
    **dict.fromkeys(("ln_1", "ln_2", "ln"), NORM),
    **dict.fromkeys(("patch_embedding", "dense_1", "dense_2", "predictions"), DENSE),
    "position_embedding": ("embeddings",),
    "vit_patching_and_embedding": ("class_token",),
}

VIT_EMBED_ROWS = """
cls_token                        vit_patching_and_embedding/class_token                    batch_token
pos_embed                        vit_patching_and_embedding/position_embedding/embeddings
patch_embed.{w:kernel|bias}      vit_patching_and_embedding/patch_embedding/{w}
final_norm.{w:scale=gamma|bias=beta}  vit_encoder/ln/{w}
head.out.{w:kernel|bias}         predictions/{w}
"""
# A ViT and a DeiT block share their norms and attention names; their MLPs are named apart.
NORM_ATTENTION_ROWS = """
blocks.{b}.{n:norm1=ln_1|norm2=ln_2}.{w:scale=gamma|bias=beta}  {layer}/{n}/{w}
blocks.{b}.attn.{p:query|key|value|out=attention_output}.{w:kernel|bias}  {layer}/mha/{p}/{w}
"""
VIT_BLOCK_ROWS = NORM_ATTENTION_ROWS + """
blocks.{b}.mlp.{fc:fc1=dense_1|fc2=dense_2}.{w:kernel|bias}  {layer}/mlp/{fc}/{w}
"""
VIT_DEFAULTS: dict[str, Any] = {  # ViTBackbone's and ViTImageClassifier's keyword defaults
    "layer_norm_epsilon": 1e-6, "use_mha_bias": True, "use_mlp_bias": True, "use_class_token": True,
    "use_patch_bias": True, "pooling": "token", "intermediate_dim": None, "activation": None,
}
VIT_REQUIRED = ("image_shape", "patch_size", "num_layers", "num_heads", "hidden_dim", "mlp_dim")
VIT_POOLING = {"token": "cls", "gap": "mean_all"}
VIT_FIXED: dict[str, Any] = {  # what keras-hub's ViT and DeiT build, whatever the config says
    "activation": "gelu", "pos_embed": "learned", "pos_rows": None, "norm": "pre", "final_norm": "tokens",
    "head_hidden": (), "remainder": "drop", "mlp": "standard",
}


def vit_rows(s: ModelSpec) -> str:
    return VIT_EMBED_ROWS + numbered_blocks(VIT_BLOCK_ROWS, s, "vit_encoder/transformer_block_{k}")


def refuse_output_activation(cfg: dict[str, Any]) -> None:
    """ViT's and DeiT's classifiers take an output activation; the spec's output is the logits."""
    if cfg["activation"] not in (None, "linear"):
        raise SpecError(f"keras_hub config activation = {cfg['activation']!r}: the spec's output is the "
                        "logits (expected null or 'linear')")


def config_evidence(task: dict[str, Any] | None) -> str:
    """Where a config fact was read: `get_config()`, which a preset saves as config.json (task.json
    for a task), so a live model and its preset cite the same source."""
    return f"keras-hub: get_config() (a preset's {'config' if task is None else 'task'}.json)"


def state(inf: Inference, facts: dict[str, Any], task: dict[str, Any] | None, architecture: str) -> None:
    """The facts read from the config (the task's, for a classifier), then what ViT's block design
    fixes in both families."""
    for name, value in facts.items():
        inf.fact(name, value, config_evidence(task))
    for name, value in VIT_FIXED.items():
        inf.fact(name, value, architecture)


def infer_vit(inf: Inference, raw: Raw, backbone: dict[str, Any], task: dict[str, Any] | None) -> None:
    """ViTBackbone's get_config (and ViTImageClassifier's, if a task) -> facts and defaults."""
    cfg = with_defaults(inf, "ViTBackbone", VIT_REQUIRED, VIT_DEFAULTS, backbone, task)
    sizes = size_facts(inf, raw, cfg, "vit_patching_and_embedding/patch_embedding/kernel",
                       "vit_encoder/transformer_block_{i}/ln_1/gamma")
    for key, what in (("use_mha_bias", "attention"), ("use_mlp_bias", "MLP")):
        if not cfg[key]:
            raise SpecError(f"keras_hub config {key} = false: the spec's {what} layers always have biases")
    if cfg["intermediate_dim"] is not None:
        raise SpecError(f"keras_hub config intermediate_dim = {cfg['intermediate_dim']!r}: the pre_logits "
                        "Dense with tanh has no spec field (expected null)")
    refuse_output_activation(cfg)
    class_token = bool(cfg["use_class_token"])
    pooling = VIT_POOLING.get(cfg["pooling"])
    if pooling is None or (pooling == "cls" and not class_token):
        raise SpecError(f"keras_hub config pooling = {cfg['pooling']!r}: expected 'gap', or 'token' with "
                        "use_class_token true (token reads token 0)")
    head = raw.get("predictions/kernel")
    facts: dict[str, Any] = {
        **sizes, "mlp_dim": int(cfg["mlp_dim"]), "layer_norm_eps": float(cfg["layer_norm_epsilon"]),
        "class_token": class_token, "pos_embed_class_row": class_token, "pooling": pooling,
        "patch_bias": bool(cfg["use_patch_bias"]), "qkv_bias": True,
        "num_classes": 0 if head is None else int(head.shape[1]),
    }
    state(inf, facts, task, "keras-hub ViT's architecture")
    if task is None:
        inf.notes.append("a ViTBackbone alone outputs every token: the spec reads the class token "
                         "(ViTImageClassifier's default pooling='token'); --set pooling=mean_all for 'gap'")


def check_vit(target: str, s: ModelSpec) -> None:
    """What ViTBackbone + ViTImageClassifier build (beyond the plain blocks every library has)."""
    require(s.pooling in ("cls", "mean_all"), target, "pooling", s.pooling, "cls (token) or mean_all (gap)")
    require(s.class_token or s.pooling == "mean_all", target, "class_token", s.class_token,
            "a class token for pooling 'token'")
    require(s.pos_embed == "learned" and s.pos_embed_class_row == s.class_token, target, "pos_embed",
            s.pos_embed, "a learned table with a class row exactly when there is a class token")
    require(s.final_norm == "tokens", target, "final_norm", s.final_norm, "tokens")
    require(s.activation == "gelu", target, "activation", s.activation, "gelu (Keras' exact GELU)")
    require(s.qkv_bias, target, "qkv_bias", s.qkv_bias, "true (use_mha_bias also removes the output bias)")
    require(s.head_dim * s.heads == s.dim, target, "head_dim", s.head_dim, "hidden_dim // num_heads")


def vit_configs(s: ModelSpec) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """config.json (the backbone) and task.json (the classifier, when the spec has a head)."""
    backbone = keras_object("vit.vit_backbone", "ViTBackbone", {
        "name": "vi_t_backbone", "trainable": True,
        "image_shape": [s.image_height, s.image_width, s.channels],
        "patch_size": [s.patch_height, s.patch_width], "num_layers": s.depth, "num_heads": s.heads,
        "hidden_dim": s.dim, "mlp_dim": s.mlp_dim, "dropout_rate": 0.0, "attention_dropout": 0.0,
        "layer_norm_epsilon": s.layer_norm_eps, "use_mha_bias": True, "use_mlp_bias": True,
        "use_class_token": s.class_token, "use_patch_bias": s.patch_bias})
    if not s.num_classes:
        return backbone, None
    pooling = {v: k for k, v in VIT_POOLING.items()}[s.pooling]
    task = keras_object("vit.vit_image_classifier", "ViTImageClassifier", {
        "backbone": backbone, "preprocessor": None, "name": "vi_t_image_classifier",
        "num_classes": s.num_classes, "pooling": pooling, "activation": None, "dropout": 0.0,
        "intermediate_dim": None})
    return backbone, task


VIT_GROUPS = {  # a layer's name -> its group in the h5 file (the attribute Keras saves it under)
    "vit_patching_and_embedding": "layers/vi_t_patching_and_embedding", "vit_encoder": "layers/vi_t_encoder",
    "predictions": "layers/dense", "ln_1": "layer_norm_1", "ln_2": "layer_norm_2", "ln": "layer_norm",
}


# ---- DeiTBackbone (+ DeiTImageClassifier) ------------------------------------------------------
DEIT_VARIABLES: Variables = {
    **COMMON_VARIABLES,
    **dict.fromkeys(("ln_1", "ln_2", "ln"), NORM),
    **dict.fromkeys(("patch_embedding", "dense", "output", "predictions"), DENSE),
    "deit_patching_and_embedding": ("class_token", "distillation_token", "position_embedding"),
}
DEIT_EMBED_ROWS = """
cls_token                    deit_patching_and_embedding/class_token          batch_token
reg_tokens                   deit_patching_and_embedding/distillation_token   batch
pos_embed                    deit_patching_and_embedding/position_embedding   batch
patch_embed.{w:kernel|bias}  deit_patching_and_embedding/patch_embedding/{w}
final_norm.{w:scale=gamma|bias=beta}  deit_encoder/ln/{w}
head.out.{w:kernel|bias}     predictions/{w}
"""
DEIT_BLOCK_ROWS = NORM_ATTENTION_ROWS + """
blocks.{b}.mlp.fc1.{w:kernel|bias}  {layer}/mlp/dense/{w}
blocks.{b}.mlp.fc2.{w:kernel|bias}  {layer}/output_layer/output/{w}
"""
DEIT_DEFAULTS: dict[str, Any] = {"layer_norm_epsilon": 1e-6, "use_mha_bias": True, "pooling": "token",
                                 "activation": None}
DEIT_REQUIRED = ("image_shape", "patch_size", "num_layers", "num_heads", "hidden_dim", "intermediate_dim")


def deit_rows(s: ModelSpec) -> str:
    return DEIT_EMBED_ROWS + numbered_blocks(DEIT_BLOCK_ROWS, s, "deit_encoder/transformer_block_{k}")


def infer_deit(inf: Inference, raw: Raw, backbone: dict[str, Any], task: dict[str, Any] | None) -> None:
    """DeiTBackbone's get_config (and DeiTImageClassifier's, if a task) -> facts and defaults."""
    cfg = with_defaults(inf, "DeiTBackbone", DEIT_REQUIRED, DEIT_DEFAULTS, backbone, task)
    sizes = size_facts(inf, raw, cfg, "deit_patching_and_embedding/patch_embedding/kernel",
                       "deit_encoder/transformer_block_{i}/ln_1/gamma")
    if not cfg["use_mha_bias"]:
        raise SpecError("keras_hub config use_mha_bias = false: it also removes the attention output's "
                        "bias, which the spec always has")
    refuse_output_activation(cfg)
    pooling = VIT_POOLING.get(cfg["pooling"])
    if pooling is None:
        raise SpecError(f"keras_hub config pooling = {cfg['pooling']!r}: expected 'token' or 'gap'")
    head = raw.get("predictions/kernel")
    facts: dict[str, Any] = {
        **sizes, "mlp_dim": int(cfg["intermediate_dim"]), "layer_norm_eps": float(cfg["layer_norm_epsilon"]),
        "class_token": True, "registers": 1, "pos_embed_class_row": True, "pos_embed_register_rows": True,
        "distill_token": False, "pooling": pooling, "patch_bias": True, "qkv_bias": True,
        "num_classes": 0 if head is None else int(head.shape[1]),
    }
    state(inf, facts, task, "keras-hub DeiT's architecture")
    inf.notes.append("keras-hub DeiT's distillation token has no head of its own: it is a learned token with "
                     "a position row after the class token (registers=1, pos_embed_register_rows=true)")
    if task is None:
        inf.notes.append("a DeiTBackbone alone outputs every token: the spec reads the class token")


def check_deit(target: str, s: ModelSpec) -> None:
    require(s.registers == 1 and s.pos_embed_register_rows and s.class_token, target, "registers",
            s.registers, "1 with its position row, after a class token (the distillation token)")
    require(s.pooling in ("cls", "mean_all"), target, "pooling", s.pooling, "cls (token) or mean_all (gap)")
    require(s.pos_embed == "learned" and s.pos_embed_class_row, target, "pos_embed", s.pos_embed,
            "a learned table with the class and distillation rows")
    require(s.final_norm == "tokens", target, "final_norm", s.final_norm, "tokens")
    require(s.activation == "gelu", target, "activation", s.activation, "gelu (Keras' exact GELU)")
    require(s.qkv_bias and s.patch_bias, target, "qkv_bias", s.qkv_bias, "true, with a patch bias")


def deit_configs(s: ModelSpec) -> tuple[dict[str, Any], dict[str, Any] | None]:
    backbone = keras_object("deit.deit_backbone", "DeiTBackbone", {
        "name": "dei_t_backbone", "trainable": True,
        "image_shape": [s.image_height, s.image_width, s.channels],
        "patch_size": [s.patch_height, s.patch_width], "num_layers": s.depth, "num_heads": s.heads,
        "hidden_dim": s.dim, "intermediate_dim": s.mlp_dim, "dropout_rate": 0.0, "attention_dropout": 0.0,
        "layer_norm_epsilon": s.layer_norm_eps, "use_mha_bias": True})
    if not s.num_classes:
        return backbone, None
    pooling = {v: k for k, v in VIT_POOLING.items()}[s.pooling]
    return backbone, keras_object("deit.deit_image_classifier", "DeiTImageClassifier", {
        "backbone": backbone, "preprocessor": None, "name": "dei_t_image_classifier",
        "num_classes": s.num_classes, "pooling": pooling, "activation": None, "dropout": 0.0})


DEIT_GROUPS = {
    "deit_patching_and_embedding": "layers/dei_t_embeddings", "deit_encoder": "layers/dei_t_encoder",
    "predictions": "layers/dense", "ln_1": "layer_norm_1", "ln_2": "layer_norm_2", "ln": "layer_norm",
    "output": "dense",
}


VIT = Family("ViTBackbone", "ViTImageClassifier", vit_rows, infer_vit, check_vit, vit_configs,
             layer_groups("transformer_block_", "encoder_layers/vi_t_encoder_block", 1, VIT_GROUPS),
             lambda cfg: VIT_VARIABLES, task_layers=("predictions",),
             keys=(*VIT_REQUIRED, "layer_norm_epsilon", "use_mha_bias", "use_mlp_bias", "use_class_token",
                   "use_patch_bias"),
             task_keys=("num_classes", "pooling", "activation", "intermediate_dim"))
DEIT = Family("DeiTBackbone", "DeiTImageClassifier", deit_rows, infer_deit, check_deit, deit_configs,
              layer_groups("transformer_block_", "encoder_layers/dei_t_encoder_block", 1, DEIT_GROUPS),
              lambda cfg: DEIT_VARIABLES, task_layers=("predictions",), features=("registers",),
              keys=(*DEIT_REQUIRED, "layer_norm_epsilon", "use_mha_bias"),
              task_keys=("num_classes", "pooling", "activation"))


# ==== DINOv2 =========================================================================================
DINOV2_EPS = 1e-6  # DINOV2Layer's and DINOV2Backbone's LayerNormalization(epsilon=1e-6): not configurable
DINOV2_DEFAULTS: dict[str, Any] = {  # DINOV2Backbone's keyword defaults
    "num_register_tokens": 0, "use_mask_token": True, "use_swiglu_ffn": False, "image_shape": [224, 224, 3],
    "position_embedding_shape": [518, 518, 3],
}
DINOV2_REQUIRED = ("patch_size", "num_layers", "hidden_dim", "num_heads", "intermediate_dim")
DINOV2_INERT = ("embeddings/mask_token", "embeddings/interpolated_position_embeddings")

DINOV2_ROWS = """
cls_token                    embeddings/cls_token                               batch_token
reg_tokens                   embeddings/register_tokens                         batch
pos_embed                    embeddings/position_embeddings                     batch
patch_embed.{w:kernel|bias}  embeddings/patch_embeddings/projection/{w}
final_norm.{w:scale=gamma|bias=beta}  layernorm/{w}
blocks.{b}.{n:norm1|norm2}.{w:scale=gamma|bias=beta}  encoder/layers_{b}/{n}/{w}
blocks.{b}.attn.{p:query|key|value|out=attention_output}.{w:kernel|bias}  {attn}/{p}/{w}
blocks.{b}.{g:ls1=layer_scale1|ls2=layer_scale2}.gamma  encoder/layers_{b}/{g}/lambda1
"""
DINOV2_MLP_ROWS = {
    "standard": "blocks.{b}.mlp.{fc:fc1|fc2}.{w:kernel|bias}  encoder/layers_{b}/mlp/{fc}/{w}\n",
    "gated": """
blocks.{b}.mlp.{p:gate|fc1}.kernel  encoder/layers_{b}/mlp/weights_in/kernel  stacked_dense
blocks.{b}.mlp.{p:gate|fc1}.bias    encoder/layers_{b}/mlp/weights_in/bias    stacked_bias
blocks.{b}.mlp.fc2.{w:kernel|bias}  encoder/layers_{b}/mlp/weights_out/{w}
""",
}


def dinov2_rows(s: ModelSpec) -> str:
    return (DINOV2_ROWS + DINOV2_MLP_ROWS[s.mlp]).replace("{attn}", "encoder/layers_{b}/attention/attention")


def dinov2_variables(cfg: dict[str, Any]) -> Variables:
    """The embedding's trainable variables in creation order, then its one non-trainable one."""
    registers = int(cfg.get("num_register_tokens", DINOV2_DEFAULTS["num_register_tokens"]))
    embedding = ("cls_token", *(("mask_token",) if cfg.get("use_mask_token", True) else ()),
                 *(("register_tokens",) if registers else ()), "interpolated_position_embeddings",
                 "position_embeddings")
    return {**COMMON_VARIABLES, **dict.fromkeys(("norm1", "norm2", "layernorm"), NORM),
            **dict.fromkeys(("projection", "fc1", "fc2", "weights_in", "weights_out"), DENSE),
            **dict.fromkeys(("layer_scale1", "layer_scale2"), ("lambda1",)), "embeddings": embedding}


def dinov2_infer(inf: Inference, raw: Raw, backbone: dict[str, Any], task: dict[str, Any] | None) -> None:
    cfg = with_defaults(inf, "DINOV2Backbone", DINOV2_REQUIRED, DINOV2_DEFAULTS, backbone)
    source = cfg["position_embedding_shape"]
    if list(source)[:2] != list(cfg["image_shape"])[:2]:
        raise SpecError(f"keras_hub config position_embedding_shape = {source!r}: keras-hub resizes the "
                        f"table to image_shape {cfg['image_shape']!r} with keras.ops.image.resize(bicubic), "
                        "whose kernel depends on the Keras backend and is none of the spec's pos_resample "
                        "methods (expected position_embedding_shape equal to image_shape)")
    sizes = size_facts(inf, raw, cfg, "embeddings/patch_embeddings/projection/kernel",
                       "encoder/layers_{i}/norm1/gamma")
    gated = bool(cfg["use_swiglu_ffn"])
    width = int(cfg["intermediate_dim"])
    facts: dict[str, Any] = {
        **sizes, "mlp": "gated" if gated else "standard", "activation": "silu" if gated else "gelu",
        "mlp_dim": swiglu_width(width) if gated else width,
        "registers": int(cfg["num_register_tokens"]), "layer_norm_eps": DINOV2_EPS,
    }
    for name, value in facts.items():
        inf.fact(name, value, config_evidence(None))
    fixed = {"class_token": True, "pos_embed_class_row": True, "pos_embed_register_rows": False,
             "layer_scale": True, "pooling": "cls", "final_norm": "tokens", "num_classes": 0,
             "patch_bias": True, "qkv_bias": True, "pos_embed": "learned", "pos_rows": None, "norm": "pre",
             "head_hidden": (), "remainder": "drop"}
    for name, value in fixed.items():
        inf.fact(name, value, "keras-hub DINOv2's architecture")
    if gated:
        inf.notes.append(f"keras-hub DINOv2 SwiGLU: intermediate_dim {width} -> hidden width "
                         f"{facts['mlp_dim']} ((int({width} * 2/3) + 7) // 8 * 8)")
    inf.notes.append("a DINOV2Backbone outputs every token: the spec reads the class token")


def dinov2_check(target: str, s: ModelSpec) -> None:
    require(s.layer_scale, target, "layer_scale", s.layer_scale, "true (every block has its layer scales)")
    require(s.class_token and s.pooling == "cls" and not s.num_classes, target, "pooling", s.pooling,
            "cls with no head (a backbone alone: keras-hub 0.32 has no DINOv2 task)")
    require(s.pos_embed == "learned" and s.pos_embed_class_row and not s.pos_embed_register_rows, target,
            "pos_embed_register_rows", s.pos_embed_register_rows,
            "a learned table with a class row and none for the registers")
    require(s.final_norm == "tokens", target, "final_norm", s.final_norm, "tokens")
    require(s.layer_norm_eps == DINOV2_EPS, target, "layer_norm_eps", s.layer_norm_eps,
            f"{DINOV2_EPS:g} (fixed)")
    require(s.image_height == s.image_width and s.patch_height == s.patch_width, target, "image_height",
            s.image_height, "a square image cut into square patches")
    require(s.qkv_bias and s.patch_bias, target, "qkv_bias", s.qkv_bias, "true, with a patch bias")
    activation = "silu" if s.mlp == "gated" else "gelu"
    require(s.activation == activation, target, "activation", s.activation, f"{activation} with mlp {s.mlp}")
    require(s.mlp == "standard" or s.mlp_dim % 8 == 0, target, "mlp_dim", s.mlp_dim,
            "a multiple of 8 with a gated MLP (its hidden width is rounded up to one)")


def dinov2_configs(s: ModelSpec) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """config.json; a gated MLP's intermediate_dim is 3/2 of the hidden width (which rounds back)."""
    width = s.mlp_dim * 3 // 2 if s.mlp == "gated" else s.mlp_dim
    shape = [s.image_height, s.image_width, s.channels]
    return keras_object("dinov2.dinov2_backbone", "DINOV2Backbone", {
        "name": "dinov2_backbone", "trainable": True, "patch_size": s.patch_height, "num_layers": s.depth,
        "hidden_dim": s.dim, "num_heads": s.heads, "intermediate_dim": width, "layer_scale_init_value": 1.0,
        "num_register_tokens": s.registers, "use_mask_token": False, "use_swiglu_ffn": s.mlp == "gated",
        "dropout_rate": 0.0, "drop_path_rate": 0.0, "image_shape": shape, "position_embedding_shape": shape,
        "antialias_in_interpolation": False, "apply_layernorm": False}), None


def dinov2_extras(s: ModelSpec, raw: Raw) -> Raw:
    """The interpolated table keras-hub rebuilds at load: written equal to the table (no resize)."""
    return {"embeddings/interpolated_position_embeddings": np.array(raw["embeddings/position_embeddings"])}


DINOV2_GROUPS = {
    "embeddings": "layers/dinov2_embedding", "encoder": "layers/dinov2_encoder",
    "layernorm": "layers/layer_normalization",
}
DINOV2 = Family("DINOV2Backbone", None, dinov2_rows, dinov2_infer, dinov2_check, dinov2_configs,
                layer_groups("layers_", "layers/dinov2_layer", 0, DINOV2_GROUPS), dinov2_variables,
                inert=DINOV2_INERT, extras=dinov2_extras, features=("registers", "layer_scale"),
                keys=(*DINOV2_REQUIRED, *DINOV2_DEFAULTS))


# ==== SigLIP and CLIP ================================================================================
TOWER_REQUIRED = ("patch_size", "hidden_dim", "num_layers", "num_heads", "intermediate_dim")
PLAIN_FACTS: dict[str, Any] = {"pos_embed": "learned", "pos_rows": None, "norm": "pre", "head_hidden": (),
                               "remainder": "drop", "mlp": "standard", "final_norm": "tokens",
                               "num_classes": 0, "qkv_bias": True}


def tower_facts(inf: Inference, raw: Raw, cfg: dict[str, Any], kernel: str, blocks: str, cls: str) -> None:
    """What both towers' configs state: the sizes, checked against the tensors."""
    facts = {**size_facts(inf, raw, cfg, kernel, blocks), "mlp_dim": int(cfg["intermediate_dim"])}
    for name, value in facts.items():
        inf.fact(name, value, config_evidence(None))
    for name, value in PLAIN_FACTS.items():
        inf.fact(name, value, f"keras-hub {cls}'s architecture")


def grid_cells(cfg: dict[str, Any]) -> int:
    """The patches of the config's image (its position table's patch rows)."""
    (ph, pw) = size_pair(cfg["patch_size"])
    return (cfg["image_shape"][0] // ph) * (cfg["image_shape"][1] // pw)


def check_tower(target: str, s: ModelSpec, eps: float) -> None:
    require(not s.num_classes, target, "num_classes", s.num_classes, "0 (an image tower: no classifier)")
    require(s.image_height == s.image_width and s.patch_height == s.patch_width, target, "image_height",
            s.image_height, "a square image cut into square patches")
    require(s.pos_embed == "learned", target, "pos_embed", s.pos_embed, "learned")
    require(s.final_norm == "tokens", target, "final_norm", s.final_norm, "tokens")
    require(s.qkv_bias, target, "qkv_bias", s.qkv_bias, "true")
    require(s.layer_norm_eps == eps, target, "layer_norm_eps", s.layer_norm_eps, f"{eps:g}")


def tower_config(cls: str, module: str, name: str, s: ModelSpec, activation: str) -> dict[str, Any]:
    return keras_object(module, cls, {
        "name": name, "trainable": True, "patch_size": s.patch_height, "hidden_dim": s.dim,
        "num_layers": s.depth, "num_heads": s.heads, "intermediate_dim": s.mlp_dim,
        "intermediate_activation": activation, "image_shape": [s.image_height, s.image_width, s.channels]})


# ---- SigLIPVisionEncoder -----------------------------------------------------------------------
SIGLIP_EPS = 1e-6  # post_layer_norm's, fixed
SIGLIP_ACTIVATIONS = {"gelu_approximate": "gelu_tanh", "gelu": "gelu"}
SIGLIP_ROWS = """
patch_embed.{w:kernel|bias}  embedding/patch_embedding/{w}
pos_embed                    embedding/position_embedding/embeddings
blocks.{b}.{n:norm1=layer_norm1|norm2=layer_norm2}.{w:scale=gamma|bias=beta}  encoder_block_{b}/{n}/{w}
blocks.{b}.attn.{p:query|key|value|out=attention_output}.{w:kernel|bias}  encoder_block_{b}/self_attn/{p}/{w}
blocks.{b}.mlp.{fc:fc1|fc2}.{w:kernel|bias}  encoder_block_{b}/mlp/{fc}/{w}
final_norm.{w:scale=gamma|bias=beta}  post_layer_norm/{w}
pool.probe                   head/variable                                    batch_token
pool.attn.{p:query|key|value|out=attention_output}.{w:kernel|bias}  head/attention/{p}/{w}
pool.norm.{w:scale=gamma|bias=beta}  head/layernorm/{w}
pool.mlp.{fc:fc1|fc2}.{w:kernel|bias}  head/mlp/{fc}/{w}
"""
SIGLIP_VARIABLES: Variables = {
    **COMMON_VARIABLES, **dict.fromkeys(("layer_norm1", "layer_norm2", "post_layer_norm", "layernorm"), NORM),
    **dict.fromkeys(("patch_embedding", "fc1", "fc2"), DENSE), "position_embedding": ("embeddings",),
    "embedding": ("position_ids",), "head": ("variable",),
}


def siglip_infer(inf: Inference, raw: Raw, backbone: dict[str, Any], task: dict[str, Any] | None) -> None:
    cfg = with_defaults(inf, "SigLIPVisionEncoder", TOWER_REQUIRED,
                        {"intermediate_activation": "gelu_approximate",
                        "layer_norm_epsilon": 1e-6, "image_shape": [224, 224, 3]}, backbone)
    activation = SIGLIP_ACTIVATIONS.get(cfg["intermediate_activation"])
    if activation is None:
        raise SpecError(f"keras_hub config intermediate_activation = {cfg['intermediate_activation']!r}: "
                        f"expected one of {', '.join(SIGLIP_ACTIVATIONS)}")
    if float(cfg["layer_norm_epsilon"]) != SIGLIP_EPS:
        raise SpecError(f"keras_hub config layer_norm_epsilon = {cfg['layer_norm_epsilon']!r}: SigLIP's "
                        f"post_layer_norm keeps epsilon {SIGLIP_EPS:g}, and the spec has one epsilon "
                        f"(expected {SIGLIP_EPS:g})")
    tower_facts(inf, raw, cfg, "embedding/patch_embedding/kernel", "encoder_block_{i}/layer_norm1/gamma",
                "SigLIP")
    rows = grid_cells(cfg)
    check_position_ids(raw, "embedding/position_ids", rows)
    facts = {"activation": activation, "layer_norm_eps": SIGLIP_EPS,
             "class_token": False, "pos_embed_class_row": False, "pooling": "map", "pool_qkv_bias": True,
             "patch_bias": True}
    for name, value in facts.items():
        inf.fact(name, value, config_evidence(None))


def siglip_check(target: str, s: ModelSpec) -> None:
    check_tower(target, s, SIGLIP_EPS)
    require(s.pooling == "map" and s.pool_qkv_bias and not s.class_token, target, "pooling", s.pooling,
            "map (its attention-pool head, biases on) over the patch tokens, no class token")
    require(s.patch_bias, target, "patch_bias", s.patch_bias, "true")
    require(s.activation in SIGLIP_ACTIVATIONS.values(), target, "activation", s.activation,
            "gelu_tanh or gelu")


def siglip_configs(s: ModelSpec) -> tuple[dict[str, Any], dict[str, Any] | None]:
    activation = {v: k for k, v in SIGLIP_ACTIVATIONS.items()}[s.activation]
    config = tower_config("SigLIPVisionEncoder", "siglip.siglip_vision_encoder", "sig_lip_vision_encoder", s,
                          activation)
    config["config"]["layer_norm_epsilon"] = s.layer_norm_eps
    return config, None


SIGLIP_GROUPS = {
    "embedding": "layers/sig_lip_vision_embedding", "post_layer_norm": "layers/layer_normalization",
    "head": "layers/sig_lip_multi_head_attention_pooling", "layernorm": "layer_norm",
}


# ---- CLIPVisionEncoder -------------------------------------------------------------------------
CLIP_EPS = 1e-5  # every LayerNormalization of the tower, fixed
CLIP_ACTIVATIONS = {"quick_gelu": "quick_gelu", "gelu": "gelu"}
CLIP_ROWS = """
cls_token                    embedding/class_embedding
patch_embed.kernel           embedding/patch_embedding/kernel
pos_embed                    embedding/position_embedding/embeddings
norm_pre.{w:scale=gamma|bias=beta}  pre_layer_norm/{w}
blocks.{b}.{n:norm1=layer_norm_1|norm2=layer_norm_2}.{w:scale=gamma|bias=beta}  encoder_block_{b}/{n}/{w}
blocks.{b}.attn.{p:query|key|value|out=attention_output}.{w:kernel|bias}  encoder_block_{b}/attention/{p}/{w}
blocks.{b}.mlp.{fc:fc1=dense_1|fc2=dense_2}.{w:kernel|bias}  encoder_block_{b}/{fc}/{w}
final_norm.{w:scale=gamma|bias=beta}  layer_norm/{w}
"""
CLIP_VARIABLES: Variables = {
    **COMMON_VARIABLES,
    **dict.fromkeys(("pre_layer_norm", "layer_norm_1", "layer_norm_2", "layer_norm"), NORM),
    **dict.fromkeys(("dense_1", "dense_2"), DENSE), "patch_embedding": ("kernel",),
    "position_embedding": ("embeddings",), "embedding": ("class_embedding", "position_ids"),
}


def clip_infer(inf: Inference, raw: Raw, backbone: dict[str, Any], task: dict[str, Any] | None) -> None:
    cfg = with_defaults(inf, "CLIPVisionEncoder", TOWER_REQUIRED, {"intermediate_activation": "quick_gelu",
                        "intermediate_output_index": None, "image_shape": [224, 224, 3]}, backbone)
    activation = CLIP_ACTIVATIONS.get(cfg["intermediate_activation"])
    if activation is None:
        raise SpecError(f"keras_hub config intermediate_activation = {cfg['intermediate_activation']!r}: "
                        f"expected one of {', '.join(CLIP_ACTIVATIONS)}")
    if cfg["intermediate_output_index"] is not None:
        raise SpecError(f"keras_hub config intermediate_output_index = {cfg['intermediate_output_index']!r}: "
                        "the spec's output is the pooled embedding alone (expected null)")
    tower_facts(inf, raw, cfg, "embedding/patch_embedding/kernel", "encoder_block_{i}/layer_norm_1/gamma",
                "CLIP")
    rows = grid_cells(cfg) + 1
    check_position_ids(raw, "embedding/position_ids", rows)
    facts = {"activation": activation, "layer_norm_eps": CLIP_EPS, "class_token": True,
             "pos_embed_class_row": True, "pooling": "cls", "patch_bias": False, "norm_before_blocks": True}
    for name, value in facts.items():
        inf.fact(name, value, config_evidence(None))
    inf.notes.append("a CLIPVisionEncoder outputs every token: the spec reads the class token "
                     "(CLIPBackbone's vision pooler)")


def clip_check(target: str, s: ModelSpec) -> None:
    check_tower(target, s, CLIP_EPS)
    require(s.norm_before_blocks, target, "norm_before_blocks", s.norm_before_blocks, "true (pre_layer_norm)")
    require(s.class_token and s.pooling == "cls" and s.pos_embed_class_row, target, "pooling", s.pooling,
            "cls (a class token with its position row)")
    require(not s.patch_bias, target, "patch_bias", s.patch_bias, "false (its patch projection has no bias)")
    require(s.activation in CLIP_ACTIVATIONS.values(), target, "activation", s.activation,
            "quick_gelu or gelu")


def clip_configs(s: ModelSpec) -> tuple[dict[str, Any], dict[str, Any] | None]:
    config = tower_config("CLIPVisionEncoder", "clip.clip_vision_encoder", "clip_vision_encoder", s,
                          s.activation)
    config["config"]["intermediate_output_index"] = None
    return config, None


CLIP_GROUPS = {
    "embedding": "layers/clip_vision_embedding", "pre_layer_norm": "layers/layer_normalization",
    "layer_norm": "layers/layer_normalization_1",
}


SIGLIP = Family("SigLIPVisionEncoder", None, lambda s: SIGLIP_ROWS, siglip_infer, siglip_check,
                siglip_configs,
                layer_groups("encoder_block_", "layers/sig_lip_encoder_layer", 0, SIGLIP_GROUPS),
                lambda cfg: SIGLIP_VARIABLES, inert=("embedding/position_ids",),
                extras=lambda s, raw: position_ids("embedding/position_ids", s),
                keys=(*TOWER_REQUIRED, "intermediate_activation", "layer_norm_epsilon", "image_shape"))
CLIP = Family("CLIPVisionEncoder", None, lambda s: CLIP_ROWS, clip_infer, clip_check, clip_configs,
              layer_groups("encoder_block_", "layers/clip_encoder_layer", 0, CLIP_GROUPS),
              lambda cfg: CLIP_VARIABLES, inert=("embedding/position_ids",),
              extras=lambda s, raw: position_ids("embedding/position_ids", s),
              features=("norm_before_blocks",),
              keys=(*TOWER_REQUIRED, "intermediate_activation", "intermediate_output_index", "image_shape"))


# ==== presets ========================================================================================
PRESET_FILES = (("task.json", "task.weights.h5"), ("config.json", "model.weights.h5"))
KERAS_HUB_VERSION = "0.32.0"  # the version whose classes the families describe
FAMILIES = {f.backbone: f for f in (VIT, DEIT, DINOV2, SIGLIP, CLIP)}
INDEX_VARIABLES = ("position_ids",)  # integer variables: which position row each token reads


def read(path: Path, config: Path | None) -> tuple[Raw, dict[str, Any] | None, str]:
    """`path` is a preset directory or a `.weights.h5` file (with `--config`)."""
    if path.is_dir():
        weights = [path / name for _, name in PRESET_FILES if (path / name).is_file()]
        if not (path / "model.weights.h5").is_file():
            raise WeightsError(f"keras_hub preset {str(path)!r}: no model.weights.h5 in the directory "
                               "(sharded presets are not supported)")
        config = config or next((path / c for c, _ in PRESET_FILES if (path / c).is_file()), None)
    else:
        weights = [path]
    if config is None or not config.exists():
        raise SpecError(f"keras_hub checkpoint {str(path)!r}: its config.json or task.json is needed "
                        "(pass --config PATH); it holds the head count and LayerNorm epsilon")
    data = read_config(config)
    family, backbone, _ = split_config(data)
    raw: Raw = {}
    for file in weights:
        for name, value in read_h5(file, family.variables(backbone), str(backbone.get("name", ""))).items():
            if name in raw:
                raise WeightsError(f"keras_hub checkpoint {str(path)!r}: variable {name!r} is in two files")
            raw[name] = value
    return raw, data, repr(str(path))


def read_h5(path: Path, variables: Variables, backbone: str) -> Raw:
    """A Keras `.weights.h5` as {variable path: float32 array (int64 for index variables)}, read
    through the one HDF5 reader (`shared/core/hdf5.py`: nothing outside the file, nothing
    unpickled). `backbone`: the backbone's name (its group adds no path segment)."""
    where = f"keras_hub weights {str(path)!r}"
    with open_hdf5(path, where, WeightsError, attributes=("name",)) as h5:
        found = _datasets(h5.root, variables, backbone, where)
        for name, dataset in found:
            _check_dtype(where, name, dataset)
        arrays = h5.read(dataset for _, dataset in found)
        return {name: _as_array(where, name, value) for (name, _), value in zip(found, arrays, strict=True)}


def _datasets(root: Group, variables: Variables, backbone: str, where: str) -> list[tuple[str, Dataset]]:
    out: list[tuple[str, Dataset]] = []

    def visit(group: Group, layer_path: list[str]) -> None:
        for dataset in group.datasets.values():
            raise WeightsError(f"{where}: dataset {dataset.path!r} is outside a 'vars' group")
        for key, node in group.groups.items():
            if key == "optimizer" and group.path == "/":
                continue
            if key == "vars":
                _variables(node, layer_path, variables, out, where)
                continue
            own = node.groups.get("vars")
            name = None if own is None else _layer_name(own, where)
            if name is not None and not layer_path and name.startswith(f"{backbone}_"):
                name = name[len(backbone) + 1:]  # a top layer of a backbone built with a name
            named = name is not None and name != backbone  # the backbone nested in a task adds none
            visit(node, [*layer_path, name] if named else layer_path)

    visit(root, [])
    return out


def _layer_name(vars_group: Group, where: str) -> str:
    if "name" not in vars_group.attrs:
        raise WeightsError(f"{where}: group {vars_group.path!r} has no layer name attribute")
    return vars_group.attrs["name"]


def _variables(group: Group, layer_path: list[str], variables: Variables, out: list[tuple[str, Dataset]],
               where: str) -> None:
    if group.groups:
        raise WeightsError(f"{where}: group {next(iter(group.groups.values())).path!r} is inside a "
                           "'vars' group, which holds only variables")
    layer = layer_path[-1] if layer_path else ""
    names = variables.get(layer, ())
    for key in sorted(group.datasets, key=lambda k: int(k) if k.isdigit() else -1):
        index = int(key) if key.isdigit() else -1
        if not 0 <= index < len(names):
            raise WeightsError(f"{where}: dataset {group.datasets[key].path!r} (layer "
                               f"{'/'.join(layer_path)!r}, variable {key}) belongs to no layer the keras_hub "
                               "family names")
        out.append(("/".join([*layer_path, names[index]]), group.datasets[key]))


def _check_dtype(where: str, name: str, dataset: Dataset) -> None:
    """Floating point, or integers for an index variable: refused before anything is read."""
    index = name.rpartition("/")[2] in INDEX_VARIABLES
    if dataset.dtype.kind not in ("fiu" if index else "f"):
        raise WeightsError(f"{where}: variable {name!r} has dtype {dataset.dtype}, expected "
                           f"{'integers' if index else 'floating point'}")


def _as_array(where: str, name: str, data: np.ndarray) -> np.ndarray:
    index = name.rpartition("/")[2] in INDEX_VARIABLES
    value = np.asarray(data, dtype=np.int64 if index else np.float32)
    if not np.all(np.isfinite(value)):
        raise WeightsError(f"{where}: variable {name!r} has non-finite values")
    return np.ascontiguousarray(value)


def refuse_unsupported(fmt: str, source: str, raw: Raw) -> None:
    """Every variable the spec has no place for is refused by the mapping (unused); the h5 reader
    already named any variable of a layer no family has."""


def split_config(config: dict[str, Any] | None) -> tuple[Family, dict[str, Any], dict[str, Any] | None]:
    """A config.json (a backbone) or task.json (a task holding its backbone) -> the family, the
    backbone's config and the task's (None for a backbone alone): the keys the family reads, each
    decoded (`BACKBONE_KEYS`, `TASK_KEYS`)."""
    if not isinstance(config, dict) or not isinstance(config.get("config"), dict):
        raise SpecError("keras_hub config: expected a Keras serialised object ({'class_name': ..., "
                        "'config': {...}}), as save_to_preset writes config.json and task.json")
    outer_config, inner, task, path = config, config["config"], None, "config."
    if isinstance(inner.get("backbone"), dict):
        task, inner, path = inner, inner["backbone"].get("config"), "config.backbone.config."
        config = task["backbone"]
    name = config.get("class_name")
    family = FAMILIES.get(str(name))
    if family is None or not isinstance(inner, dict):
        raise SpecError(f"keras_hub config class_name = {name!r}: expected one of {', '.join(FAMILIES)}")
    outer = outer_config.get("class_name")
    if task is not None and outer != family.task:
        raise SpecError(f"keras_hub config class_name = {outer!r}: keras-hub {KERAS_HUB_VERSION} has no task "
                        f"around {name} that portbench converts (expected "
                        f"{family.task or 'its ' + str(name) + ' config.json'})")
    backbone = decoded(outer_config, path, (*family.keys, "name"), BACKBONE_KEYS)
    return family, backbone, None if task is None else decoded(outer_config, "config.", family.task_keys,
                                                                TASK_KEYS)


def infer(fmt: str, raw: Raw, config: dict[str, Any] | None, given: dict[str, Any]) -> Inference:
    family, backbone, task = split_config(config)
    inf = Inference(fmt)
    family.infer(inf, raw, backbone, task)
    classes = inf.facts["num_classes"][0]
    if task is not None and task.get("num_classes", classes) != classes:
        head = f"{classes}, the columns of tensor 'predictions/kernel'" if classes else \
            "no head: there is no tensor 'predictions/kernel'"
        raise SpecError(f"config config.num_classes = {task['num_classes']}: the checkpoint has {head}")
    for name in LATER_FEATURES:  # what the family cannot build, stated as the export checks it
        if name not in family.features and name not in inf.facts:
            absent = 0 if name == "registers" else False
            inf.fact(name, absent, f"keras-hub {family.backbone} (no such feature)")
    if "rope" not in inf.facts:
        inf.fact("rope", "none", f"keras-hub {family.backbone} (no rotary position embeddings)")
    return inf


def family_for(s: ModelSpec) -> Family:
    """The keras-hub class that computes `s`, told by the feature only it has."""
    if s.registers == 1 and s.pos_embed_register_rows and not s.layer_scale:
        return DEIT  # its distillation token: a learned token with a position row
    if s.layer_scale or s.registers or s.mlp == "gated":
        return DINOV2
    if s.pooling == "map":
        return SIGLIP
    if s.norm_before_blocks:
        return CLIP
    return VIT


def table(fmt: str, s: ModelSpec) -> Table:
    return Table(family_for(s).rows(s), fmt, inert=family_for(s).inert)


def check_exportable(fmt: str, s: ModelSpec) -> None:
    family = family_for(s)
    target = f"keras-hub {family.task if s.num_classes and family.task else family.backbone}"
    require_plain_blocks(target, s)
    for name in LATER_FEATURES:
        if name not in family.features:
            require(not getattr(s, name), target, name, getattr(s, name), "none (it has no such feature)")
    require(s.mlp == "standard" or family is DINOV2, target, "mlp", s.mlp, "standard")
    family.check(target, s)


def finish_export(fmt: str, s: ModelSpec, raw: Raw) -> Raw:
    """The inert variables keras-hub loads all the same (position ids, DINOv2's rebuilt table)."""
    return raw | family_for(s).extras(s, raw)


def check_buildable(s: ModelSpec) -> None:
    """What `build_model` builds: what the exporter writes (the family's task or backbone)."""
    check_exportable("keras_hub", s)


def build_model(s: ModelSpec) -> Any:
    """The keras-hub model that computes `s`, random-initialised (what a timing peer builds): the
    task (or the backbone alone) its family's config.json / task.json describe, deserialised by
    Keras as `from_preset` does."""
    import keras

    backbone, task = family_for(s).configs(s)
    return keras.saving.deserialize_keras_object(task or backbone)


def write(fmt: str, s: ModelSpec, raw: Raw, out: Path, force: bool = False) -> list[str]:
    """A save_to_preset-style directory, published whole (a new folder: never replaced)."""
    if out.exists() and not out.is_dir():
        raise WeightsError(f"output {str(out)!r}: keras_hub export writes a preset directory, and a file "
                           "is in the way")
    family = family_for(s)
    backbone, task = family.configs(s)
    variables = family.variables(backbone["config"])
    head = {k: v for k, v in raw.items() if k.split("/")[0] in family.task_layers}
    body = {k: v for k, v in raw.items() if k not in head}
    files = {"config.json": _json(backbone), "model.weights.h5": encode_h5(body, family, variables),
             "metadata.json": _json({"keras_hub_version": KERAS_HUB_VERSION,
                                     "parameter_count": s.derived.params,
                                     "tasks": ["ImageClassifier"] if task else []})}
    if task is not None:
        files |= {"task.json": _json(task), "task.weights.h5": encode_h5(head, family, variables)}
    write_folder(out, files)
    cls = family.task if task is not None else family.backbone
    return [f"load with keras_hub.models.{cls}.from_preset({str(out)!r})"]


def encode_h5(raw: Raw, family: Family, variables: Variables) -> bytes:
    """Variables by path -> the `.weights.h5` Keras loads: each layer's group at the attribute path
    Keras saves it under (`family.group`), its variables by index, and each layer's name in its
    `vars` group (what `read_h5` reads back)."""
    import h5py

    buffer = io.BytesIO()
    with h5py.File(buffer, "w") as h5:
        for name, value in raw.items():
            *layers, variable = name.split("/")
            path = ""
            for layer in layers:
                path = f"{path}/{family.group(layer)}" if path else family.group(layer)
                h5.require_group(f"{path}/vars").attrs["name"] = layer
            names = variables.get(layers[-1], ())
            if variable not in names:
                raise WeightsError(f"keras_hub export: variable {name!r} has no index in its layer")
            h5.create_dataset(f"{path}/vars/{names.index(variable)}",
                              data=np.ascontiguousarray(value, dtype=value.dtype if value.dtype.kind == "i"
                                                        else np.float32))
    return buffer.getvalue()


def _json(value: dict[str, Any]) -> bytes:
    return (json.dumps(value, indent=2) + "\n").encode()


# ==== a live model ==================================================================================
def read_live(model: Any) -> Reading | None:
    """A keras-hub model in memory is read as its preset is: `serialize_keras_object` gives the
    config `save_to_preset` writes (the task around its backbone), which the family's `infer`
    reads beside the variables, so a live model and a preset are read by the same code."""
    if not module_of(model).startswith("keras_hub.") or not hasattr(model, "get_config"):
        return None
    config = model.get_config()
    nested = config.get("backbone")
    backbone = nested.get("config", {}) if isinstance(nested, dict) else config
    if "hidden_dim" not in backbone or "patch_size" not in backbone:
        return None  # a keras-hub model of another kind
    import keras

    return Reading(f"keras-hub {type(model).__name__}", fmt="keras_hub",
                   config=keras.saving.serialize_keras_object(model))
