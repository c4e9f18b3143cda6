"""keras-hub (Keras 3's model library) presets: a `save_to_preset` directory (config.json +
model.weights.h5, and task.json + task.weights.h5 for a task such as ViTImageClassifier), or a
`.weights.h5` file with `--config` (a config.json or task.json).

The config's class picks the family (`FAMILIES`: ViT, DeiT, DINOv2, the SigLIP and CLIP image
towers); a field the config omits takes the class's keyword default, and each default applied
is printed.

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
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np

from shared.checkpoints.common import (
    LATER_FEATURES,
    Inference,
    Raw,
    read_config,
    require,
    require_plain_blocks,
)
from shared.checkpoints.keras_hub_dinov2 import DINOV2
from shared.checkpoints.keras_hub_models import Family, Variables
from shared.checkpoints.keras_hub_towers import CLIP, SIGLIP
from shared.checkpoints.keras_hub_vit import DEIT, VIT
from shared.core.files import write_folder
from shared.core.hdf5 import Dataset, Group, open_hdf5
from shared.core.mapping import Table
from shared.core.spec import ModelSpec
from shared.errors import SpecError, WeightsError

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
    backbone's config and the task's (None for a backbone alone)."""
    if not isinstance(config, dict) or not isinstance(config.get("config"), dict):
        raise SpecError("keras_hub config: expected a Keras serialised object ({'class_name': ..., "
                        "'config': {...}}), as save_to_preset writes config.json and task.json")
    outer_config, inner, task = config, config["config"], None
    if isinstance(inner.get("backbone"), dict):
        task, inner = inner, inner["backbone"].get("config")
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
    return family, inner, task


def infer(fmt: str, raw: Raw, config: dict[str, Any] | None, given: dict[str, Any]) -> Inference:
    family, backbone, task = split_config(config)
    inf = Inference(fmt)
    family.infer(inf, raw, backbone, task)
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
