"""`compare.py convert` both ways, the canonical file being self-sufficient for `logits`, and
every bad input turned into one line naming the tensor or field, with no output written."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

import compare
from shared.core.inputs import probe_batch
from shared.core.weights import load_weights
from tests.checkpoints_support import ATOL, library_logits, perturbed, state_dict

os.environ.setdefault("USE_TF", "0")
os.environ.setdefault("USE_FLAX", "0")

TIMM_KWARGS = dict(img_size=(16, 24), patch_size=(8, 4), embed_dim=16, depth=2, num_heads=2,
                   num_classes=3, class_token=False, global_pool="avg", fc_norm=True)
TIMM_SET = ["--set", "heads=2", "--set", "image_height=16", "--set", "image_width=24"]


def timm_model(**overrides: object) -> torch.nn.Module:
    from timm.models.vision_transformer import VisionTransformer

    torch.manual_seed(0)
    return perturbed(VisionTransformer(**{**TIMM_KWARGS, **overrides}), seed=4)


def tv_checkpoint(tmp_path: Path) -> Path:
    from torchvision.models.vision_transformer import VisionTransformer

    model = VisionTransformer(image_size=16, patch_size=8, num_layers=1, num_heads=2, hidden_dim=16,
                              mlp_dim=32, num_classes=3)
    path = tmp_path / "tv.pth"
    torch.save(model.state_dict(), path)
    return path


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = compare.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_convert_timm_both_ways_and_logits_need_only_the_file(tmp_path, capsys) -> None:
    model = timm_model()
    source = tmp_path / "timm.pth"
    torch.save(model.state_dict(), source)
    canonical = tmp_path / "w.safetensors"
    code, out, err = run(["convert", "--from", "timm", "--in", str(source), *TIMM_SET,
                          "--out", str(canonical)], capsys)
    assert code == 0, err
    assert "layer_norm_eps=1e-06 (timm's LayerNorm)" in out
    # The file alone carries the spec: logits on Flax need no --spec or --set.
    logits_path = tmp_path / "y.npy"
    code, _, err = run(["logits", "--weights", str(canonical), "--framework", "flax",
                        "--out", str(logits_path)], capsys)
    assert code == 0, err
    spec = load_weights(canonical).spec
    expected = library_logits(model, probe_batch(spec))
    assert np.abs(np.load(logits_path) - expected).max() <= ATOL
    # And back to a timm state dict, bit for bit.
    exported = tmp_path / "back.pth"
    code, out, err = run(["convert", "--to", "timm", "--in", str(canonical), "--out", str(exported)],
                         capsys)
    assert code == 0, err
    assert "class_token=False" in out and "global_pool='avg'" in out
    back = torch.load(exported, weights_only=True, map_location="cpu")
    original = state_dict(model)
    assert set(back) == set(original)
    assert all(np.array_equal(back[k].numpy(), original[k]) for k in original)


def test_convert_hf_directory_round_trip(tmp_path, capsys) -> None:
    from transformers import ViTConfig, ViTForImageClassification

    torch.manual_seed(0)
    model = perturbed(ViTForImageClassification(ViTConfig(
        hidden_size=16, num_hidden_layers=1, num_attention_heads=4, intermediate_size=24, image_size=16,
        patch_size=4, num_labels=2, layer_norm_eps=1e-12)), seed=2)
    model.save_pretrained(tmp_path / "hf")
    canonical, again = tmp_path / "w.safetensors", tmp_path / "again"
    source = str(tmp_path / "hf")
    assert run(["convert", "--from", "hf", "--in", source, "--out", str(canonical)], capsys)[0] == 0
    assert load_weights(canonical).spec.layer_norm_eps == 1e-12  # HF's own eps, not timm's
    assert run(["convert", "--to", "hf", "--in", str(canonical), "--out", str(again)], capsys)[0] == 0
    reloaded = ViTForImageClassification.from_pretrained(str(again)).eval()
    images = probe_batch(load_weights(canonical).spec)
    assert np.array_equal(library_logits(reloaded, images), library_logits(model, images))


class NotATensor:
    """Anything but a tensor: torch.load(weights_only=True) refuses to build it."""


def bad_timm_file(tmp_path: Path, change: str) -> Path:
    tensors = timm_model().state_dict()
    if change == "extra":
        tensors["extra.weight"] = torch.zeros(3)
    elif change == "missing":
        del tensors["blocks.1.mlp.fc2.bias"]
    elif change == "misshapen":
        tensors["blocks.0.mlp.fc2.bias"] = torch.zeros(5)
    elif change == "pickle":
        tensors = {"model": tensors, "extra": NotATensor()}
    elif change == "int-key":  # torch.save keeps it; timm's normalise crashed on it
        tensors[5] = torch.zeros(3)
    elif change == "scale_mlp_norm":  # a LayerNorm inside the MLP: the spec has no field for it
        tensors = timm_model(scale_mlp_norm=True).state_dict()
    path = tmp_path / f"{change}.pth"
    torch.save(tensors, path)
    return path


BAD_TIMM = [
    ("extra", [], "1 unused (extra.weight)"),
    ("missing", [], "1 missing (blocks.1.mlp.fc2.bias)"),
    ("misshapen", [], "tensor 'blocks.0.mlp.fc2.bias' has shape (5,), the spec expects (16,)"),
    ("pickle", [], "is not a plain state dict: torch.load(weights_only=True) refused it"),
    ("int-key", [], "entry 5 has a key of type int, expected a tensor name (a string)"),
    ("scale_mlp_norm", [], "tensor 'blocks.0.mlp.norm.weight' comes from timm's scale_mlp_norm=True"),
    ("fine", [*TIMM_SET, "--set", "heads=3"],
     "heads = 3 does not divide the width 16 of tensor 'patch_embed.proj.weight'"),
    ("fine", [*TIMM_SET, "--set", "dim=32"],
     "dim=32 contradicts the timm checkpoint: tensor 'patch_embed.proj.weight'"),
    ("fine", ["--set", "heads=2"], "pass --set image_height=VALUE"),
]


@pytest.mark.parametrize(("change", "extra_args", "message"), BAD_TIMM,
                         ids=[f"{c}{'-' + a[-1] if a else ''}" for c, a, _ in BAD_TIMM])
def test_bad_timm_checkpoints_fail_in_one_line_without_output(change, extra_args, message, tmp_path,
                                                              capsys) -> None:
    source = bad_timm_file(tmp_path, change)
    args = extra_args or TIMM_SET
    out = tmp_path / "w.safetensors"
    code, _, err = run(["convert", "--from", "timm", "--in", str(source), *args, "--out", str(out)], capsys)
    assert_one_line_error(code, err, message, out)


def test_other_bad_inputs(tmp_path, capsys) -> None:
    out = tmp_path / "w.safetensors"
    tv = tv_checkpoint(tmp_path)
    cases = [
        (["--from", "caffe", "--in", str(tv)], "unknown checkpoint format 'caffe'"),
        (["--from", "torchvision", "--in", str(tv)], "does not record spec field 'heads': pass --set heads="),
        (["--from", "torchvision", "--in", str(tv), "--set", "heads=3"],
         "heads = 3 does not divide the width 16 of tensor 'conv_proj.weight'"),
        (["--from", "torchvision", "--in", str(tmp_path / "nope.pth"), "--set", "heads=2"], "does not exist"),
    ]
    from transformers import ViTConfig, ViTForImageClassification

    ViTForImageClassification(ViTConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                        intermediate_size=24, image_size=16, patch_size=8)
                              ).save_pretrained(tmp_path / "hf")
    capsys.readouterr()  # Transformers 5's save_pretrained draws a progress bar: not the command's output
    config = tmp_path / "hf" / "config.json"
    config.write_text(config.read_text().replace('"num_attention_heads": 2', '"num_attention_heads": 3'))
    cases.append((["--from", "hf", "--in", str(tmp_path / "hf")],
                  "config num_attention_heads = 3 does not divide the width 16 of config hidden_size"))
    for argv, message in cases:
        code, _, err = run(["convert", *argv, "--out", str(out)], capsys)
        assert_one_line_error(code, err, message, out)


def test_export_refuses_what_the_library_cannot_express(tmp_path, capsys) -> None:
    canonical, out = tmp_path / "w.safetensors", tmp_path / "tv.pth"
    assert run(["init", "--spec", "archive-torch", "--out", str(canonical)], capsys)[0] == 0
    code, _, err = run(["convert", "--to", "torchvision", "--in", str(canonical), "--out", str(out)], capsys)
    assert_one_line_error(
        code, err, "cannot export to torchvision VisionTransformer: spec field pooling='flatten'", out)


def test_export_for_a_timm_architecture_writes_its_layout_or_names_the_tensor(tmp_path, capsys) -> None:
    """`--arch`: AIMv2's registry model holds its SwiGLU split (fc1_g, fc1_x), where the plain export
    writes SwiGLUPacked's one fc1; the file loads strictly into `timm.create_model(arch)` at the
    spec's size (the weights equal, tests/test_checkpoints_families.py). A name timm does not know,
    an architecture whose tensors differ, a format without architectures, and --arch with --from
    are each one line, with nothing written."""
    import timm

    small = dict(img_size=16, patch_size=4, embed_dim=32, depth=1)
    source, canonical = tmp_path / "aimv2.pth", tmp_path / "w.safetensors"
    torch.save(timm.create_model("aimv2_large_patch14_224", pretrained=False, **small).state_dict(), source)
    config = tmp_path / "config.json"
    config.write_text('{"architecture": "aimv2_large_patch14_224", "model_args": {"img_size": 16, '
                      '"patch_size": 4, "embed_dim": 32, "depth": 1}}')
    code, _, err = run(["convert", "--from", "timm", "--in", str(source), "--config", str(config),
                        "--out", str(canonical)], capsys)
    assert code == 0, err
    out = tmp_path / "aimv2-registry.pth"
    code, printed, err = run(["convert", "--to", "timm", "--arch", "aimv2_large_patch14_224", "--in",
                              str(canonical), "--out", str(out)], capsys)
    assert code == 0, err
    assert "load with timm.create_model('aimv2_large_patch14_224', pretrained=False, " in printed
    back = torch.load(out, weights_only=True, map_location="cpu")
    assert set(back) == set(torch.load(source, weights_only=True, map_location="cpu"))
    assert back["blocks.0.mlp.fc1_g.weight"].shape == back["blocks.0.mlp.fc1_x.weight"].shape == (88, 32)
    refused = tmp_path / "refused.pth"
    for argv, message in (
        (["--to", "timm", "--arch", "no_such_vit"], "--arch 'no_such_vit': not a timm architecture"),
        (["--to", "timm", "--arch", "vit_intern300m_patch14_448"],  # its LayerScale, which AIMv2 lacks
         "--arch vit_intern300m_patch14_448: timm's model holds tensor 'blocks.0.ls1.gamma' as (32,), the "
         "spec's export as nothing"),
        (["--to", "hf", "--arch", "aimv2_large_patch14_224"], "the hf format names no architectures"),
        (["--from", "timm", "--arch", "aimv2_large_patch14_224"], "--arch is not read with --from"),
    ):
        target = refused.with_suffix(".safetensors") if "--from" in argv else refused
        code, _, err = run(["convert", *argv, "--in", str(source if "--from" in argv else canonical),
                            "--out", str(target if argv[1] != "hf" else tmp_path / "hf")], capsys)
        assert_one_line_error(code, err, message, target if argv[1] != "hf" else tmp_path / "hf")


def assert_one_line_error(code: int, err: str, message: str, out: Path) -> None:
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert message in lines[0], lines[0]
    assert not out.exists()
    assert not [p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}")]  # no temp file left


def test_timm_config_json_states_what_the_state_dict_cannot(tmp_path, capsys) -> None:
    source, config = tmp_path / "timm.pth", tmp_path / "config.json"
    torch.save(timm_model().state_dict(), source)
    config.write_text('{"architecture": "vit_tiny_custom", "num_classes": 3, "global_pool": "avg", '
                      '"model_args": {"num_heads": 2, "img_size": [16, 24]}}')
    with_config, with_set = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    assert run(["convert", "--from", "timm", "--in", str(source), "--config", str(config),
                "--out", str(with_config)], capsys)[0] == 0
    assert run(["convert", "--from", "timm", "--in", str(source), *TIMM_SET, "--out", str(with_set)],
               capsys)[0] == 0
    assert load_weights(with_config).spec == load_weights(with_set).spec
    config.write_text('{"global_pool": "avg", "model_args": {"num_heads": 2, "img_size": [16, 25]}}')
    code, _, err = run(["convert", "--from", "timm", "--in", str(source), "--config", str(config),
                        "--out", str(tmp_path / "c.safetensors")], capsys)
    assert code == 0, err  # 25 columns of 4-wide patches drop one: still 6 columns, the same table
    config.write_text('{"global_pool": "avg", "model_args": {"num_heads": 2, "img_size": [16, 32]}}')
    code, _, err = run(["convert", "--from", "timm", "--in", str(source), "--config", str(config),
                        "--out", str(tmp_path / "d.safetensors")], capsys)
    assert_one_line_error(code, err, "tensor 'pos_embed' (12 rows) does not fit image 16x32",
                          tmp_path / "d.safetensors")


# A spec each file-writing library exports (torchvision and vit_jax need a class row, big_vision none;
# big_vision and vit_jax flax's tanh GELU): so an --out refusal below is the suffix's, never the spec's.
EXPORTABLE = ["--spec", "quadrant", "--set", "channels=3", "--set", "layer_norm_eps=1e-6"]
JAX = ["--set", "activation=gelu_tanh"]
TORCH_TYPES = "a .safetensors or .pt or .pth or .bin or .ckpt"


@pytest.mark.parametrize(("argv", "spec", "expected"), [
    # timm's load_checkpoint hands an .npz / .npy to load_pretrained as a big_vision tree
    (["--to", "timm"], [], f"{TORCH_TYPES} file (a timm checkpoint"),
    (["--to", "timm", "--arch", "vit_tiny_patch16_224"], [], f"{TORCH_TYPES} file (a timm checkpoint"),
    (["--to", "torchvision"], [], f"{TORCH_TYPES} file (a torchvision checkpoint"),
    (["--to", "big_vision"], [*JAX, "--set", "pos_embed_class_row=false"], "a .npz file (a big_vision "),
    (["--to", "vit_jax"], JAX, "a .npz file (a vit_jax checkpoint"),
], ids=["timm", "timm-arch", "torchvision", "big_vision", "vit_jax"])
def test_export_refuses_a_file_type_its_library_does_not_load(argv: list[str], spec: list[str], expected: str,
                                                              tmp_path: Path, capsys) -> None:
    """`--out` names a file type the library's own loader reads, or the export is one line naming
    the option, the value and the types expected, with nothing written: a timm state dict in an .npz
    is a file timm itself reads as a big_vision tree, a big_vision tree in a torch file one np.load
    never opens. The types each library does load are written as before."""
    canonical = tmp_path / "w.safetensors"
    assert run(["init", *EXPORTABLE, *spec, "--out", str(canonical)], capsys)[0] == 0
    wrong = {"timm": ["x.npz", "x.npy"], "torchvision": ["x.npz"], "big_vision": ["x.safetensors", "x.pth"],
             "vit_jax": ["x.pth", "x.safetensors"]}[argv[1]]
    for name in wrong:
        out = tmp_path / name
        code, _, err = run(["convert", *argv, "--in", str(canonical), "--out", str(out)], capsys)
        assert_one_line_error(code, err, f"--out {str(out)!r}: expected {expected}", out)
    if "--arch" in argv:  # the registry's own model and layout: its writing is tested above
        return
    for name in {"timm": ["x.bin"], "torchvision": ["x.safetensors", "x.pth"], "big_vision": ["x.NPZ"],
                 "vit_jax": ["x.npz"]}[argv[1]]:
        code, _, err = run(["convert", *argv, "--in", str(canonical), "--out", str(tmp_path / name)], capsys)
        assert code == 0 and (tmp_path / name).is_file(), err
