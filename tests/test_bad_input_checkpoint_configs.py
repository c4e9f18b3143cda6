"""Class 3 of issue 33, configs that lie: a Transformers, timm or keras-hub config whose value has the
wrong type (a string, null, NaN where a number goes, 0 where a boolean goes), is zero or out of
bounds (a zero patch, zero heads) or would have been coerced (`ref_feat_shape: "14"` read as the
grid [1, 4], an image size of 8.9 read as 8) or contradicts the tensors or itself (timm's
`model_args.depth` against the blocks, `model_args.global_pool` against `global_pool`); a tensor whose
rank contradicts its role (a 1-D position table, a 3-D patch kernel); and a Transformers config that
names custom code (`auto_map`).

Each is `convert --from ...` ending in one `error:` line naming the checkpoint's own key (or
tensor) and value, exit 2, no traceback, and no output written. The checkpoints are tiny ones
written by portbench's own exporters, then edited."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from shared.checkpoints import export_checkpoint
from shared.checkpoints.libraries.timm import target
from shared.core.spec import ModelSpec
from shared.core.weights import init_weights
from shared.errors import SpecError
from tests.adversarial import refused, run_cli

TINY = dict(name="tiny", image_height=8, image_width=8, channels=3, patch_height=4, patch_width=4, dim=8,
            depth=1, heads=2, head_dim=4, mlp_dim=16, num_classes=2, layer_norm_eps=1e-6)
SPECS = {  # base -> (format, the spec it is exported from)
    "hf-vit": ("hf", dict(TINY, layer_norm_eps=1e-12)),
    "hf-dinov2": ("hf", dict(TINY, layer_scale=True, num_classes=0)),
    "hf-dinov2-registers": ("hf", dict(TINY, layer_scale=True, num_classes=0, registers=2)),
    "hf-dinov3": ("hf", dict(TINY, layer_scale=True, num_classes=0, pos_embed="none", rope="axial_half",
                             pos_embed_class_row=False, rope_coords="centered", rope_theta=100.0,
                             layer_norm_eps=1e-5)),
    "timm-eva": ("timm", dict(TINY, rope="axial_interleaved", rope_ref_grid=(2, 2), pooling="mean",
                              final_norm="pooled")),
    "big_vision": ("big_vision", dict(TINY, class_token=False, pos_embed_class_row=False, pooling="mean",
                                      activation="gelu_tanh")),
    "torchvision": ("torchvision", TINY),
    "timm-vit": ("timm", TINY),
    "keras_hub": ("keras_hub", TINY),  # ViTImageClassifier: task.json around its backbone's config
    "keras_hub-backbone": ("keras_hub", dict(TINY, num_classes=0)),  # ViTBackbone: config.json
    "keras_hub-dinov2": ("keras_hub", dict(TINY, layer_scale=True, num_classes=0, registers=2,
                                           pos_embed_register_rows=False)),
    "keras_hub-clip": ("keras_hub", dict(TINY, num_classes=0, norm_before_blocks=True, patch_bias=False,
                                         activation="quick_gelu", layer_norm_eps=1e-5)),
}
WEIGHTS = {"hf": "model.safetensors", "timm": "m.safetensors", "big_vision": "m.npz",
           "torchvision": "m.safetensors"}
FOLDERS = ("hf", "keras_hub")  # formats whose checkpoint is a folder their exporter writes


def _write(folder: Path, fmt: str, spec: ModelSpec) -> None:
    """The checkpoint as the library saves it: an hf save_pretrained folder; a keras-hub
    save_to_preset folder; a timm state dict with the config.json push_to_hub writes (`model_args`:
    the kwargs that build it); a big_vision tree."""
    if fmt in FOLDERS:
        export_checkpoint(fmt, spec, init_weights(spec), folder)
        return
    folder.mkdir()
    export_checkpoint(fmt, spec, init_weights(spec), folder / WEIGHTS[fmt])
    if fmt == "timm":
        kwargs = target(spec)[1]
        arch = "eva_tiny" if spec.rope != "none" else "vit_tiny"
        config = {"architecture": arch, "num_classes": spec.num_classes,
                  "global_pool": kwargs["global_pool"], "model_args": kwargs,
                  "pretrained_cfg": {"input_size": [spec.channels, spec.image_height, spec.image_width]}}
        (folder / "config.json").write_text(json.dumps(config))


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bases")
    for name, (fmt, fields) in SPECS.items():
        _write(root / name, fmt, ModelSpec.from_dict(fields))
    return root


def _argv(base: str) -> list[str]:
    fmt = SPECS[base][0]
    source = ["--in", "."] if fmt in FOLDERS else ["--in", WEIGHTS[fmt]]
    extra = {"timm": ["--config", "config.json"], "torchvision": ["--set", "heads=2"]}.get(fmt, [])
    return ["convert", "--from", fmt, *source, *extra, "--out", "w.safetensors"]


def _copy(bases: Path, base: str, tmp_path: Path) -> Path:
    folder = tmp_path / base
    shutil.copytree(bases / base, folder)
    return folder


def _config_file(base: str) -> str:
    """The config the reader reads: a keras-hub preset's task.json when it has a task."""
    return "task.json" if base == "keras_hub" else "config.json"


