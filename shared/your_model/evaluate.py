"""A user's own model run in the worker (`--model FILE.py:NAME`; the `user` job kind,
jobs.py, and `portbench.check` in the caller's process): its parameters, read by its framework's
`ports/<fw>/user.py` (framework.py), bound to the canonical tensors (by the port's own
table and every checkpoint library's, which this process reads from the plug-ins itself,
shared/checkpoints/libraries/; else by structure), canonical weights loaded into it or its own
returned, its forward on the probe batch and the canonical taps captured (`evaluate`, taps.py); timing it
is the timing harness's, through `UserPort`.

The launcher is told the phase: `user-bind`, `user-forward`, `user-taps` (after guard.py's
`user-import` and `user-build`), which a timeout names."""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

import ports
from shared.checkpoints import FORMATS, format_module, model_caller, model_inert, model_output, model_tables
from shared.core.forward_io import PATCHES, output_rows
from shared.core.inputs import probe_batch
from shared.core.layer import Layer
from shared.core.mapping import Table
from shared.core.spec import ModelSpec
from shared.core.tolerance import DISCERNING_RATIO, discerning, logit_atol, logit_spread
from shared.core.weights import init_weights, load_weights
from shared.errors import InputError, PortbenchError, WeightsError
from shared.runtime.job_kinds import Output
from shared.runtime.worker import one_line, print_phase
from shared.your_model import taps
from shared.your_model.binding import Binding, bind
from shared.your_model.framework import model_class, user_port, with_variables
from shared.your_model.guard import build, user_code
from shared.your_model.inert import candidates, inert_parameters, without


def conventions(framework: str, spec: ModelSpec, model: Any) -> list[Table]:
    """The naming conventions a user's parameters may follow: the port's own transfer table
    first, then the names the model's library holds this built model by (a Transformers 5
    model's own: `model_tables`), then every checkpoint library's (`library_tables`)."""
    out: list[Table] = []
    with contextlib.suppress(PortbenchError):  # a port that cannot load here names nothing
        out.append(ports.load_port_part(framework, "transfer").table(spec))
    return out + model_tables(model, spec) + library_tables(spec)


def library_tables(spec: ModelSpec) -> list[Table]:
    """Each checkpoint format's table for `spec`, in `FORMATS` order, read from its library's
    plug-in (shared/checkpoints/libraries/) in this process."""
    tables = (format_module(fmt).table(fmt, spec) for fmt in FORMATS)
    return [table for table in tables if table is not None]


def bind_model(module: Any, model: Any, spec: ModelSpec, framework: str, rules: str | None,
               layout: str, output: str | None) -> tuple[Binding, dict[str, Any], list[Layer]]:
    """(the binding of `model`'s parameters to `spec`'s canonical tensors, the parameters by
    their native names, the layers `module` (its ports/<fw>/user.py) reads). Parameters no
    binding can place that the forward never reads (inert.py, run in `layout` on the spec's probe
    image) are set aside and named in the binding; the refusal stands when there are none."""
    params = module.parameters(model)
    declared = model_inert(model)  # what its library says the logits never read
    found, kept = without(module.layers(model), params, declared)
    shapes = {n: tuple(v.shape) for n, v in kept.items()}
    tables = conventions(framework, spec, model)
    family = module.conventions(model)[1]  # the layouts its parameters keep (equinox: torch's)
    try:
        binding = bind(spec, shapes, found, family, tables, rules)
        binding.inert = declared
        return binding, params, found
    except WeightsError:
        inert = inert_parameters(module, model, params, candidates(found, shapes), probe_batch(spec, 1),
                                 layout, output)
        if not inert:
            raise
    # bound without them; a refusal now is about the rest, and truer for not naming them
    binding = bind(spec, {n: s for n, s in shapes.items() if n not in inert}, found, family, tables, rules)
    binding.inert = {**declared, **inert}
    return binding, params, found


OTHER_LAYOUT = {"NCHW": "NHWC", "NHWC": "NCHW"}


