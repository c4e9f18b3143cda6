"""keras-hub (Keras 3's model library) presets: a `save_to_preset` directory (config.json +
model.weights.h5, and task.json + task.weights.h5 for a task such as ViTImageClassifier), or a
`.weights.h5` file with `--config` (a config.json or task.json).

Names are Keras' variable paths, `<layer path>/<variable name>` (`v.path`: what a Keras model
names its variables in memory, so one table binds a preset and a live keras-hub object, as
`verify --model` does). The h5 file stores each layer's variables by index under the attribute
path Keras saves it at (`layers/vi_t_encoder/encoder_layers/vi_t_encoder_block/layer_norm_1/vars/0`),
with the layer's name in each `vars` group's `name` attribute: the layer path is read from those
names (a nested functional model, such as a task's backbone, adds none, as in `v.path`), and the
variable's name from its index (`keras_hub_models.VARIABLE_NAMES`). The h5 is read with h5py as
plain arrays; a dataset the families do not name is refused in one line naming it. The
optimizer's state (`optimizer/...`) is training state, not part of the function: it is not read.

The config's class picks the family (`keras_hub_models.FAMILIES`); a field the config omits
takes the class's keyword default, and each default applied is printed.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np

from shared.checkpoints.common import Inference, Raw, read_config, require, require_plain_blocks
from shared.checkpoints.keras_hub_models import FAMILIES, VARIABLE_NAMES, Family
from shared.core.files import open_user_file, write_folder
from shared.core.mapping import Table
from shared.core.memory import check_bytes_fit
from shared.core.spec import ModelSpec
from shared.errors import SpecError, WeightsError

PRESET_FILES = (("task.json", "task.weights.h5"), ("config.json", "model.weights.h5"))
KERAS_HUB_VERSION = "0.32.0"  # the version whose classes the families describe


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
    raw: Raw = {}
    for file in weights:
        for name, value in read_h5(file).items():
            if name in raw:
                raise WeightsError(f"keras_hub checkpoint {str(path)!r}: variable {name!r} is in two files")
            raw[name] = value
    return raw, read_config(config), repr(str(path))


def read_h5(path: Path) -> Raw:
    """A Keras `.weights.h5` as {variable path: float32 array}; nothing is unpickled."""
    import h5py

    where = f"keras_hub weights {str(path)!r}"
    with open_user_file(path, where, WeightsError) as handle:
        try:
            with h5py.File(handle, "r") as h5:
                found = _datasets(h5)
                check_bytes_fit(sum(d.nbytes for _, d in found), f"{where} declares", WeightsError)
                return {name: _as_float32(where, name, data) for name, data in found}
        except OSError as exc:
            raise WeightsError(f"{where} is not a readable HDF5 file ({str(exc).splitlines()[0]})") from None


def _datasets(h5: Any) -> list[tuple[str, Any]]:
    import h5py

    out: list[tuple[str, Any]] = []

    def visit(group: Any, layer_path: list[str]) -> None:
        for key, node in group.items():
            if key == "optimizer" and group.name == "/":
                continue
            if isinstance(node, h5py.Dataset):
                raise WeightsError(f"keras_hub weights: dataset {node.name!r} is outside a 'vars' group")
            if key == "vars":
                _variables(node, layer_path, out)
                continue
            own = node.get("vars")
            named = own is not None and "layers" not in node  # a nested functional model adds no name
            visit(node, [*layer_path, _layer_name(own)] if named else layer_path)

    visit(h5, [])
    return out


def _layer_name(vars_group: Any) -> str:
    name = vars_group.attrs.get("name")
    if not isinstance(name, (str, bytes)):
        raise WeightsError(f"keras_hub weights: group {vars_group.name!r} has no layer name attribute")
    return name.decode() if isinstance(name, bytes) else name


def _variables(group: Any, layer_path: list[str], out: list[tuple[str, Any]]) -> None:
    if not group.keys():
        return
    layer = layer_path[-1] if layer_path else ""
    names = VARIABLE_NAMES.get(layer, ())
    for key in sorted(group.keys(), key=lambda k: int(k) if k.isdigit() else -1):
        index = int(key) if key.isdigit() else -1
        if not 0 <= index < len(names):
            raise WeightsError(f"keras_hub weights: dataset {group[key].name!r} (layer "
                               f"{'/'.join(layer_path)!r}, variable {key}) belongs to no layer the keras_hub "
                               "families name")
        out.append(("/".join([*layer_path, names[index]]), group[key]))


def _as_float32(where: str, name: str, data: Any) -> np.ndarray:
    if data.dtype.kind != "f":
        raise WeightsError(f"{where}: variable {name!r} has dtype {data.dtype}, expected floating point")
    value = np.asarray(data[()], dtype=np.float32)
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
    inner, task = config["config"], None
    if isinstance(inner.get("backbone"), dict):
        task, inner = inner, inner["backbone"].get("config")
        config = task["backbone"]
    name = config.get("class_name")
    family = FAMILIES.get(str(name))
    if family is None or not isinstance(inner, dict):
        raise SpecError(f"keras_hub config class_name = {name!r}: expected one of {', '.join(FAMILIES)}")
    return family, inner, task


def infer(fmt: str, raw: Raw, config: dict[str, Any] | None, given: dict[str, Any]) -> Inference:
    family, backbone, task = split_config(config)
    inf = Inference(fmt)
    family.infer(inf, raw, backbone, task)
    return inf


def family_for(s: ModelSpec) -> Family:
    """The keras-hub class that computes `s` (ViT: the only family written so far)."""
    return FAMILIES["ViTBackbone"]


def table(fmt: str, s: ModelSpec) -> Table:
    return Table(family_for(s).rows(s), fmt)


def check_exportable(fmt: str, s: ModelSpec) -> None:
    family = family_for(s)
    target = f"keras-hub {family.task if s.num_classes else family.backbone}"
    require_plain_blocks(target, s)
    for name in ("patch_norm_in", "patch_norm_out", "distill_token", "registers", "norm_before_blocks",
                 "qk_norm", "layer_scale"):
        require(not getattr(s, name), target, name, getattr(s, name), "none (it has no such feature)")
    require(s.mlp == "standard", target, "mlp", s.mlp, "standard")
    family.check(target, s)


def write(fmt: str, s: ModelSpec, raw: Raw, out: Path, force: bool = False) -> list[str]:
    """A save_to_preset-style directory, published whole (a new folder: never replaced)."""
    if out.exists() and not out.is_dir():
        raise WeightsError(f"output {str(out)!r}: keras_hub export writes a preset directory, and a file "
                           "is in the way")
    family = family_for(s)
    backbone, task = family.configs(s)
    head = {k: v for k, v in raw.items() if k.split("/")[0] in family.task_layers}
    files = {"config.json": _json(backbone),
             "model.weights.h5": encode_h5({k: v for k, v in raw.items() if k not in head}, family),
             "metadata.json": _json({"keras_hub_version": KERAS_HUB_VERSION,
                                     "parameter_count": s.derived.params,
                                     "tasks": ["ImageClassifier"] if task else []})}
    if task is not None:
        files |= {"task.json": _json(task), "task.weights.h5": encode_h5(head, family)}
    write_folder(out, files)
    cls = family.task if task is not None else family.backbone
    return [f"load with keras_hub.models.{cls}.from_preset({str(out)!r})"]


def encode_h5(raw: Raw, family: Family) -> bytes:
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
            names = VARIABLE_NAMES.get(layers[-1], ())
            if variable not in names:
                raise WeightsError(f"keras_hub export: variable {name!r} has no index in its layer")
            h5.create_dataset(f"{path}/vars/{names.index(variable)}",
                              data=np.ascontiguousarray(value, dtype=np.float32))
    return buffer.getvalue()


def _json(value: dict[str, Any]) -> bytes:
    return (json.dumps(value, indent=2) + "\n").encode()