DELETED = object()
READ_WITHOUT = {"pretrained_cfg.input_size": "model_args.img_size",  # a key timm reads only without another
                "global_pool": "model_args.global_pool"}


def _set(folder: Path, key: str, value: Any, file: str = "config.json") -> None:
    """The config with `key` (dotted for a nested one) set to `value` (or removed: `DELETED`),
    written as JSON (NaN as Python's json writes it, which JSON readers, portbench's included, accept)."""
    config = json.loads((folder / file).read_text())
    *parents, last = key.split(".")
    node = config
    for part in parents:
        node = node[part]
    if value is DELETED:
        del node[last]
    else:
        node[last] = value
    (folder / file).write_text(json.dumps(config))


@pytest.mark.parametrize("base", SPECS)
def test_each_untouched_checkpoint_converts(bases: Path, tmp_path: Path, base: str) -> None:
    """The cases below differ from a checkpoint that converts by the one value each edits."""
    outcome = run_cli(*_argv(base), cwd=_copy(bases, base, tmp_path))
    assert outcome.code == 0, outcome.stderr


def sets(*fields: str) -> str:
    return f"(it sets the spec's {' and '.join(fields)})"


NUMBER = "expected a finite number > 0"
INTEGER = "expected an integer from"
SIZE = "expected an integer or a list of 2 integers, each number from 1 to"
BOOLEAN = "expected true or false"
CONFIG_CASES = [  # (base, key, value, what the line says after "config KEY = VALUE: ")
    ("hf-vit", "hidden_size", "8", f"{INTEGER} 1 to 65,536 {sets('dim')}"),
    ("hf-vit", "num_attention_heads", 0, f"{INTEGER} 1 to 1,024 {sets('heads')}"),
    ("hf-vit", "num_hidden_layers", True, f"{INTEGER} 1 to 1,024 {sets('depth')}"),
    ("hf-vit", "intermediate_size", None, f"{INTEGER} 1 to 1,048,576 {sets('mlp_dim')}"),
    ("hf-vit", "layer_norm_eps", None, f"{NUMBER} {sets('layer_norm_eps')}"),
    ("hf-vit", "layer_norm_eps", float("nan"), f"{NUMBER} {sets('layer_norm_eps')}"),
    ("hf-vit", "patch_size", 0, f"{SIZE} 4,096 {sets('patch_height', 'patch_width')}"),
    ("hf-vit", "image_size", [8.9, 8.9], f"{SIZE} 65,536 {sets('image_height', 'image_width')}"),
    ("hf-vit", "image_size", 8.9, SIZE),
    ("hf-vit", "hidden_act", ["gelu"], "expected one of gelu | gelu_pytorch_tanh | gelu_new"),
    ("hf-vit", "qkv_bias", "yes", f"{BOOLEAN} {sets('qkv_bias')}"),
    ("hf-vit", "model_type", ["vit"], "expected text"),
    ("hf-dinov2", "mlp_ratio", "2", f"{NUMBER} {sets('mlp_dim')}"),
    ("hf-dinov2", "mlp_ratio", 0, f"{NUMBER} {sets('mlp_dim')}"),
    ("hf-dinov2", "mlp_ratio", 0.01, "makes an MLP width of 8 x 0.01 = 0.08: expected a ratio that makes"),
    ("hf-dinov2", "use_swiglu_ffn", 0, f"{BOOLEAN} {sets('mlp')}"),
    ("hf-dinov2-registers", "num_register_tokens", -1, f"{INTEGER} 0 to 1,024 {sets('registers')}"),
    ("hf-dinov3", "rope_theta", None, f"{NUMBER} {sets('rope_theta')}"),
    ("hf-dinov3", "key_bias", "no", f"{BOOLEAN} {sets('qkv_bias', 'bias_free')}"),
    ("timm-eva", "model_args.ref_feat_shape", "14", "expected an integer, a list of 2 integers or null, each "
                                                    f"number from 1 to 1,048,576 {sets('rope_ref_grid')}"),
    ("timm-eva", "model_args.ref_feat_shape", [2.5, 2], sets("rope_ref_grid")),
    ("timm-eva", "model_args.rope_temperature", float("nan"), f"{NUMBER} {sets('rope_theta')}"),
    ("timm-eva", "model_args.rope_temperature", "1e4", f"{NUMBER} {sets('rope_theta')}"),
    ("timm-eva", "model_args.use_post_norm", 0, f"{BOOLEAN} {sets('norm')}"),
    ("timm-eva", "model_args.num_heads", 0, f"{INTEGER} 1 to 1,024 {sets('heads')}"),
    ("timm-eva", "model_args.img_size", 8.9, f"{SIZE} 65,536 {sets('image_height', 'image_width')}"),
    ("timm-eva", "model_args.img_size", [8.9, 8], SIZE),
    ("timm-eva", "model_args.act_layer", ["gelu"], "expected one of gelu | gelu_tanh | quick_gelu | silu"),
    ("timm-eva", "pretrained_cfg.input_size", [3, 8], "expected a list of 3 integers, each number from 1 to"),
    ("timm-eva", "model_args", 3, "expected an object of keys"),
    ("timm-eva", "model_args.attn_pool_num_heads", 0,
     f"expected an integer or null, each number from 1 to 1,024 {sets('heads')}"),
    ("timm-eva", "architecture", ["qwen3_vit_88m_enc"], "expected text"),  # Qwen3-ViT's is known by it
    # timm's VisionTransformer: each model_args key the reader reads is typed, and one the tensors state
    # too is held to them; push_to_hub's global_pool is the pool of model_args' model
    ("timm-vit", "global_pool", "x", "expected one of token | avg | map"),
    ("timm-vit", "model_args.global_pool", "avg",
     "contradicts config global_pool = 'token' (timm builds model_args' pool"),
    ("timm-vit", "global_pool", "map", "the checkpoint has no tensor 'attn_pool.latent'"),
    ("timm-vit", "model_args.depth", 5, "the tensors say depth = 1 (1 'blocks.*' blocks)"),
    ("timm-vit", "model_args.depth", "1", f"{INTEGER} 1 to 1,024 {sets('depth')}"),
    ("timm-vit", "model_args.embed_dim", 16, "the tensors say dim = 8 (tensor 'patch_embed.proj.weight'"),
    ("timm-vit", "model_args.in_chans", 1, "the tensors say channels = 3"),
    ("timm-vit", "model_args.patch_size", [2, 2], "the tensors say patch_height = 4, patch_width = 4"),
    ("timm-vit", "model_args.mlp_ratio", "x", f"{NUMBER} {sets('mlp_dim')}"),
    ("timm-vit", "model_args.mlp_ratio", 3.0, "the tensors say mlp_dim = 16"),
    ("timm-vit", "model_args.mlp_ratio", 1e308, "(timm builds int(embed_dim * mlp_ratio) = inf)"),  # a crash
    ("timm-vit", "model_args.qkv_bias", "x", f"{BOOLEAN} {sets('qkv_bias')}"),
    ("timm-vit", "model_args.qkv_bias", False, "the tensors say qkv_bias = True"),
    ("timm-vit", "model_args.class_token", False, "the tensors say class_token = True (presence of tensor"),
    ("timm-vit", "model_args.reg_tokens", 2, "the tensors say registers = 0"),
    ("timm-vit", "num_classes", 1000, "the tensors say num_classes = 2 (tensor 'head.weight')"),
    ("timm-vit", "model_args.num_classes", True, f"{INTEGER} 0 to"),
    # keras-hub: a preset's get_config() keys, by their paths in config.json or task.json
    ("keras_hub-backbone", "config.num_layers", "x", f"{INTEGER} 1 to 1,024 {sets('depth')}"),
    ("keras_hub-backbone", "config.num_layers", None, f"{INTEGER} 1 to 1,024 {sets('depth')}"),
    ("keras_hub-backbone", "config.num_layers", [], f"{INTEGER} 1 to 1,024 {sets('depth')}"),
    ("keras_hub-backbone", "config.num_layers", {}, f"{INTEGER} 1 to 1,024 {sets('depth')}"),
    ("keras_hub-backbone", "config.num_layers", 2.5, f"{INTEGER} 1 to 1,024 {sets('depth')}"),
    ("keras_hub-backbone", "config.num_heads", 0, f"{INTEGER} 1 to 1,024 {sets('heads')}"),
    ("keras_hub-backbone", "config.num_heads", "2", f"{INTEGER} 1 to 1,024 {sets('heads')}"),
    ("keras_hub-backbone", "config.hidden_dim", "x", f"{INTEGER} 1 to 65,536 {sets('dim')}"),
    ("keras_hub-backbone", "config.mlp_dim", None, f"{INTEGER} 1 to 1,048,576 {sets('mlp_dim')}"),
    ("keras_hub-backbone", "config.image_shape", [8, "8", 3], "expected a list of 3 integers"),
    ("keras_hub-backbone", "config.patch_size", [4.5, 4], SIZE),
    ("keras_hub-backbone", "config.layer_norm_epsilon", True, f"{NUMBER} {sets('layer_norm_eps')}"),
    ("keras_hub-backbone", "config.layer_norm_epsilon", "x", f"{NUMBER} {sets('layer_norm_eps')}"),
    ("keras_hub-backbone", "config.use_mha_bias", "false", f"{BOOLEAN} {sets('qkv_bias')}"),
    ("keras_hub-backbone", "config.use_class_token", 1, f"{BOOLEAN} {sets('class_token')}"),
    ("keras_hub", "config.backbone.config.num_layers", "x", f"{INTEGER} 1 to 1,024 {sets('depth')}"),
    ("keras_hub", "config.backbone.config.num_heads", 0, f"{INTEGER} 1 to 1,024 {sets('heads')}"),
    ("keras_hub", "config.pooling", [], f"expected one of token | gap {sets('pooling')}"),
    ("keras_hub", "config.num_classes", "2", f"{INTEGER} 1 to"),
    ("keras_hub", "config.num_classes", 5, "the checkpoint has 2, the columns of tensor 'predictions/kernel"),
    ("keras_hub", "config.intermediate_dim", "x", "expected an integer or null"),
    ("keras_hub-dinov2", "config.num_register_tokens", "2", f"{INTEGER} 0 to 1,024 {sets('registers')}"),
    ("keras_hub-dinov2", "config.use_swiglu_ffn", "false", f"{BOOLEAN} {sets('mlp')}"),
    ("keras_hub-dinov2", "config.intermediate_dim", 16.5, f"{INTEGER} 1 to 1,048,576 {sets('mlp_dim')}"),
    ("keras_hub-clip", "config.intermediate_activation", None, f"expected text {sets('activation')}"),
    ("keras_hub-clip", "config.patch_size", "4", SIZE),
]


