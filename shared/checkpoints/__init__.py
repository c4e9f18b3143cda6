"""Third-party ViT checkpoints <-> the canonical format (shared/core/weights.py), one plug-in
file per library in `libraries/`: torchvision, timm, Transformers (hf), big_vision and keras-hub.
Every conversion goes through the canonical tensors, so any format converts to any other (and to
every port).

A plug-in is everything portbench knows of one library, and nothing outside it names the
library's keys (tests/test_checkpoints_plugins.py holds that). Its interface:

- `ORDER`, `FORMATS` ({format name: its line in `convert --help`}) and `WRITES_FOLDER`: literals,
  read here from the source without importing it (`formats_in`), so adding a library is adding
  its file;
- its config keys as data (`decoding.Key` rows: type, bounds, the spec field each sets) and its
  names as data (a `shared.core.mapping` table: `table(fmt, spec)`), each read in both directions;
- `read(path, config)` -> (tensors, config, source): the checkpoint and nothing beyond it
  (`tensor_files.py`); `normalise` (optional: its own spellings to its table's), then
  `refuse_unsupported` and `infer` (the spec the tensors and config state, with the library's
  conventions printed as such: `common.Inference`);
- `check_exportable(fmt, spec)` (what the library cannot build, refused by field), `finish_export`
  (optional) and `write(fmt, spec, raw, out, force)`; `write_registry(arch, spec, raw, out, force)`
  (optional): the file the library's registry architecture `arch` loads, in its own layout
  (`convert --arch`); `packed_class(spec)` (optional): the class
  that takes a packed batch and computes `spec` whole, windows, merger and frames, where it has one;
- `LAYER_TERMS` (optional, a literal): fragments of the library's layer names, what it calls each
  layer and the spec setting its place alone cannot say (`layer_terms`), which name a user's layer
  that fits no tensor;
- `read_live(model)`: what a model of this library in memory states (`live.Reading`), or None;
- `inert_live(model)` and `output_live(model)` (optional): the tensors its forward computes for an
  output never compared, and the output compared where the logits picker would take another;
  `caller_live(model)` (optional): a module that calls it on a patch batch where its forward takes
  its library's own arguments, holding it as its `model` attribute (the model's layers are the
  caller's behind "model.", where `trace` captures them) and laying a captured layer's output out
  as the batch's tokens with `batch_tokens(path, value)` after a call;
- `build_model(spec, ...)` and `check_buildable(spec, ...)` (where the library builds models:
  the peers `compare.py peers` times, and what it refuses to build, by field).

Mapping code is NumPy only: torch is imported inside functions, only to read or write torch files
(`torch.load(weights_only=True)`), and h5py only to read or write keras-hub's `.weights.h5`.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from shared.core.literals import module_literals
from shared.errors import SpecError

if TYPE_CHECKING:  # the registry itself reads source text only: `convert --help` imports nothing more
    from shared.checkpoints.common import Raw
    from shared.checkpoints.live import Reading
    from shared.core.mapping import Plan, Table
    from shared.core.spec import ModelSpec
    from shared.core.weights import Tensors

LIBRARIES = Path(__file__).with_name("libraries")  # one plug-in module per checkpoint library


@dataclass(frozen=True)
class Format:
    """A checkpoint format as its library's plug-in declares it (`ORDER`, `FORMATS`,
    `WRITES_FOLDER`: literals, read here without importing the plug-in)."""

    name: str
    module: str  # the plug-in, under shared.checkpoints.libraries
    description: str  # its line in `convert --help`
    writes_folder: bool  # save_pretrained / save_to_preset: a new folder, never a file
    order: int


def formats_in(folder: Path) -> dict[str, Format]:
    """Every plug-in's formats in `folder`, in the plug-ins' `ORDER`: adding a library is adding
    its file there."""
    found: list[Format] = []
    for plugin in pkgutil.iter_modules([str(folder)]):
        facts = module_literals(folder / f"{plugin.name}.py", ("ORDER", "FORMATS", "WRITES_FOLDER"))
        for name, description in dict(facts["FORMATS"]).items():  # type: ignore[call-overload]
            found.append(Format(name, plugin.name, description, bool(facts.get("WRITES_FOLDER", False)),
                                int(facts["ORDER"])))  # type: ignore[call-overload]
    return {f.name: f for f in sorted(found, key=lambda f: f.order)}


FORMATS: dict[str, Format] = formats_in(LIBRARIES)
Term = tuple[str, str, str]  # a fragment of a layer's name, what its library calls it, the spec setting


@cache
def layer_terms() -> tuple[Term, ...]:
    """Every plug-in's `LAYER_TERMS` (optional), in format order, read from its source as `FORMATS` is:
    how each library names its layers, for naming a user's layer that fits no tensor."""
    modules = dict.fromkeys(f.module for f in FORMATS.values())
    declared = (module_literals(LIBRARIES / f"{module}.py", ("LAYER_TERMS",)) for module in modules)
    return tuple(term for found in declared for term in found.get("LAYER_TERMS", ()))  # type: ignore[attr-defined]


