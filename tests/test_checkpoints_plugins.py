"""One library, one file; one fact, one place (shared/checkpoints/__init__.py states the plug-in
interface). A library's config keys and its reading tables are declared in its plug-in and named
nowhere else in the product; the registry finds a plug-in by its file alone, and nothing in the
product imports a plug-in by name."""

from __future__ import annotations

import ast
import dataclasses
import re
import shutil
import typing
from pathlib import Path

import pytest

from shared.checkpoints import FORMATS, LIBRARIES, formats_in
from shared.core.presets import PRESETS, get_preset
from shared.core.spec import BIAS_FREE, ModelSpec

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = [path for path in [*(ROOT / "shared").rglob("*.py"), *(ROOT / "ports").rglob("*.py"),
                             *(ROOT / "experiments").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py"),
                             ROOT / "compare.py", ROOT / "portbench.py"] if LIBRARIES not in path.parents]
# Words a library table holds that are also other code's own words, each for the reason given.
SHARED_WORDS = {
    "layer_norm": "Keras' and Flax's LayerNorm layer name, which the structure binder reads",
    "attention_output": "Keras MultiHeadAttention's variable name, which the structure binder reads",
    "gelu_fast": "MLX's own nn.GELU(approx='fast') form (ports/mlx/user.py)",
    "attention_bias": "the divergence catalogue's entry of that name (shared/teaching/divergences.py), "
                      "also InternVLVisionConfig's key",
    "num_heads": "every framework's attention argument (Keras, Flax, MLX, torch), read by the ports",
    "num_kv_heads": "Flax nnx.MultiHeadAttention's grouped-query argument, which ports/flax/model.py passes",
    "num_attention_heads": "an attention module's attribute the torch structure reader reads "
                           "(ports/torch/user.py), whichever library built the module",
    "global_pool": "timm's default, read from its source by the catalogue's defaults reader "
                   "(ports/torch/defaults.py: the catalogue reports each library's default)",
    "rope_rotate_half": "timm's function of that name, whose source the rotary lesson shows",
    "rms_norm_eps": "the divergence catalogue's entry of that name (shared/teaching/divergences.py), "
                    "also Aimv2VisionConfig's key",
    "num_patches": "the spec's derived patch count (Derived.num_patches), also Siglip2VisionConfig's key",
}


def _spec_words() -> set[str]:
    """The spec's own words: its field names, its literal values (the projections `bias_free`
    names included) and the canonical tensor names' parts (portbench's names, which several
    libraries happen to share)."""
    words = {f.name for f in dataclasses.fields(ModelSpec)} | set(BIAS_FREE)
    for hint in typing.get_type_hints(ModelSpec).values():
        for arg in (hint, *typing.get_args(hint)):
            if typing.get_origin(arg) is typing.Literal:
                words |= {value for value in typing.get_args(arg) if isinstance(value, str)}
    for name in PRESETS:
        for tensor in get_preset(name).derived.tensor_shapes:
            words |= set(re.split(r"[./]", tensor))
    return words


def declared_keys(source: str) -> set[str]:
    """A plug-in's library keys: the first argument of each `Key(...)` row, every string key of
    its module-level tables and every string of its module-level tuples (UPPER_CASE assignments:
    the keys a class requires, the arguments it refuses), where they look like a config key
    (`snake_case` or `dotted.path`)."""
    keys: set[str] = set()
    for node in ast.parse(source).body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        if not any(isinstance(t, ast.Name) and t.id.isupper() for t in targets) or node.value is None:
            continue
        for sub in ast.walk(node.value):
            if isinstance(sub, (ast.Dict, ast.Tuple)):
                held = sub.keys if isinstance(sub, ast.Dict) else sub.elts
                keys |= {k.value for k in held if isinstance(k, ast.Constant) and isinstance(k.value, str)}
            elif isinstance(sub, ast.Call) and getattr(sub.func, "id", "") == "Key" and sub.args and \
                    isinstance(sub.args[0], ast.Constant):
                keys.add(sub.args[0].value)
    return {key for key in keys if re.fullmatch(r"[a-z][a-z0-9]*([_.][a-z0-9]+)+", key)}