def input_layout(module: Any, model: Any, job: dict[str, Any],
                 image: np.ndarray) -> tuple[str, str | None]:
    """(the layout the forward takes, a note when it was found by trying): `--input-layout`, else
    its library's convention (`conventions`: NCHW in torch and equinox, NHWC elsewhere), else, when
    the forward raises on that, the other one if the forward runs on it (a Transformers TF or Flax
    model takes NCHW pixel_values in a channels-last framework); both failing is one line naming
    both."""
    if job.get("layout"):
        return job["layout"], None
    if image.dtype.names is not None:  # a patch batch: one call convention (forward_io.model_inputs)
        return PATCHES, None
    first = module.conventions(model)[0]
    failed = _forward_error(module, model, image, first, job)
    if failed is None:
        return first, None
    other = OTHER_LAYOUT[first]
    if _forward_error(module, model, image, other, job) is not None:
        raise InputError(f"your model's forward raised {failed} on {first} images {_shape(image, first)}, "
                         f"and also on {other}; --input-layout names the layout it takes (NHWC, NCHW, NHW)")
    return other, (f"input layout: {other}, tried, since your model's forward raised on {first} images "
                   f"({failed}); --input-layout {other} says so")


def _forward_error(module: Any, model: Any, image: np.ndarray, layout: str,
                   job: dict[str, Any]) -> str | None:
    """The one line the forward raises on `image` in `layout`, or None when it runs."""
    with user_code(str(job.get("model")), "running the forward"):
        try:
            module.run(model, image, layout, job.get("output"))
        except PortbenchError:  # it ran: what it returned is for the run on the whole batch to judge
            return None
        except Exception as exc:  # the user's forward: whatever it raises
            return one_line(exc)
    return None


def _shape(image: np.ndarray, layout: str) -> tuple[int, ...]:
    n, h, w, c = image.shape
    return (n, c, h, w) if layout == "NCHW" else (n, h, w, c)


def inference_note(module: Any, model: Any) -> str | None:
    """The run's note on how the model was put in inference mode, when it took more than the
    framework's own switch (ports/<fw>/user.py's `inference_mode`)."""
    how = module.inference_mode(model)
    return f"mode: ran in inference mode, as the reference computes: {how}" if how else None


def check_logits(logits: np.ndarray, spec: ModelSpec, batch: int) -> None:
    """The model's output is the spec's: its logits (batch, outputs), or, from a tower that returns
    only its tokens (`forward_io.tokens_of`), the final tokens (batch, seq_len, dim) of a spec whose
    output is its pooled vector (no classifier); anything else is one line."""
    expected = (batch, spec.derived.outputs)
    if logits.ndim == 3:
        tokens = (batch, spec.derived.seq_len, spec.dim)
        if spec.num_classes:
            raise InputError(f"your model's forward returns tokens of shape {tuple(logits.shape)}, but the "
                             f"spec ends in a classifier (num_classes {spec.num_classes}): return its "
                             "logits, pick them with --output, or check the tower alone with --set "
                             "num_classes=0")
        if tuple(logits.shape) != tokens:
            raise InputError(f"your model's forward returns tokens of shape {tuple(logits.shape)}, expected "
                             f"{tokens} (batch {batch} x the spec's {tokens[1]} tokens x dim {spec.dim})")
    elif tuple(logits.shape) != expected:
        what = f"num_classes {spec.num_classes}" if spec.num_classes else "the pooled width: no classifier"
        raise InputError(f"your model's forward returns shape {tuple(logits.shape)}, expected {expected} "
                         f"(batch {batch} x {what})")
    if not np.all(np.isfinite(logits)):
        bad = int(logits.size - np.count_nonzero(np.isfinite(logits)))
        raise InputError(f"your model's logits hold {bad} non-finite values (NaN or infinity)")


