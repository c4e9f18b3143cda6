"""Mistakes that used to be accepted silently: a key given twice in a spec, recipe, config or
results document (the last one won), and `--map` rows that name no parameter of the model or
have a shape the format does not define (they were ignored, and the verdict could be PASS).
Each is now refused in one line naming the key or the row."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.refusals import refused_promptly
from tests.results_docs import results_doc

SPEC = '"name": "q", "image_height": 8, "image_width": 8, "channels": 1, "patch_height": 4, ' \
       '"patch_width": 4, "dim": 8, "depth": 1, "heads": 2, "head_dim": 4, "mlp_dim": 16, "num_classes": 2'


@pytest.mark.parametrize("name, text, expect", [
    ("s.json", "{" + SPEC + ', "dim": 16}', "spec file 's.json' gives the key 'dim' twice"),
    ("s.json", '{"spec": {' + SPEC + ', "depth": 2}}', "spec file 's.json' gives the key 'depth' twice"),
    ("s.json", "{" + SPEC.replace('"name": "q"', '"name": "q", "name": "r"') + "}", "the key 'name' twice"),
    ("s.toml", 'name = "q"\ndim = 8\ndim = 16\n', "spec file 's.toml' is malformed TOML: the key 'dim' is "
                                                  "given twice (line 3)"),
    ("s.toml", "[spec]\ndim = 8\n[spec]\ndepth = 1\n", "Cannot declare ('spec',) twice"),
])
def test_a_spec_file_that_gives_a_key_twice_is_refused(tmp_path: Path, name: str, text: str,
                                                       expect: str) -> None:
    (tmp_path / name).write_text(text)
    refused_promptly(tmp_path, "spec", name, expect=expect)


def test_an_inline_spec_document_that_gives_a_key_twice_is_refused(tmp_path: Path) -> None:
    refused_promptly(tmp_path, "spec", "{" + SPEC + ', "heads": 4}',
                     expect="spec document gives the key 'heads' twice in one object")


def test_a_checkpoint_config_that_gives_a_key_twice_is_refused(tmp_path: Path) -> None:
    import numpy as np
    from safetensors.numpy import save_file

    save_file({"x": np.zeros(2, np.float32)}, str(tmp_path / "m.safetensors"))
    (tmp_path / "config.json").write_text('{"hidden_size": 8, "hidden_size": 16}')
    refused_promptly(tmp_path, "convert", "--from", "hf", "--in", "m.safetensors", "--config", "config.json",
                     "--out", "w.safetensors",
                     expect="config 'config.json' gives the key 'hidden_size' twice")


def test_a_results_file_that_gives_a_key_twice_is_refused(tmp_path: Path) -> None:
    text = json.dumps(results_doc()).replace('"spec_hash": "abc"', '"spec_hash": "abc", "spec_hash": "d"', 1)
    (tmp_path / "r.json").write_text(text)
    refused_promptly(tmp_path, "report", "r.json",
                     expect="results file 'r.json' gives the key 'spec_hash' twice")


# ---- --map rows --------------------------------------------------------------------------------
MODEL = "def build():\n    raise RuntimeError('never built: the map file is refused first')\n"
QUADRANT = ("verify", "--spec", "quadrant", "--model", "mine.py:build", "--map", "rules.toml")


@pytest.mark.parametrize("rows, expect", [
    ('"cls" = "no_such_tensor"', "row 'cls' = 'no_such_tensor' names no tensor of spec 'quadrant'"),
    ('"q{i}" = "blocks.{i}.attn.quer.kernel"', "row 'q{i}' = 'blocks.{i}.attn.quer.kernel' names no tensor"),
    ('"cls" = {name = "cls_token"}', "row 'cls' = {'name': 'cls_token'} must be \"canonical-name\" or"),
    ('"cls" = ["cls_token", "batch_token", "x"]', "row 'cls' = ['cls_token', 'batch_token', 'x'] must"),
    ('"cls" = []', "row 'cls' = [] must be"),
    ('"cls" = 3', "row 'cls' = 3 must be"),
    ('"my cls" = "cls_token"', "row 'my cls' = 'cls_token' must be"),
    ('"cls#1" = "cls_token"', "row 'cls#1' = 'cls_token' must be"),
    ('"cls" = ["cls_token", "rot90"]', "row 'cls' = ['cls_token', 'rot90']: layout 'rot90' is unknown"),
    ('"cls" = "cls_token"\n[map.nested]\n"x" = "cls_token"', "row 'nested' = {'x': 'cls_token'} must be"),
])
def test_a_map_row_of_another_shape_or_naming_no_tensor_is_refused(tmp_path: Path, rows: str,
                                                                   expect: str) -> None:
    (tmp_path / "mine.py").write_text(MODEL)
    (tmp_path / "rules.toml").write_text(f"[map]\n{rows}\n")
    refused_promptly(tmp_path, *QUADRANT, expect=f"map file 'rules.toml': {expect}")


@pytest.mark.parametrize("text, expect", [
    ('mapping = 1\n[map]\n"cls" = "cls_token"\n', "top-level key 'mapping' is not part of the format"),
    ('[[map]]\n"cls" = "cls_token"\n', "expected a [map] table"),
    ('[map]\n"cls" = "cls_token"\n"cls" = "pos_embed"\n', "the key '\"cls\"' is given twice (line 3)"),
])
def test_a_map_file_of_another_shape_is_refused(tmp_path: Path, text: str, expect: str) -> None:
    (tmp_path / "mine.py").write_text(MODEL)
    (tmp_path / "rules.toml").write_text(text)
    refused_promptly(tmp_path, *QUADRANT, expect=expect)


EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.mark.parametrize("row, expect", [
    ('"class_embeddin" = ["cls_token", "batch_token"]', "your model has no parameter 'class_embeddin'"),
    ('"blocks.{i}.attn.in_proj_weight" = ["blocks.{i}.attn.{p:query|key|value}.kernel", "heads_linear"]',
     "your model has no parameter 'blocks.0.attn.in_proj_weight' (2 of the 2 it names missing)"),
])
def test_a_map_row_naming_no_parameter_of_the_model_is_refused_not_ignored(tmp_path: Path, row: str,
                                                                           expect: str) -> None:
    """The example binds by structure on its own: before, a row naming nothing was dropped and
    the verdict was PASS."""
    (tmp_path / "rules.toml").write_text(f"[map]\n{row}\n")
    refused_promptly(tmp_path, "verify", "--spec", "mnist-vit-small", "--model",
                     f"{EXAMPLES / 'torch_mha_vit.py'}:MnistViT", "--map", "rules.toml", expect=expect,
                     seconds=120)
