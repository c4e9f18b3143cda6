"""Third-party models built by torchvision, timm and transformers (random weights, small
configs): their state dicts import to canonical tensors on which the reference and the torch,
Keras and Flax ports reproduce the library's own logits; canonical weights export back into the
library's model (load_state_dict strict) with the same logits; import(export(x)) is bit-exact."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

import ports
from shared.checkpoints import export_checkpoint, export_tensors, import_checkpoint
from shared.checkpoints.tensor_files import read_tensors
from shared.core import reference
from shared.core.weights import init_weights
from tests.checkpoints_support import (
    ATOL,
    assert_ports_match,
    assert_same_tensors,
    images_for,
    library_logits,
    load_exported_hf,
    nchw,
    perturbed,
)

os.environ.setdefault("USE_TF", "0")
os.environ.setdefault("USE_FLAX", "0")


def torchvision_model(**kwargs: object) -> torch.nn.Module:
    from torchvision.models.vision_transformer import VisionTransformer

    return VisionTransformer(**kwargs)


def timm_model(**kwargs: object) -> torch.nn.Module:
    from timm.models.vision_transformer import VisionTransformer

    return VisionTransformer(**kwargs)


def hf_model(**kwargs: object) -> torch.nn.Module:
    from transformers import ViTConfig, ViTForImageClassification

    return ViTForImageClassification(ViTConfig(**kwargs))


def hf_dinov2_model(**kwargs: object) -> torch.nn.Module:
    """Transformers' DINOv2: with registers when the config asks for some."""
    from transformers import Dinov2Config, Dinov2Model, Dinov2WithRegistersConfig, Dinov2WithRegistersModel

    if "num_register_tokens" in kwargs:
        return Dinov2WithRegistersModel(Dinov2WithRegistersConfig(**kwargs))
    return Dinov2Model(Dinov2Config(**kwargs))


# (id, format, builder, kwargs, --set values the state dict cannot tell). Every case runs the
# reference and the torch port; the first case of each library (marked in ALL_PORTS) also runs
# the Keras and Flax ports: they are tested against the reference over many specs elsewhere,
# here they show that the library's logits carry through to every framework, and each new spec
# costs Flax ~10 s of per-op compilation on this machine.
ALL_PORTS = {"torchvision-square", "timm-avg-fcnorm-noqkvbias-nocls", "hf-tanh-noqkvbias-1channel"}
CASES = [
    ("torchvision-square", "torchvision", torchvision_model,
     dict(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=16, mlp_dim=32,
          num_classes=5), ["heads=2"]),
    ("torchvision-4heads", "torchvision", torchvision_model,
     dict(image_size=28, patch_size=7, num_layers=2, num_heads=4, hidden_dim=32, mlp_dim=40,
          num_classes=3), ["heads=4"]),
    ("timm-avg-fcnorm-noqkvbias-nocls", "timm", timm_model,
     dict(img_size=(24, 32), patch_size=(8, 4), in_chans=2, embed_dim=16, depth=2, num_heads=2,
          num_classes=5, class_token=False, global_pool="avg", fc_norm=True, qkv_bias=False),
     ["heads=2", "image_height=24", "image_width=32"]),
    ("timm-token", "timm", timm_model,
     dict(img_size=32, patch_size=8, embed_dim=24, depth=2, num_heads=3, num_classes=4),
     ["heads=3", "pooling=cls"]),
    ("timm-noembedclass-avg-nofinalnorm", "timm", timm_model,
     dict(img_size=24, patch_size=6, in_chans=1, embed_dim=16, depth=2, num_heads=4, num_classes=3,
          no_embed_class=True, global_pool="avg", fc_norm=False, final_norm=False),
     ["heads=4", "pooling=mean"]),
    ("timm-remainder-noposembed", "timm", timm_model,
     dict(img_size=(20, 30), patch_size=6, embed_dim=16, depth=2, num_heads=2, num_classes=3,
          pos_embed="none"), ["heads=2", "pooling=cls", "image_height=20", "image_width=30"]),
    ("hf-rect-eps1e-5", "hf", hf_model,
     dict(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
          image_size=(24, 32), patch_size=8, num_labels=5, layer_norm_eps=1e-5), []),
    ("hf-tanh-noqkvbias-1channel", "hf", hf_model,
     dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48,
          image_size=30, patch_size=(6, 5), num_channels=1, num_labels=3, layer_norm_eps=1e-12,
          hidden_act="gelu_pytorch_tanh", qkv_bias=False), []),
]


def save_library_checkpoint(fmt: str, model: torch.nn.Module, tmp_path) -> tuple[str, str | None]:
    """Write the model as its library does: a torch state dict, or save_pretrained for HF."""
    if fmt == "hf":
        model.save_pretrained(tmp_path / "hf")
        return str(tmp_path / "hf"), None
    path = tmp_path / f"{fmt}.pth"
    torch.save(model.state_dict(), path)
    return str(path), None