def format_module(name: str) -> ModuleType:
    """The plug-in of format `name`."""
    if name not in FORMATS:
        raise SpecError(f"unknown checkpoint format {name!r}; expected one of: {', '.join(FORMATS)}")
    return importlib.import_module(f"{__name__}.libraries.{FORMATS[name].module}")


def plugins() -> list[ModuleType]:
    """Every library's plug-in, each once, in format order."""
    modules = dict.fromkeys(f.module for f in FORMATS.values())
    return [importlib.import_module(f"{__name__}.libraries.{module}") for module in modules]


def library_reading(model: Any) -> Reading | None:
    """What the first library whose plug-in recognises `model` (its `read_live`) says about it;
    None for a model no known library built."""
    for plugin in plugins():
        found = plugin.read_live(model) if hasattr(plugin, "read_live") else None
        if found is not None:
            return found
    return None


def model_tables(model: Any, spec: ModelSpec) -> list[Table]:
    """The tables a built model's library names its tensors by beyond its checkpoint format's (a
    Transformers 5 model's own names): each plug-in's `live_tables`, in format order. A user's
    model is bound by them in its worker (shared/your_model/evaluate.py's `conventions`)."""
    return [table for plugin in plugins() if hasattr(plugin, "live_tables")
            for table in plugin.live_tables(model, spec)]


def model_inert(model: Any) -> dict[str, str]:
    """The tensors a built model computes for an output its logits never read (a Transformers
    classifier's unused pooler), each with why: each plug-in's `inert_live`. Binding sets them aside."""
    return {name: why for plugin in plugins() if hasattr(plugin, "inert_live")
            for name, why in plugin.inert_live(model).items()}


def model_output(model: Any) -> str | None:
    """The output of a built model that is compared when the user names none, where its library
    says the logits picker would take another (ViTModel's pooler_output): a plug-in's `output_live`."""
    return next((name for plugin in plugins() if hasattr(plugin, "output_live")
                 if (name := plugin.output_live(model)) is not None), None)


def model_caller(model: Any) -> Any | None:
    """What runs a built model on a naflex or packed batch's (patches, valid, grids) where its forward
    takes its library's own arguments (a Qwen tower's flat patches and grid_thw), returning a row per
    image: a plug-in's `caller_live`; None where the model takes the batch as it is."""
    return next((caller for plugin in plugins() if hasattr(plugin, "caller_live")
                 if (caller := plugin.caller_live(model)) is not None), None)


def plan(fmt: str, spec: ModelSpec) -> Plan:
    """The format's table bound to `spec`: both directions of its mapping."""
    return format_module(fmt).table(fmt, spec).bind(spec.derived.tensor_shapes)


@dataclass
class Converted:
    spec: ModelSpec
    tensors: Tensors
    notes: list[str] = field(default_factory=list)


def import_checkpoint(fmt: str, path: str | Path, config: str | Path | None = None,
                      base: ModelSpec | None = None, overrides: list[str] | None = None) -> Converted:
    """Read a third-party checkpoint, infer its spec, and map it to canonical tensors."""
    from shared.checkpoints.common import parse_given

    module = format_module(fmt)
    raw, config_data, source = module.read(Path(path), None if config is None else Path(config))
    return import_tensors(fmt, raw, config_data, parse_given(base, overrides), source)


