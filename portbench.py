"""portbench's Python API for a user's own model, and a pytest helper.

    import portbench

    result = portbench.check(my_model, "mnist-vit-small")          # a model object, or "FILE.py:NAME"
    assert result.passed, result.explanation
    portbench.check(my_model)  # the spec read from the model itself (`compare.py spec --from-model`)
    portbench.assert_equivalent("my_vit.py:build", "mnist-vit-small")  # fails with the one-line reason

A model *object* (a `torch.nn.Module`, a Keras model or layer, an `nnx.Module`) is checked in the
caller's process: its framework is already imported there, and nothing is copied to another
process. A `"FILE.py:NAME"` string runs in a fresh worker process, as `compare.py verify --model`
does. Either way the model's own parameters are bound to the canonical tensors (or `weights=` is
loaded into it) and its logits are compared with the float64 reference on those weights.

Every verdict is a `Result`: a model that does not import, build, bind or give logits is one with
`passed=False` and the one-line reason as its `explanation`. Only a mistake in `check`'s own
arguments (an unknown option, a bad batch, spec, model reference, weights or rules file, a model
object of no framework portbench runs or of another than `framework`) raises a PortbenchError.

Options (keyword arguments): `framework`, `layout` ("NHWC" | "NCHW" | "NHW"), `output` (index or
key of the logits in a tuple / list / dict result), `weights` (a canonical .safetensors file),
`rules` (a `--map` rules.toml), `batch` (probe batch size, default 4), `trace` (also locate the
first divergent tensor, default True), `frameworks` (our ports to run beside yours; strings only).
"""

from __future__ import annotations

import numbers
import os
from dataclasses import dataclass, field
from typing import Any

from shared.core.spec import ModelSpec
from shared.errors import InputError, PortbenchError, WeightsError

__all__ = ["Result", "assert_equivalent", "check"]


@dataclass
class Result:
    passed: bool
    max_abs_diff: float | None
    tolerance: float
    binding: dict[str, Any]  # {"rule": ..., "links": [{"native", "canonical", "layout", "why"}]}
    first_divergence: str | None  # the first canonical tap over its budget, e.g. "block0.mlp"
    diagnosis: list[str]  # diagnose's lines when the logits differ
    contradictions: list[str]  # "field: your model X, spec Y"
    explanation: str  # one line: why it passed or failed
    notes: list[str] = field(default_factory=list)  # how it ran: a layout found by trying, a mode keyword


def _spec(spec: ModelSpec | str) -> ModelSpec:
    from shared.core.presets import resolve_spec

    if not isinstance(spec, (ModelSpec, str)):
        raise InputError(f"portbench.check: spec is {spec!r:.40}, expected a ModelSpec, a preset name, a "
                         "spec file or a JSON document")
    return spec if isinstance(spec, ModelSpec) else resolve_spec(spec, [])


def _proposed(model: Any, framework: str | None) -> tuple[ModelSpec, tuple[str, ...]]:
    """The spec read from the model (shared/your_model/proposal.py), and the fields nothing read:
    in this process for an object, in a worker for a "FILE.py:NAME" string."""
    if isinstance(model, str):
        from shared.your_model.run import propose_user_spec

        proposal = propose_user_spec(model, framework)
    else:
        from shared.your_model.proposal import propose_spec

        proposal = propose_spec(model, framework)
    return proposal.stated(), proposal.open_fields()


OPTIONS = ("framework", "layout", "output", "weights", "rules", "batch", "trace", "frameworks")


# each option's types, and what its message says it expects (None: the option left at its default)
OPTION_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "framework": ((str,), "a framework name"), "layout": ((str,), "one of NHWC, NCHW, NHW"),
    "output": ((str, int), "an index or a key"), "weights": ((str, os.PathLike), "a file path"),
    "rules": ((str, os.PathLike), "a file path"), "trace": ((bool,), "True or False"),
    "frameworks": ((list, tuple), "a list of framework names"),
}