def evaluate(model: Any, spec: ModelSpec, job: dict[str, Any], images: np.ndarray, out: Output) -> None:
    """The `user` job on a built model; `portbench.check` calls it in the caller's process."""
    fw, module = user_port(model, job.get("framework"))
    job = {**job, "output": job.get("output") or model_output(model)}  # a library's choice, unless named
    out.report.update(framework=fw, model_class=model_class(model))
    # a patch batch goes through its library's call where the forward takes other arguments (Qwen's)
    caller = model_caller(model) if images.dtype.names is not None else None
    runner = model if caller is None else caller
    print_phase("user-forward")  # the layout is found by running the forward on one image
    layout, layout_note = input_layout(module, runner, job, images[:1])
    out.report["notes"] = [note for note in (layout_note, inference_note(module, model)) if note]
    print_phase("user-bind")
    binding, params, found = bind_model(module, model, spec, fw, job.get("rules"), layout, job.get("output"))
    out.report["layers"] = [{"path": a.path, "kind": a.kind, "params": list(a.params), "settings": a.settings}
                            for a in found]
    bound = {link.native for link in binding.links}  # all but a convention's inert tensors
    out.report.update({"binding": binding.to_dict(),
                       "param_count": int(sum(v.size for n, v in params.items() if n in bound))})
    if job.get("weights"):
        module.assign(model, binding.to_native(load_weights(job["weights"], spec).tensors))
    else:
        out.arrays.update({f"w/{k}": v for k, v in binding.to_canonical(params, consume=True).items()})
    del params
    print_phase("user-forward")
    logits = _run(module, runner, images, layout, job)
    check_logits(logits, spec, output_rows(images))
    if not job.get("weights") and logits.ndim == 2 and not discerning(logits, logit_atol(spec, logits)):
        # its own weights move its logits too little over the images for the tolerance to see a
        # wrong function (a zero-initialised head; DINOv3's and Transformers' inits, ~1e-4): the
        # verdict is on portbench's canonical weights, loaded into it as --weights would be
        canonical = init_weights(spec, 0)
        module.assign(model, binding.to_native(canonical))
        out.arrays.update({f"w/{k}": v for k, v in canonical.items()})
        out.report["notes"].append(
            "weights: with your model's own parameters its logits move by at most "
            f"{logit_spread(logits):.2g} over the probe images, under {DISCERNING_RATIO:.0f} x the tolerance "
            f"{logit_atol(spec, logits):.1e}, where a wrong function passes unseen: portbench's canonical "
            "weights (seed 0) were loaded into it instead")
        out.report["canonical_weights"] = True
        logits = _run(module, runner, images, layout, job)
    out.arrays["logits"] = logits
    if job.get("taps") or spec.derived.extra_outputs:  # the extra outputs (deepstack.J) are held by verify
        print_phase("user-taps")
        paths = taps.tap_paths(binding, found, spec)
        if not job.get("taps"):
            paths = {tap: path for tap, path in paths.items() if tap in spec.derived.extra_outputs}
        captured = taps.captured(module, model, caller, spec, images, layout, paths)
        out.arrays.update({f"tap/{tap}": value for tap, value in captured.items()})


def _run(module: Any, model: Any, images: np.ndarray, layout: str, job: dict[str, Any]) -> np.ndarray:
    """The user's forward on `images`, as float32; whatever it raises is one line."""
    with user_code(str(job.get("model")), "running the forward"):
        try:
            return np.asarray(module.run(model, images, layout, job.get("output")), np.float32)
        except PortbenchError:
            raise
        except Exception as exc:  # whatever the user's forward raises is one line
            raise InputError(f"your model's forward raised {one_line(exc)}") from None


class UserPort:
    """The user's model behind the part of the port interface the timing harness calls
    (`shared.measure.phases`): built once, the harness's canonical weights loaded through the
    binding, NumPy images in (the layout change and the copy to the framework are part of each
    forward, as they are of `user.run`), NumPy logits out."""

    device_class = "cpu"

    def __init__(self, job: dict[str, Any], spec: ModelSpec, tensors: dict[str, np.ndarray]) -> None:
        self.spec = spec
        self.model, _ = with_variables(build(job["model"], spec), spec)
        self.framework, self.module = user_port(self.model, job.get("framework"))
        caller = model_caller(self.model) if spec.batching != "fixed" else None  # as `evaluate` calls it
        self.runner = self.model if caller is None else caller
        print_phase("user-forward")  # the layout is found by running the forward on one image
        self.layout, _ = input_layout(self.module, self.runner, job, probe_batch(spec, 1))
        self.output = job.get("output") or model_output(self.model)
        print_phase("user-bind")
        binding, params, _ = bind_model(self.module, self.model, spec, self.framework, job.get("rules"),
                                        self.layout, self.output)
        self.count = int(sum(v.size for n, v in params.items() if n not in binding.inert))
        del params
        self.module.assign(self.model, binding.to_native(tensors))
        print_phase("user-run")  # the timing harness's progress lines name its steps

    def prepare(self, images: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(images, dtype=np.float32)

    def forward(self, images: np.ndarray, train: bool = False) -> np.ndarray:
        return self.module.run(self.runner, images, self.layout, self.output)

    def compiled_forward(self) -> Any:
        return self.module.compiled(self.runner, self.layout, self.output)

    def sync(self, value: Any = None) -> None:
        """NumPy results are already on the host: nothing is pending."""

    def to_numpy(self, value: Any) -> np.ndarray:
        return np.asarray(value)

    def param_count(self) -> int:
        return self.count