@pytest.mark.parametrize("base, key, value, expect", CONFIG_CASES,
                         ids=[f"{c[0]}-{c[1]}={c[2]!r}" for c in CONFIG_CASES])
def test_a_config_value_of_the_wrong_type_or_bounds_is_named_by_its_own_key(
        bases: Path, tmp_path: Path, base: str, key: str, value: Any, expect: str) -> None:
    folder = _copy(bases, base, tmp_path)
    if key in READ_WITHOUT:
        _set(folder, READ_WITHOUT[key], DELETED)
    _set(folder, key, value, _config_file(base))
    line = refused(folder, *_argv(base), expect=expect)
    shown = "nan" if isinstance(value, float) and value != value else repr(value)
    assert line.startswith(f"error: config {key} = {shown}"), line


TENSOR_CASES = [  # (base, tensor, the shape written, the dimensions its role has)
    ("hf-vit", "vit.embeddings.patch_embeddings.projection.weight", (8, 3, 4),
     "4 dimensions (out, in, height, width)"),
    ("hf-vit", "classifier.weight", (2,), "2 dimensions (classes, width)"),
    ("timm-eva", "pos_embed", (8,), "3 dimensions (batch, rows, width)"),
    ("timm-eva", "patch_embed.proj.weight", (8, 3, 4), "4 dimensions (out, in, height, width)"),
    ("timm-eva", "blocks.0.mlp.fc2.weight", (8,), "2 dimensions (out, in)"),
    ("big_vision", "embedding/kernel", (4, 4, 3), "4 dimensions (height, width, in, out)"),
    ("big_vision", "Transformer/encoderblock_0/MultiHeadDotProductAttention_0/query/kernel", (8, 0, 4),
     "3 dimensions (in, heads, head width), none of them empty"),
    ("big_vision", "pos_embedding", (8,), "3 dimensions (batch, rows, width)"),
    ("torchvision", "conv_proj.weight", (8, 3, 4, 4, 1), "4 dimensions (out, in, height, width)"),
    ("torchvision", "encoder.pos_embedding", (5, 8), "3 dimensions (batch, rows, width)"),
]


