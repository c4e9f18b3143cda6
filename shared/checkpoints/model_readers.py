"""What the known libraries attach to a built model object, read as spec fields with their source:
one reader per library, in `READERS` (the table a new library, e.g. Flax linen's modules, is added
to). A reader is called in the model's own process (shared/checkpoints/from_model.py) and returns
`None` when the model is not its library's; otherwise a `Reading`: the fields the library's
configuration states (field -> (value, "where it was read")), the checkpoint format whose `infer`
reads the rest from the state dict (shared/checkpoints/*.py), and notes.

Readers look at attributes only (`getattr`, `get_config()`); the framework itself is never
imported here, so a reader of a library that is not installed costs nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from shared.checkpoints.common import LATER_FEATURES
from shared.checkpoints.hf import VIT_ARCHITECTURE
from shared.checkpoints.hf_models import ACTIVATIONS

Fact = tuple[Any, str]  # (value, where it was read)


@dataclass
class Reading:
    """What one library's configuration says about a model."""

    library: str  # how the output names it: "timm VisionTransformer", "keras-hub ViTImageClassifier"
    facts: dict[str, Fact] = field(default_factory=dict)
    fmt: str | None = None  # the checkpoint format (shared/checkpoints/FORMATS) of its state dict
    config: dict[str, Any] | None = None  # what that format's `infer` reads beside the tensors
    notes: list[str] = field(default_factory=list)
    # field -> its key in `config`, for fields the layers compute (shared/checkpoints/model_layers.py)
    config_keys: dict[str, str] = field(default_factory=dict)

    def fact(self, name: str, value: Any, source: str) -> None:
        self.facts[name] = (value, source)

    def plain_vit(self, source: str) -> None:
        """The 2020 ViT design: none of the later features (shared/checkpoints/common.py's
        LATER_FEATURES), a plain MLP and a patch projection with a bias."""
        for name in LATER_FEATURES:
            self.fact(name, 0 if name == "registers" else False, f"{source} (no such feature)")
        self.fact("mlp", "standard", source)
        self.fact("patch_bias", True, source)
        self.fact("rope", "none", f"{source} (no rotary position embeddings)")


def _module_of(model: Any) -> str:
    return type(model).__module__


def _pair(value: Any) -> tuple[int, int] | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value, value
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, int) for v in value):
        return int(value[0]), int(value[1])
    return None


def _is_identity(module: Any) -> bool:
    return module is None or type(module).__name__ == "Identity"


# ---- timm ---------------------------------------------------------------------------------------
TIMM_POOLS = {"token": "cls", "avg": "mean", "map": "map"}