@pytest.mark.parametrize(("case", "fmt", "build", "kwargs", "given"), CASES, ids=[c[0] for c in CASES])
def test_import_reproduces_library_logits(case, fmt, build, kwargs, given, tmp_path) -> None:
    torch.manual_seed(0)
    model = perturbed(build(**kwargs), seed=1)
    path, config = save_library_checkpoint(fmt, model, tmp_path)
    converted = import_checkpoint(fmt, path, config, overrides=given)
    images = images_for(converted.spec)
    expected = library_logits(model, images)
    ports = ("torch", "keras", "flax") if case in ALL_PORTS else ("torch",)
    assert_ports_match(converted.spec, converted.tensors, images, expected, ports)
    # And back: the canonical tensors export to exactly the checkpoint the library wrote (Transformers
    # 5 writes 4.x's names, not the ones it holds the model by: the file is compared).
    exported = export_tensors(fmt, converted.spec, converted.tensors)
    written = read_tensors(Path(path) / "model.safetensors") if fmt == "hf" else \
        {k: v.numpy() for k, v in model.state_dict().items()}
    assert_same_tensors(exported, written)


@pytest.mark.parametrize(("fmt", "build", "kwargs", "given"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_export_loads_into_library_with_same_logits(fmt, build, kwargs, given, tmp_path) -> None:
    torch.manual_seed(0)
    model = build(**kwargs).eval()
    path, config = save_library_checkpoint(fmt, model, tmp_path)
    spec = import_checkpoint(fmt, path, config, overrides=given).spec
    tensors = init_weights(spec, seed=5)  # canonical weights the library has never seen
    out = tmp_path / ("exported" if fmt == "hf" else "exported.safetensors")
    if fmt == "hf":
        model = load_exported_hf(spec, tensors, out)  # an empty load report
    else:
        from safetensors.torch import load_file

        export_checkpoint(fmt, spec, tensors, out)
        model.load_state_dict(load_file(str(out)), strict=True)
    images = images_for(spec, seed=3)
    diff = np.abs(library_logits(model, images) - reference.forward(spec, tensors, images)).max()
    assert diff <= ATOL
    again = import_checkpoint(fmt, str(out), None, overrides=given)
    assert again.spec == spec
    assert_same_tensors(again.tensors, tensors)


# (id, format, builder, kwargs at the table's resolution, --set values with another image size, the
# method the library's own resampling pins). timm: dynamic_img_size resamples the table in forward
# by resample_abs_pos_embed's default (antialiased bicubic); Transformers' ViT:
# interpolate_pos_encoding=True; its DINOv2 classes resample in every forward at another size, each by
# its own method (with registers: antialiased). Each asks for a non-square grid that shrinks one axis
# and grows the other.
HF_DINOV2_TINY = dict(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, mlp_ratio=2, image_size=16,
                      patch_size=4)
RESOLUTION_CASES = [
    ("timm-dynamic-img-size", "timm", timm_model,
     dict(img_size=16, patch_size=4, embed_dim=16, depth=1, num_heads=2, num_classes=3, reg_tokens=1,
          dynamic_img_size=True),
     ["heads=2", "pooling=cls", "image_height=20", "image_width=12"], "timm_bicubic_antialias"),
    ("hf-interpolate-pos-encoding", "hf", hf_model,
     dict(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, image_size=16,
          patch_size=4, num_labels=3),
     ["image_height=12", "image_width=24"], "hf_bicubic"),
    ("hf-dinov2", "hf", hf_dinov2_model,
     dict(HF_DINOV2_TINY), ["image_height=24", "image_width=8"], "hf_bicubic"),
    ("hf-dinov2-registers", "hf", hf_dinov2_model,
     dict(HF_DINOV2_TINY, num_register_tokens=2), ["image_height=8", "image_width=20"],
     "timm_bicubic_antialias"),
]


@pytest.mark.parametrize(("fmt", "build", "kwargs", "given", "method"), [c[1:] for c in RESOLUTION_CASES],
                         ids=[c[0] for c in RESOLUTION_CASES])
def test_convert_at_another_resolution_reproduces_the_library_there(fmt, build, kwargs, given, method,
                                                                     tmp_path) -> None:
    """The canonical file keeps the checkpoint's 4 x 4 table as the source grid and names the
    library's own method (applied as a printed convention; --set pos_resample overrides it); the
    reference and every port that offers the method (with its own framework's resize) then compute
    the library's logits at the new size."""
    torch.manual_seed(0)
    model = perturbed(build(**kwargs), seed=1)
    path, config = save_library_checkpoint(fmt, model, tmp_path)
    converted = import_checkpoint(fmt, path, config, overrides=given)
    spec = converted.spec
    assert (spec.pos_grid_height, spec.pos_grid_width, spec.pos_resample) == (4, 4, method)
    assert any(f"pos_resample={method!r}" in note for note in converted.notes)
    images = images_for(spec)
    if type(model).__name__ == "ViTForImageClassification":  # the one that resamples on request only
        with torch.no_grad():
            expected = model(pixel_values=nchw(images), interpolate_pos_encoding=True).logits.numpy()
    else:
        expected = library_logits(model, images)
    offering = tuple(fw for fw in ports.NATIVE if ports.resample_refusal(fw, spec) is None)
    assert "torch" in offering and (method != "timm_bicubic_antialias" or len(offering) == 4), offering
    assert_ports_match(spec, converted.tensors, images, expected, offering)
    overridden = import_checkpoint(fmt, path, config, overrides=[*given, "pos_resample=bilinear"])
    assert overridden.spec == spec.replace(pos_resample="bilinear")