@pytest.mark.parametrize("base, name, shape, expect", TENSOR_CASES,
                         ids=[f"{c[0]}-{c[1]}-{len(c[2])}d" for c in TENSOR_CASES])
def test_a_tensor_whose_rank_contradicts_its_role_is_named(bases: Path, tmp_path: Path, base: str, name: str,
                                                           shape: tuple[int, ...], expect: str) -> None:
    from safetensors.numpy import load_file, save_file

    folder = _copy(bases, base, tmp_path)
    path = folder / WEIGHTS[SPECS[base][0]]
    if path.suffix == ".npz":
        tensors = dict(np.load(path))
        tensors[name] = np.ones(shape, np.float32)
        np.savez(path, **tensors)
    else:
        tensors = load_file(str(path))
        tensors[name] = np.ones(shape, np.float32)
        save_file(tensors, str(path))
    refused(folder, *_argv(base), expect=f"tensor {name!r} has shape {shape}: expected {expect}")


def test_custom_code_is_refused_unless_the_user_states_the_spec(bases: Path, tmp_path: Path) -> None:
    """`auto_map` names a class beside the checkpoint (never run): its function is not known to be
    the standard class's, so the user states it; then the tensors are read by the standard names."""
    folder = _copy(bases, "hf-vit", tmp_path)
    _set(folder, "auto_map", {"AutoModelForImageClassification": "modeling_mine.MyViT"})
    line = refused(folder, *_argv("hf-vit"), expect="config auto_map = {'AutoModelForImageClassification': "
                                                     "'modeling_mine.MyViT'} names custom code")
    assert "state the spec it computes with --spec" in line
    refused(folder, *_argv("hf-vit"), "--set", "heads=2", expect="names custom code")  # one field is no spec
    (folder / "spec.json").write_text(ModelSpec.from_dict(SPECS["hf-vit"][1]).to_json())
    outcome = run_cli(*_argv("hf-vit"), "--spec", "spec.json", cwd=folder)
    assert outcome.code == 0, outcome.stderr
    assert (folder / "w.safetensors").is_file()