def timm_reading(model: Any) -> Reading | None:
    """timm's VisionTransformer (and DeiT's distilled one): its constructor arguments live on as
    attributes (`global_pool`, `has_class_token`, `no_embed_class`, `patch_embed`, `blocks[i].attn`,
    `norm_pre`, `fc_norm`, `norm`), and `pretrained_cfg` when timm.create_model built it."""
    if not _module_of(model).startswith("timm.") or not hasattr(model, "patch_embed") \
            or not hasattr(model, "blocks"):
        return None
    r = Reading(f"timm {type(model).__name__}", fmt="timm")
    patch = model.patch_embed
    size = _pair(getattr(patch, "img_size", None))
    if size is None:
        cfg_size = (getattr(model, "pretrained_cfg", None) or {}).get("input_size")
        size = _pair(tuple(cfg_size[1:])) if cfg_size else None
        where = "timm: model.pretrained_cfg['input_size']"
    else:
        where = "timm: model.patch_embed.img_size"
    if size is not None:
        r.fact("image_height", size[0], where)
        r.fact("image_width", size[1], where)
    patch_size = _pair(getattr(patch, "patch_size", None))
    if patch_size is not None:
        r.fact("patch_height", patch_size[0], "timm: model.patch_embed.patch_size")
        r.fact("patch_width", patch_size[1], "timm: model.patch_embed.patch_size")
    if hasattr(model, "embed_dim"):
        r.fact("dim", int(model.embed_dim), "timm: model.embed_dim")
    r.fact("depth", len(model.blocks), "timm: len(model.blocks)")
    attn = getattr(model.blocks[0], "attn", None) if len(model.blocks) else None
    if attn is not None and hasattr(attn, "num_heads"):
        r.fact("heads", int(attn.num_heads), "timm: model.blocks[0].attn.num_heads")
        if hasattr(attn, "head_dim"):
            r.fact("head_dim", int(attn.head_dim), "timm: model.blocks[0].attn.head_dim")
    if hasattr(model, "has_class_token"):
        r.fact("class_token", bool(model.has_class_token), "timm: model.has_class_token")
    r.fact("distill_token", getattr(model, "dist_token", None) is not None, "timm: model.dist_token")
    if hasattr(model, "num_reg_tokens"):
        r.fact("registers", int(model.num_reg_tokens), "timm: model.num_reg_tokens")
    pool = getattr(model, "global_pool", None)
    if pool in TIMM_POOLS:
        r.fact("pooling", TIMM_POOLS[pool], f"timm: model.global_pool = {pool!r}")
    elif pool is not None:
        r.notes.append(f"timm: model.global_pool = {pool!r} has no spec pooling (expected token, avg or map)")
    if getattr(model, "pos_embed", None) is not None and hasattr(model, "no_embed_class"):
        prefix_rows = not model.no_embed_class
        where = f"timm: model.no_embed_class = {model.no_embed_class}, has_class_token, num_reg_tokens"
        r.fact("pos_embed_class_row", prefix_rows and bool(getattr(model, "has_class_token", True)), where)
        r.fact("pos_embed_register_rows", prefix_rows and bool(getattr(model, "num_reg_tokens", 0)), where)
    if hasattr(model, "norm_pre"):
        r.fact("norm_before_blocks", not _is_identity(model.norm_pre), "timm: model.norm_pre")
    if hasattr(model, "fc_norm") and hasattr(model, "norm"):
        final = "pooled" if not _is_identity(model.fc_norm) else \
            "none" if _is_identity(model.norm) else "tokens"
        r.fact("final_norm", final, "timm: model.fc_norm / model.norm")
    if hasattr(model, "num_classes"):
        r.fact("num_classes", int(model.num_classes), "timm: model.num_classes")
    rope = getattr(model, "rope", None)
    if rope is None:
        r.fact("rope", "none", "timm: no model.rope (timm's rotary embeddings are its Eva models')")
    else:  # an Eva: its constructor's rotary arguments, as a timm config's model_args states them
        r.config = {"model_args": _eva_rope_args(model, rope)}
    return r


def _eva_rope_args(model: Any, rope: Any) -> dict[str, Any]:
    """A timm Eva's rotary settings, read back from its modules in the form of the `model_args`
    the timm format's Eva inference reads (and refuses what the spec cannot say from)."""
    attn = getattr(model.blocks[0], "attn", None) if len(model.blocks) else None
    ref = getattr(rope, "ref_feat_shape", None)
    cat = type(rope).__name__ == "RotaryEmbeddingCat" and not getattr(rope, "in_pixels", False) \
        and not getattr(rope, "linear_bands", False)  # the axial index grid the spec states
    return {"use_rot_pos_emb": True,
            "rope_type": "cat" if cat else f"{type(rope).__name__} (in_pixels or linear bands)",
            "rope_rotate_half": bool(getattr(attn, "rotate_half", False)),
            "rope_temperature": float(getattr(rope, "temperature", 10_000.0)),
            "ref_feat_shape": list(ref) if ref is not None else None,
            "rope_grid_offset": float(getattr(rope, "grid_offset", 0.0)),
            "rope_grid_indexing": getattr(rope, "grid_indexing", "ij")}