def named_words(source: str) -> set[str]:
    """Every string constant and keyword argument's name in a source text."""
    words: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            words.add(node.value)
        elif isinstance(node, ast.keyword) and node.arg:
            words.add(node.arg)
    return words


def library_keys() -> dict[str, set[str]]:
    """Each plug-in's keys, less the spec's own words, the shared words above and the formats'
    names (the registry's keys, the one way to name a library)."""
    common = _spec_words() | set(SHARED_WORDS) | set(FORMATS) | {f.module for f in FORMATS.values()}
    return {path.stem: declared_keys(path.read_text()) - common for path in sorted(LIBRARIES.glob("*.py"))}


# A part of a plug-in that lives below it: timm's parameter-name table, which the torch port names
# its modules by and may import nothing above the core for (shared/core/timm_names.py).
PLUG_IN_PARTS = {"shared/core/timm_names.py": "timm"}


def misplaced(keys: dict[str, set[str]], files: dict[str, str]) -> list[str]:
    return [f"{name}: {library}'s {sorted(found)}" for name, source in files.items()
            for library, own in keys.items()
            if PLUG_IN_PARTS.get(name) != library and (found := named_words(source) & own)]


def test_a_library_key_is_named_only_in_its_plug_in() -> None:
    keys = library_keys()
    assert keys["hf"] >= {"hidden_size", "num_hidden_layers", "hidden_act", "intermediate_size"}
    assert keys["timm"] >= {"model_args.global_pool", "model_args.num_heads", "model_args.act_layer"}
    assert keys["keras_hub"] >= {"hidden_dim", "layer_norm_epsilon", "use_class_token"}
    files = {str(path.relative_to(ROOT)): path.read_text() for path in PRODUCT}
    assert misplaced(keys, files) == []


def test_a_planted_library_key_outside_its_plug_in_fails() -> None:
    planted = {"ports/public_models.py": "config = ViTConfig(hidden_act='gelu', hidden_size=64)",
               "shared/your_model/structure_parts.py": "TERMS = (('fc_norm', 'on the pooled vector'),)",
               "shared/core/timm_names.py": "final = 'fc_norm' if pooled else 'hidden_act'"}
    found = misplaced(library_keys(), planted)
    assert found == ["ports/public_models.py: hf's ['hidden_act', 'hidden_size']",
                     "shared/your_model/structure_parts.py: timm's ['fc_norm']",  # a layer's name too
                     "shared/core/timm_names.py: hf's ['hidden_act']"]  # timm's own part: timm's names only


def test_adding_a_library_is_adding_its_file(tmp_path: Path) -> None:
    """Moved out of a copy of the plug-in folder, torchvision's formats are gone from the registry;
    moved back, they are listed again, as they are today. Nothing else is touched."""
    folder = tmp_path / "libraries"
    shutil.copytree(LIBRARIES, folder)
    moved = (folder / "torchvision.py").rename(tmp_path / "torchvision.py")
    without = formats_in(folder)
    assert "torchvision" not in without and list(without) == [n for n in FORMATS if n != "torchvision"]
    moved.rename(folder / "torchvision.py")
    assert formats_in(folder) == FORMATS


def test_no_product_file_imports_a_plug_in_by_name() -> None:
    """The registry (`format_module`, `plugins`) is the one way in: a plug-in's name appears in no
    import outside shared/checkpoints/libraries."""
    found = []
    for path in PRODUCT:
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            found += [f"{path.relative_to(ROOT)}: {n}" for n in names if "checkpoints.libraries" in n]
    assert found == []


def test_a_plug_in_that_builds_models_says_what_it_cannot_build() -> None:
    """The peers ask `check_buildable` before `build_model` (shared/measure/peer_timing.py): a
    plug-in with one has the other."""
    from shared.checkpoints import plugins

    for plugin in plugins():
        assert hasattr(plugin, "build_model") == hasattr(plugin, "check_buildable"), plugin.__name__