def _batch(options: dict[str, Any]) -> int:
    """The options, checked as `compare.py` checks its flags: an unknown name, a value of another
    type, or a batch that is not a positive integer is one InputError line, not a bare ValueError
    or TypeError from deep inside (a weights=5 read as a file descriptor)."""
    from shared.cli._lists import parse_frameworks
    from shared.cli._options import INPUT_LAYOUT

    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise InputError(f"portbench.check: unknown option {unknown[0]!r}; expected some of: "
                         f"{', '.join(OPTIONS)}")
    for name, (kinds, what) in OPTION_TYPES.items():
        value = options.get(name)
        if value is None:
            continue
        # bool is an int: True is no index
        wrong = not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds)
        if wrong or (name == "layout" and value not in (INPUT_LAYOUT.choices or ())):
            raise InputError(f"portbench.check: {name} is {value!r:.40}, expected {what}")
    if options.get("frameworks") is not None:
        if not all(isinstance(n, str) and n.strip() and "," not in n for n in options["frameworks"]):
            raise InputError(f"portbench.check: frameworks is {options['frameworks']!r:.40}, expected a list "
                             "of framework names")
        parse_frameworks(",".join(options["frameworks"]) or None, ())  # an unknown name: its one line
    batch = options.pop("batch", 4)
    if isinstance(batch, bool) or not isinstance(batch, numbers.Integral) or batch < 1:
        raise InputError(f"portbench.check: batch is {batch!r:.40}, expected a positive integer (the probe "
                         "batch size)")
    return int(batch)


def check(model: Any, spec: ModelSpec | str | None = None, **options: Any) -> Result:
    """Is `model` the function `spec` describes (by default, the spec read from the model)? See
    the module docstring for the options."""
    from shared.core.inputs import probe_batch
    from shared.teaching import user_check

    batch = _batch(options)
    # a spec that cannot be read from the model raises, like a usage error: pass `spec`
    resolved, unread = (_spec(spec), ()) if spec is not None else _proposed(model, options.get("framework"))
    held_note = None
    if not isinstance(model, str):  # a bare linen module is held with its variables
        from shared.your_model.framework import with_variables

        model, held_note = with_variables(model, resolved)
    _check_arguments(model, resolved, options)
    images = probe_batch(resolved, batch)
    trace = bool(options.pop("trace", True))
    frameworks = options.pop("frameworks", None)
    try:
        if isinstance(model, str):
            checked = user_check.check_user(model, resolved, images, trace=trace, frameworks=frameworks,
                                            unread=unread, **options)
        else:
            run = _in_process(model, resolved, images, trace, options)
            checked = user_check.judge(run, images, trace=trace, unread=unread)
    except (InputError, WeightsError) as exc:  # the model's verdict: it does not build, bind or run
        return _refused(resolved, exc)
    entry = checked.entry
    return Result(checked.passed, entry.max_abs_diff, entry.tolerance, checked.run.binding,
                  checked.first_divergence, checked.diagnosis.lines() if checked.diagnosis else [],
                  [c.line() for c in checked.run.contradictions], checked.explanation(),
                  [*([held_note] if held_note else []),
                   *checked.run.report.get("notes", [])])


def _check_arguments(model: Any, spec: ModelSpec, options: dict[str, Any]) -> None:
    """`check`'s own arguments, before the model runs: their mistakes raise, the model's do not."""
    from shared.core.weights import load_weights
    from shared.your_model.rules import read_rules

    if isinstance(model, str):
        from shared.your_model.run import check_model_argument, user_entry

        check_model_argument(model)
        if options.get("framework"):
            user_entry(options["framework"])
    else:
        from shared.your_model.framework import user_port

        user_port(model, options.get("framework"))
    if options.get("weights"):
        load_weights(options["weights"], spec)
    if options.get("rules"):
        read_rules(options["rules"], spec)


def _refused(spec: ModelSpec, error: PortbenchError) -> Result:
    """The Result of a model that gave no logits to compare: its one-line reason, nothing measured."""
    from shared.core.tolerance import logit_atol

    return Result(False, None, logit_atol(spec), {}, None, [], [], str(error))


def _in_process(model: Any, spec: ModelSpec, images: Any, trace: bool, options: dict[str, Any]) -> Any:
    from shared.core.weights import load_weights
    from shared.runtime.job_kinds import Output
    from shared.your_model.evaluate import evaluate
    from shared.your_model.run import user_job, user_run

    out = Output()
    evaluate(model, spec, user_job(spec, taps=trace, **options), images, out)
    weights = options.get("weights")
    return user_run(spec, out.report, out.arrays, load_weights(weights, spec) if weights else None)


def assert_equivalent(model: Any, spec: ModelSpec | str | None = None, **options: Any) -> Result:
    """`check`, failing the test with the one-line explanation when the model is not equivalent."""
    result = check(model, spec, **options)
    if not result.passed:
        raise AssertionError(result.explanation)
    return result