# ---- torchvision ----------------------------------------------------------------------------------
def torchvision_reading(model: Any) -> Reading | None:
    """torchvision's VisionTransformer keeps its constructor arguments as attributes; the head
    count is its attention modules' (`encoder.layers[0].self_attention.num_heads`)."""
    if not _module_of(model).startswith("torchvision.models.vision_transformer"):
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


# ---- Transformers ---------------------------------------------------------------------------------
HF_VIT_KEYS = {  # ViTConfig key -> spec field(s)
    "hidden_size": ("dim",), "num_hidden_layers": ("depth",), "num_attention_heads": ("heads",),
    "intermediate_size": ("mlp_dim",), "layer_norm_eps": ("layer_norm_eps",), "num_channels": ("channels",),
    "qkv_bias": ("qkv_bias",), "image_size": ("image_height", "image_width"),
    "patch_size": ("patch_height", "patch_width"),
}


def transformers_reading(model: Any) -> Reading | None:
    """A Transformers model carries its `config`: for a ViT its keys are spec fields
    (`config.layer_norm_eps`, ...); the hf format's `infer` reads the rest (and the other vision
    models' configs) with the state dict. That `infer` reads PyTorch's tensor names: for the
    TensorFlow and Flax classes the ViT's config and architecture say everything, and another
    model type is read from its layers."""
    config = getattr(model, "config", None)
    if not _module_of(model).startswith("transformers.") or not hasattr(config, "to_dict"):
        return None
    values = config.to_dict()
    class_name = type(model).__name__
    torch_names = not class_name.startswith(("TF", "Flax"))
    # its modules took the heads and eps from `config` when built; `config` may have been edited since
    r = Reading(f"transformers {class_name}", fmt="hf" if torch_names else None, config=values,
                config_keys={"heads": "num_attention_heads", "layer_norm_eps": "layer_norm_eps"})
    if not torch_names and values.get("model_type") != "vit":
        r.notes.append(f"transformers {class_name}: a {values.get('model_type')} config is read with "
                       "PyTorch's tensor names; its PyTorch class, or --spec, states every field")
    if values.get("model_type") != "dinov3_vit":  # DINOv3's rotary settings: the hf format's infer
        r.fact("rope", "none", f"transformers {values.get('model_type')}: no rotary position embeddings")
    if values.get("model_type") == "vit":
        r.plain_vit("transformers ViT's architecture")
        if values.get("hidden_act") in ACTIVATIONS:
            act = values["hidden_act"]
            r.fact("activation", ACTIVATIONS[act], f"config.hidden_act = {act!r}")
        heads, dim = values.get("num_attention_heads"), values.get("hidden_size")
        if isinstance(heads, int) and isinstance(dim, int) and heads and dim % heads == 0:
            r.fact("head_dim", dim // heads, "config.hidden_size / config.num_attention_heads")
        for key, names in HF_VIT_KEYS.items():
            value = values.get(key)
            pair = _pair(value) if len(names) == 2 else None
            for i, name in enumerate(names):
                if pair is not None:
                    r.fact(name, pair[i], f"config.{key}")
                elif len(names) == 1 and value is not None:
                    r.fact(name, float(value) if name == "layer_norm_eps" else value, f"config.{key}")
        if not torch_names:  # what the hf format's infer would add from PyTorch's tensor names
            for field_name, value in VIT_ARCHITECTURE.items():
                r.fact(field_name, value, "transformers ViT's architecture")
            if class_name.endswith("ForImageClassification"):
                r.fact("num_classes", int(config.num_labels), "config.num_labels")
    return r


# ---- keras-hub ------------------------------------------------------------------------------------
KERAS_HUB_KEYS = {"num_layers": "depth", "num_heads": "heads", "hidden_dim": "dim", "mlp_dim": "mlp_dim",
                  "layer_norm_epsilon": "layer_norm_eps", "use_mha_bias": "qkv_bias",
                  "use_class_token": "class_token", "use_patch_bias": "patch_bias"}
KERAS_HUB_POOLS = {"token": "cls", "gap": "mean_all"}  # gap: every token, the class token too


def keras_hub_reading(model: Any) -> Reading | None:
    """keras-hub's ViTBackbone / ViTImageClassifier: `get_config()` states the backbone's
    arguments (and the classifier's `num_classes`, `pooling`); the architecture fixes the rest."""
    if not _module_of(model).startswith("keras_hub.") or not hasattr(model, "get_config"):
        return None
    config = model.get_config()
    nested = config.get("backbone")
    where = "keras-hub: get_config()['backbone']['config']" if isinstance(nested, dict) else \
        "keras-hub: get_config()"
    backbone = nested.get("config", {}) if isinstance(nested, dict) else config
    if "hidden_dim" not in backbone or "patch_size" not in backbone:
        return None  # a keras-hub model of another kind
    if type(model).__name__ not in ("ViTBackbone", "ViTImageClassifier"):
        # DINOv2, DeiT, SigLIP, CLIP: the keras_hub checkpoint format's family inference reads the
        # serialised config (as save_to_preset writes it) beside the variables
        import keras

        return Reading(f"keras-hub {type(model).__name__}", fmt="keras_hub",
                       config=keras.saving.serialize_keras_object(model))
    r = Reading(f"keras-hub {type(model).__name__}")
    architecture = "keras-hub ViTBackbone's architecture"
    r.plain_vit(architecture)
    for key, name in KERAS_HUB_KEYS.items():
        if key in backbone:
            value = float(backbone[key]) if name == "layer_norm_eps" else backbone[key]
            r.fact(name, value, f"{where}[{key!r}]")
    shape = backbone.get("image_shape") or ()
    for name, value in zip(("image_height", "image_width", "channels"), shape, strict=False):
        if value is not None:
            r.fact(name, int(value), f"{where}['image_shape']")
    patch = _pair(backbone.get("patch_size"))
    if patch is not None:
        r.fact("patch_height", patch[0], f"{where}['patch_size']")
        r.fact("patch_width", patch[1], f"{where}['patch_size']")
    if backbone.get("num_heads") and backbone.get("hidden_dim"):
        r.fact("head_dim", backbone["hidden_dim"] // backbone["num_heads"],
               "keras-hub: hidden_dim / num_heads")
    class_token = bool(backbone.get("use_class_token", True))
    for name, value in (("pos_embed", "learned"), ("pos_embed_class_row", class_token), ("norm", "pre"),
                        ("final_norm", "tokens"), ("remainder", "drop"), ("head_hidden", ()),
                        ("pos_rows", None)):
        r.fact(name, value, architecture)
    if "num_classes" in config:
        r.fact("num_classes", int(config["num_classes"]), "keras-hub: get_config()['num_classes']")
    pooling = config.get("pooling")
    if pooling in KERAS_HUB_POOLS:
        r.fact("pooling", KERAS_HUB_POOLS[pooling], f"keras-hub: get_config()['pooling'] = {pooling!r}")
    elif pooling is not None:
        r.notes.append(f"keras-hub: pooling = {pooling!r} is not one the spec expresses (token, gap)")
    if config.get("intermediate_dim") or config.get("activation"):
        r.notes.append("keras-hub: the classifier's intermediate_dim / activation are not read")
    return r


# The readers, in the order tried: the first that recognises the model reads it.
READERS: list[Callable[[Any], Reading | None]] = [
    timm_reading, torchvision_reading, transformers_reading, keras_hub_reading,
]


def library_reading(model: Any) -> Reading | None:
    """The reading of the first library in `READERS` that recognises `model`; None for a model no
    known library built."""
    for reader in READERS:
        found = reader(model)
        if found is not None:
            return found
    return None