def import_tensors(fmt: str, raw: Raw, config: dict[str, Any] | None, given: dict[str, Any],
                   source: str = "(in memory)") -> Converted:
    from shared.checkpoints.common import resolve_spec
    from shared.core.weights import check_tensors

    module = format_module(fmt)
    if hasattr(module, "normalise"):  # e.g. strip `params/`, unstack a scanned encoder, 5.x names
        raw = module.normalise(raw, source, config)
    module.refuse_unsupported(fmt, source, raw)
    inference = module.infer(fmt, raw, config, given)
    spec = resolve_spec(inference, given, name=f"{fmt}-import")
    table = module.table(fmt, spec)  # its inert tensors take no part in the function: not converted
    raw = {name: value for name, value in raw.items() if name not in table.inert}
    tensors = table.bind(spec.derived.tensor_shapes).from_native(raw, f"{fmt} checkpoint {source}")
    check_tensors(spec, tensors, source=f"{fmt} checkpoint {source}")
    applied = [f"{name}={value!r} ({why})" for name, (value, why) in inference.conventions.items()
               if name not in given]
    overridden = [f"{name}={given[name]!r} given, instead of {value!r} ({why})"
                  for name, (value, why) in inference.conventions.items()
                  if name in given and given[name] != value]
    notes = ([f"library conventions applied: {', '.join(applied)}"] if applied else []) + [
        f"convention overridden: {text}" for text in overridden] + inference.notes
    return Converted(spec, tensors, notes)


def packed_class(module: ModuleType, spec: ModelSpec) -> str | None:
    """The plug-in's class that takes a packed batch and computes `spec` whole, or None."""
    return module.packed_class(spec) if hasattr(module, "packed_class") else None


def export_tensors(fmt: str, spec: ModelSpec, tensors: Tensors) -> Raw:
    """Canonical tensors -> the library's state dict / tree (refusing what it cannot express)."""
    from shared.core.weights import check_tensors

    module = format_module(fmt)
    check_tensors(spec, tensors)
    if packed_class(module, spec) is None:  # what no one-image model written here has
        for name, none in (("window_size", 0), ("merge_size", 1), ("temporal_patch_size", 1)):
            if getattr(spec, name) != none:
                raise SpecError(f"spec field {name!r} = {getattr(spec, name)}: expected {none} for an export "
                                f"to {fmt} (the library model written here attends over the whole image with "
                                "a 2-D patch and has no patch merger; only Qwen's towers are written with "
                                "them, to hf)")
    module.check_exportable(fmt, spec)
    raw = plan(fmt, spec).to_native(tensors)
    if hasattr(module, "finish_export"):  # e.g. drop a bias the library does not have, if zero
        raw = module.finish_export(fmt, spec, raw)
    return raw


def export_checkpoint(fmt: str, spec: ModelSpec, tensors: Tensors, out: str | Path,
                      force: bool = False, arch: str | None = None) -> list[str]:
    """Write the library's checkpoint (exclusively unless `force`; a folder output is always new),
    for the library's registry architecture `arch` where one is named; returns notes (what to
    build to load it)."""
    module = format_module(fmt)
    if arch is not None and not hasattr(module, "write_registry"):
        with_arch = [name for name in FORMATS if hasattr(format_module(name), "write_registry")]
        raise SpecError(f"--arch {arch!r}: the {fmt} format names no architectures (--arch applies to "
                        f"--to {', '.join(with_arch) or 'none'})")
    raw = export_tensors(fmt, spec, tensors)
    notes = module.write(fmt, spec, raw, Path(out), force) if arch is None else \
        module.write_registry(arch, spec, raw, Path(out), force)
    if spec.batching != "fixed" and packed_class(module, spec) is None:  # not the library's packing class
        notes.append(f"batching {spec.batching!r}: written as the library's model of one image at a time, "
                     "which computes each image as the padded or packed batch does; call it on images, not "
                     "patches")
    return notes