def test_every_key_a_transformers_class_reads_has_a_row_its_default_keeps() -> None:
    """A class reads the keys its defaults name (`class_config`): each must have a row in HF_KEYS (or
    reading it would fail as a bug), and Transformers' own default must pass that row."""
    from shared.checkpoints.libraries.hf import ARCHITECTURES, HF_KEYS, VIT_DEFAULTS

    for defaults in [VIT_DEFAULTS, *(arch.defaults for arch in ARCHITECTURES.values())]:
        for name, default in defaults.items():
            assert name in HF_KEYS and HF_KEYS[name].holds(default), (name, default)


@pytest.mark.parametrize("changes, expect, writers", [
    ({"norm_type": "rms_norm"}, "spec field norm_type='rms_norm'", {"timm"}),  # timm: norm_layer=RmsNorm
    ({"final_norm_eps": 1e-3}, "spec field final_norm_eps=0.001", set()),
    ({"bias_free": ("attn.out",)}, "spec field bias_free=('attn.out',)", set()),
    ({"kv_heads": 2}, "spec field kv_heads=2", set()),
], ids=["rms-norm", "second-eps", "bias-free", "gqa"])
def test_no_library_exporter_writes_a_block_it_cannot_express(tmp_path: Path, changes: dict[str, Any],
                                                              expect: str, writers: set[str]) -> None:
    """No library exporter here writes a second LayerNorm epsilon, a lone missing bias or GQA, and only
    those in `writers` write RMSNorm (on quadrant's ViT; Transformers' RMSNorm classes are AIMv2's and
    InternVL's towers): each other refuses the spec field in one line, and nothing is written."""
    from shared.checkpoints import FORMATS
    from shared.core.presets import get_preset

    spec = get_preset("quadrant").replace(**changes)
    for fmt in FORMATS:
        # big_vision's own refusal of the class row comes first: give it a spec it otherwise takes
        spec_fmt = spec.replace(pos_embed_class_row=False) if fmt == "big_vision" else spec
        out = tmp_path / fmt
        if fmt in writers:
            export_checkpoint(fmt, spec_fmt, init_weights(spec_fmt, 0), out.with_suffix(".safetensors"))
            continue
        with pytest.raises(SpecError, match=f"cannot export to .*{re.escape(expect)}"):
            export_checkpoint(fmt, spec_fmt, init_weights(spec_fmt, 0), out)
        assert not out.exists()


