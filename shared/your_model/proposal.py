"""The spec read from a built model object, in the model's own process: `propose_spec(model,
framework) -> Proposal`, each field with its source. Sources, first wins:

1. the configuration the known libraries attach (each library plug-in's `read_live`,
   shared/checkpoints/libraries/: a Transformers `config`, timm's and torchvision's attributes,
   keras-hub's `get_config()`);
2. the state dict, read by the matching checkpoint format's own `infer` (the same plug-ins):
   its facts (tensor names and shapes);
3. the layers' settings as the spec check reads them (`ports/<fw>/user.py` `layers()`,
   `proposal_layers.py`): LayerNorm eps, activation form, attention heads, head width
   and bias, norm placement, depth. What the layers compute with (eps, activation, heads, head
   width) also overrules a configuration that says otherwise, with a note naming both;
4. the structure, whatever the names (`proposal_structure.py`, with binding by structure's units
   and blocks): dim, channels and patch from the patch layer, depth, mlp_dim, biases, LayerScale,
   qk-norm, the norms by place, the classes, the tokens, and the image from the position table;
5. the library's conventions that `infer` applies (timm's eps 1e-6, ...);
6. dependent defaults: a field that follows from one read (no class token => no class row and
   no class token to pool).

A model no library reader recognises is read from the one child a reader recognises that holds
all its parameters (a timm model held as `self.net`: sources `timm: net.…`), else by the checkpoint
format whose names its parameters carry, accepted only when that format's table binds every
parameter on the spec it gives (a big_vision-style linen ViT), else from its layers alone
(`proposal_search.py`). Flax's fast LayerNorm variance, which no field states, is a note.

A field nothing reads keeps the spec default and is reported unread (source `default`), never
guessed; `Proposal.stated` refuses blocks read without their heads, naming `--set heads=N`, and
blocks with no attention and no MLP, which no ViT-style classifier has. For
`--model FILE.py:NAME` it runs in the worker (the `propose` job kind, jobs.py: the
user's file is imported there only), which `run.propose_user_spec` starts.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

from shared.checkpoints import format_module, library_reading, model_caller, model_inert
from shared.checkpoints.live import Fact, Reading
from shared.core.data_record import DataRecord
from shared.core.forward_io import PATCHES
from shared.core.inputs import probe_batch
from shared.core.spec import NORM_EPS_FIELDS, ModelSpec, norm_places
from shared.errors import PortbenchError, SpecError, WeightsError
from shared.runtime.worker import one_line
from shared.your_model.binding import by_table
from shared.your_model.framework import user_port
from shared.your_model.inert import without
from shared.your_model.proposal_layers import (
    config_as_computed,
    layer_facts,
    overruled_by_layers,
    variance_notes,
)
from shared.your_model.proposal_search import format_names, wrapped_reading
from shared.your_model.proposal_structure import structure_facts

DEFAULT = "default"
UNREAD_NAME = "read-from-model"


@dataclass(frozen=True)
class Proposal(DataRecord):
    """A spec read from a model: each field's source, the fields nothing read, and notes. It
    travels from the worker that read the model as its `to_dict`."""

    KIND: ClassVar[str] = "proposal"

    spec: ModelSpec
    sources: dict[str, str]  # field -> where its value was read; DEFAULT for an unread field
    library: str | None = None  # the library whose configuration was read, if any
    notes: list[str] = field(default_factory=list)

    @property
    def unread(self) -> list[str]:
        return [name for name, source in self.sources.items() if source == DEFAULT]

    def open_fields(self, overrides: list[str] | tuple[str, ...] = ()) -> tuple[str, ...]:
        """The unread fields the user's `--set` does not state either: what the verdict may fit
        (shared/teaching/user_check.py's `fit_unread`)."""
        given = self.spec.parse_assignments(overrides)
        return tuple(name for name in self.unread if name not in given)

    def stated(self, overrides: list[str] | tuple[str, ...] = ()) -> ModelSpec:
        """The spec to check: the proposal with the user's `--set` on top, `head_dim` following a
        `--set heads=N` it was not read beside (dim / N). Blocks read without their heads (q, k, v
        Linears hold every head alike, and no layer states how many) are refused in one line naming
        the `--set`: a default there would be a guess."""
        given = self.spec.parse_assignments(overrides)
        blocks_read = self.sources.get("depth", DEFAULT) != DEFAULT
        if blocks_read and {"heads", "qkv_bias", "mlp_dim"} <= set(self.unread) and not given:
            raise SpecError(f"no attention and no MLP were read in the {self.spec.depth} block(s) of width "
                            f"{self.spec.dim} found in your model: it does not read as a ViT-style patch "
                            "classifier (a patch projection, attention blocks, a head); pass a --spec that "
                            "states the model")
        if "heads" in self.unread and "heads" not in given and blocks_read:
            raise SpecError(f"the number of attention heads is not read from your model ({self.spec.depth} "
                            f"blocks of width {self.spec.dim} read, but no attention layer states its heads: "
                            "q, k, v Linears hold every head alike); pass --set heads=N (head_dim follows: "
                            f"{self.spec.dim} / N), or a --spec")
        if "heads" in given and "head_dim" in self.unread and "head_dim" not in given:
            heads = int(given["heads"])
            if heads > 0 and self.spec.dim % heads == 0:  # else the spec's own check names heads
                overrides = [*overrides, f"head_dim={self.spec.dim // heads}"]
        return self.spec.with_overrides(overrides)

    def lines(self) -> list[str]:
        """`layer_norm_eps=1e-12 (config.layer_norm_eps)`, one per field, in the spec's order."""
        values = self.spec.to_dict()
        return [f"{name}={values[name]!r} ({source})" for name, source in self.sources.items()]

    def summary(self, stated: ModelSpec | None = None) -> str:
        """One line: what was read, and what was not (with `stated`, the spec `stated` gave: its
        values shown, and the fields the `--set` stated no longer unread)."""
        spec = stated or self.spec
        where = self.library or "its layers"
        read = sum(not source.startswith(DEFAULT) for source in self.sources.values())  # not "no effect"
        unread = [name for name in self.unread if getattr(spec, name) == getattr(self.spec, name)]
        rest = f"; unread, at the spec default (--set FIELD=VALUE states one): {', '.join(unread)}" \
            if unread else ""
        return f"{read} fields from {where} (heads={spec.heads}, dim={spec.dim}, " \
               f"layer_norm_eps={spec.layer_norm_eps:g}, activation={spec.activation}, " \
               f"pooling={spec.pooling}){rest}"


def propose_spec(model: Any, framework: str | None = None) -> Proposal:
    """The spec `model` states about itself (see the module docstring for the order of sources)."""
    fw, port = user_port(model, framework)
    # what its library declares the logits never read (a classifier's unused pooler) is set aside
    layers, params = without(port.layers(model), port.parameters(model), model_inert(model))
    direct = library_reading(model)
    found = (direct, params) if direct is not None else wrapped_reading(model, port, params)
    family = port.conventions(model)[1]  # the layouts its parameters keep (equinox's are torch's)
    by_names = _by_format_names(params, layers, fw, family) if found is None else None
    if by_names is not None:
        proposal = by_names
    else:
        reading, named = found or (Reading(""), params)
        facts, notes = _facts(reading, named, layers, family)
        proposal = _proposal(facts, reading.library or None, notes, fw)
    return proposal.replace(notes=[*proposal.notes, *_run_once(port, model, proposal.spec, fw)])


def _run_once(port: Any, model: Any, spec: ModelSpec, framework: str) -> list[str]:
    """A block the forward applies twice is seen only when it runs, and torch's reader counts each
    module's calls on a model's first run (`ports/torch/user.py`): so a torch model runs once, on one
    probe image of the proposed spec in torch's layout. A module applied twice is refused there (a
    WeightsError); a forward that fails on that image is a note, since the proposal stands without it."""
    if framework != "torch":
        return []
    caller = model_caller(model) if spec.batching != "fixed" else None  # as `evaluate` calls it
    what = f"image (NCHW, {spec.image_height}x{spec.image_width})" if spec.batching == "fixed" else \
        f"{spec.batching} batch (patches, valid mask, grids)"
    try:
        port.run(model if caller is None else caller, probe_batch(spec, 1),
                 "NCHW" if spec.batching == "fixed" else PATCHES, None)
    except WeightsError:
        raise
    except Exception as exc:  # whatever the user's forward raises
        return [f"your model did not run on the proposed spec's probe {what}: {one_line(exc)}; a block "
                "applied more than once, which only a run shows, was not looked for"]
    return []


def _facts(reading: Reading, params: dict[str, Any], layers: list[Any], family: str,
           strict: bool = False) -> tuple[dict[str, Fact], list[str]]:
    """Every source in order (the module docstring), with the notes; `family` is the parameters'
    layout family (ports/<fw>/user.py's `conventions`); with `strict`, a state dict the format's
    `infer` cannot read raises instead of adding a note."""
    found: dict[str, Fact] = dict(reading.facts)
    notes = list(reading.notes)
    conventions: dict[str, Fact] = {}
    if reading.fmt:
        try:
            inferred = _inferred(reading, params, found, layers)
        except PortbenchError as exc:
            if strict:
                raise
            notes.append(f"the {reading.fmt} format's reading of your parameters: {exc}")
        else:
            for name, fact in inferred.facts.items():
                found.setdefault(name, fact)
            # a format whose reading names no missing bias binds by a table that holds every
            # projection's bias: the binding that follows fails if one is not the model's
            found.setdefault("bias_free", ((), f"the {reading.fmt} format's table: every projection's "
                                               "bias is one of the model's tensors"))
            found.setdefault("kv_heads", (None, f"the {reading.fmt} format's table: keys and values "
                                                "with every head"))
            conventions = {name: (value, f"{why}: the library's convention")
                           for name, (value, why) in inferred.conventions.items()}
    notes += overruled_by_layers(found, layers)
    for name, fact in layer_facts(layers).items():
        found.setdefault(name, fact)
    batch = found.get("batching", ("fixed",))[0]
    for name, fact in structure_facts(params, layers, family, found).items():
        if batch != "fixed" and name in ("image_height", "image_width"):
            continue  # the table's own image is one grid of a naflex or packed batch's many: not its bound
        if name == "bias_free" and fact[0] and not found.get(name, (None,))[0]:
            found[name] = fact  # a bias-free projection no layer holds (CLIP's bare `proj`)
        found.setdefault(name, fact)
    for name, fact in conventions.items():
        found.setdefault(name, fact)
    for name, fact in dependent_defaults(found).items():
        found.setdefault(name, fact)
    return found, notes + variance_notes(layers)


def _inferred(reading: Reading, params: dict[str, Any], found: dict[str, Fact], layers: list[Any]) -> Any:
    """The format's `infer` on the model's state dict, given what the configuration said (its keys
    for what the layers compute set to the layers' values)."""
    fmt = reading.fmt or ""
    fmt_module = format_module(fmt)
    raw = dict(params)
    if hasattr(fmt_module, "normalise"):
        raw = fmt_module.normalise(raw, "(your model)", reading.config)
    config = config_as_computed(reading.config, reading.config_keys, layers)
    return fmt_module.infer(fmt, raw, config, {k: v for k, (v, _) in found.items()})


def _by_format_names(params: dict[str, Any], layers: list[Any], framework: str,
                     family: str) -> Proposal | None:
    """The proposal of the first checkpoint format whose names the parameters carry: its `infer`
    reads them and its table, on the spec that gives, binds every parameter exactly."""
    for reading, named in format_names(params):
        fmt_module = format_module(reading.fmt or "")
        try:
            facts, notes = _facts(reading, named, layers, family, strict=True)
            proposal = _proposal(facts, reading.library, notes, framework)
            raw = fmt_module.normalise(named, "(your model)") if hasattr(fmt_module, "normalise") else named
            shapes = {name: tuple(value.shape) for name, value in raw.items()}
            if by_table(proposal.spec, shapes, fmt_module.table(reading.fmt, proposal.spec)) is not None:
                return proposal
        except (PortbenchError, KeyError):  # not this format's names (a KeyError: a tensor it reads)
            continue
    return None


def dependent_defaults(found: dict[str, Fact]) -> dict[str, Fact]:
    """Fields that follow from one already read, unless the model said otherwise."""
    out: dict[str, Fact] = {}
    if found.get("class_token", (True,))[0] is False:
        out["pos_embed_class_row"] = (False, "follows class_token=False (no class row)")
        out["pooling"] = ("mean", "follows class_token=False (no class token to read out)")
    if found.get("pos_embed", ("learned",))[0] != "learned":
        out["pos_embed_class_row"] = (False, f"follows pos_embed={found['pos_embed'][0]!r} (only a learned "
                                      "table has a class row)")
    if found.get("pooling", ("",))[0] == "mean" and "final_norm" not in found:
        out["final_norm"] = ("pooled", "follows pooling=mean (timm's fc_norm)")
    if "patch_height" in found and "temporal_patch_size" not in found:  # a Conv3d's kernel states its own
        out["temporal_patch_size"] = (1, f"follows a 2-D patch ({found['patch_height'][1]})")
    if "dim" in found and "heads" in found and "head_dim" not in found:
        dim, heads = found["dim"][0], found["heads"][0]
        if isinstance(dim, int) and isinstance(heads, int) and heads and dim % heads == 0:
            out["head_dim"] = (dim // heads, "follows dim / heads")
    return out


def _proposal(found: dict[str, Fact], library: str | None, notes: list[str], framework: str) -> Proposal:
    names = [f.name for f in dataclasses.fields(ModelSpec) if f.name != "name"]
    values = {name: found[name][0] for name in names if name in found}
    try:
        spec = ModelSpec.from_dict({**values, "name": UNREAD_NAME})
    except SpecError as exc:
        raise SpecError(f"the spec read from your {framework} model is not valid: {exc}") from None
    idle = no_effect(spec)
    sources = {name: found[name][1] if name in found else
               f"{DEFAULT}, no effect here: {idle[name]}" if name in idle else DEFAULT for name in names}
    return Proposal(spec, sources, library, notes)


def no_effect(spec: ModelSpec) -> dict[str, str]:
    """Fields whose value does not change the eval-mode function of `spec` (a default there is
    not a guess): field -> why."""
    out = {f"dropout_{part}": "dropout is active only in train mode"
           for part in ("embed", "attn", "mlp", "head")}
    if spec.pooling != "map":
        out["pool_qkv_bias"] = f"pooling={spec.pooling}, not map"
    if not spec.head_hidden:
        out["head_activation"] = "no hidden head layers"
    if not spec.registers:
        out["pos_embed_register_rows"] = "no register tokens"
    if spec.pos_embed == "none":
        out |= {"pos_embed_class_row": "no position table", "pos_rows": "no position table"}
    if spec.rope == "none":
        out |= dict.fromkeys(("rope_theta", "rope_coords", "rope_ref_grid", "rope_bands", "rope_axes"),
                             "no rotary embeddings")
    if spec.batching == "fixed":  # how a batch is laid out, not what the model computes per image
        out |= {"batching": "your model is fed whole images of the spec's size (a mixed-size batch: a "
                            "--spec with batching)",
                "max_patches": "batching=fixed", "pack_images": "batching=fixed"}
        towers = ("token_order", "window_size", "full_attention_blocks", "merge_size", "merger_dim",
                  "deepstack_blocks")
        out |= dict.fromkeys(towers, "batching=fixed: windows and a merger read a mixed-size batch's grids")
    elif spec.merge_size == 1:
        out["deepstack_blocks"] = "no patch merger (a deepstack merger is one more)"
    out |= {NORM_EPS_FIELDS[place]: f"no norm there ({place})" for place, on in norm_places(spec).items()
            if not on}
    if spec.pos_grid_height is None and spec.pos_grid_width is None:  # a built model's own table
        out |= dict.fromkeys(("pos_grid_height", "pos_grid_width", "pos_resample"),
                             "a built model's table has the image's own patch grid (only that shape binds)")
    return out