def test_only_transformers_pixtral_writes_alternating_rotary_bands(tmp_path: Path) -> None:
    """rope_bands='alternating' (Pixtral's) on DINOv3's rotary spec: timm's Eva refuses rope_bands in
    one line, Transformers takes it to PixtralVisionModel, which refuses what Pixtral has not (DINOv3's
    class token), the others a field of the rotary spec they meet first (rope, or its absent position
    table); nothing is written."""
    from shared.checkpoints import FORMATS
    from shared.core.presets import get_preset

    spec = get_preset("rope-tiny").replace(rope_bands="alternating")
    for fmt in FORMATS:
        out = tmp_path / fmt
        with pytest.raises(SpecError, match=r"cannot export to .*spec field ") as caught:
            export_checkpoint(fmt, spec, init_weights(spec, 0), out)
        line = str(caught.value)
        assert "\n" not in line
        if fmt == "timm":
            assert "spec field rope_bands='alternating'" in line and "needs shared" in line, line
        if fmt == "hf":
            assert line.startswith("cannot export to Hugging Face PixtralVisionModel: spec field class_token")
        assert not out.exists()


def test_a_registry_architecture_that_is_not_the_checkpoints_lends_it_no_heads(bases: Path,
                                                                               tmp_path: Path) -> None:
    """push_to_hub's config names the architecture and keeps only the caller's overrides: the heads
    it leaves out are the registry model's. A config naming vit_tiny_patch16_224 (192 wide, 12 blocks,
    3 heads) beside a state dict of another width lent it 3 heads, and the conversion passed with
    a gap of 7.9e-3 to timm's logits; the registry model's width and depth are now held to the
    tensors first."""
    folder = _copy(bases, "timm-vit", tmp_path)
    config = json.loads((folder / "config.json").read_text())
    config["architecture"] = "vit_tiny_patch16_224"
    for key in ("embed_dim", "depth", "num_heads"):
        del config["model_args"][key]
    (folder / "config.json").write_text(json.dumps(config))
    refused(folder, *_argv("timm-vit"), expect="config architecture = 'vit_tiny_patch16_224' builds "
            "embed_dim 192 and depth 12; the tensors hold 8 and 1: its heads are not this checkpoint's")
