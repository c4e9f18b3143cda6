"""A user's own model (`--model FILE.py:NAME`) from the parent's side: the argument checked
without importing it, one worker run (`user` job kind, jobs.py and evaluate.py: bind, load, run,
capture) and its result in canonical terms (`UserRun`), and the spec read from the model in one
worker run (`propose` job kind, jobs.py and proposal.py). The user's file is imported only in
the worker process, which reads the naming conventions (the checkpoint libraries' tables)
itself."""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, field
from importlib.metadata import packages_distributions
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from shared.core.files import open_user_file, read_text
from shared.core.reference import token_tap
from shared.core.spec import ModelSpec
from shared.core.weights import load_weights
from shared.errors import InputError, SpecError, WeightsError
from shared.runtime.launch import run_worker
from shared.your_model.jobs import PROPOSE, USER
from shared.your_model.spec_check import Contradiction, from_layers

if TYPE_CHECKING:
    from shared.your_model.proposal import Proposal

MODULE_REFERENCE = re.compile(r"^[A-Za-z_][\w.]*$")
# The user's model's worker gets Transformers' own defaults, not the launcher's USE_TF / USE_FLAX /
# USE_TORCH for its entry: nothing is hidden from the user's code (a file that builds a torch model
# through Transformers and also imports flax must get its torch class; USE_TORCH=0 would hide it).
USER_CODE_ENV = {"USE_TF": "AUTO", "USE_FLAX": "AUTO", "USE_TORCH": "AUTO"}
GUESS = (("flax", re.compile(r"^\s*(from|import)\s+flax", re.M)),
         ("keras", re.compile(r"^\s*(from|import)\s+keras", re.M)),
         ("torch", re.compile(r"^\s*(from|import)\s+torch", re.M)))


def check_model_argument(text: str) -> str:
    """`FILE.py:NAME` (the file must exist; made absolute) or `package.module:NAME`."""
    where, sep, name = text.rpartition(":")
    if not sep or not where or not name.isidentifier():
        raise InputError(f"--model {text!r}: expected FILE.py:NAME or package.module:NAME")
    if where.endswith(".py"):
        path = Path(where)
        with open_user_file(path, f"--model {text!r}: file {where!r}"):  # a regular file, or one line
            pass
        return f"{path.resolve()}:{name}"
    if not MODULE_REFERENCE.match(where):
        raise InputError(f"--model {text!r}: {where!r} is neither a .py file nor a module name")
    return text


def worker_framework(reference: str, framework: str | None) -> str:
    """The registry entry the worker starts as (its environment, e.g. KERAS_BACKEND): --framework,
    else the guess (`framework_guess`)."""
    return user_entry(framework) if framework else framework_guess(reference)[0]


def user_entry(framework: str) -> str:
    """`--framework` for a user's model: a registry entry whose port reads a model of its own
    (`framework.USER_FRAMEWORKS`), refused in one line before any worker starts."""
    from ports import PORTS
    from shared.your_model.framework import USER_FRAMEWORKS, port_name

    entries = [name for name in PORTS if port_name(name) in USER_FRAMEWORKS]
    if framework not in entries:
        raise InputError(f"--framework {framework!r}: expected one of {', '.join(entries)} (the frameworks "
                         "a model of your own runs in)")
    return framework


def framework_guess(reference: str) -> tuple[str, str]:
    """(entry, from what) a first worker starts as when no --framework is given: the framework
    the file imports (read as text, not imported), else torch. Only a first attempt: the worker
    reads the framework from the object the factory returns, and `run_user` starts a worker of
    that framework when the guess was wrong. Nothing is hidden from the user's code either way."""
    where = reference.rpartition(":")[0]
    if not where.endswith(".py"):
        return "torch", "a module reference: torch unless told"
    text = read_text(where, f"--model file {where!r}")
    for name, pattern in GUESS:
        found = pattern.search(text)
        if found:
            line = text.count("\n", 0, found.start(1)) + 1
            return name, f"from line {line} of {Path(where).name}: {found.group(0).strip()!r}"
    return "torch", f"{Path(where).name} imports no framework: torch unless told"


def propose_user_spec(reference: str, framework: str | None = None, timeout: float = 300.0) -> Proposal:
    """The spec read from the model `--model FILE.py:NAME` builds, in one worker run (`propose`
    job kind: proposal.py); bad input of any kind is one line."""
    # the report's record: imported when a spec is read, since a run against a given spec needs
    # none of the proposal's readers (the checkpoint plug-ins, the layer and name searches)
    from shared.your_model.proposal import Proposal

    reference = check_model_argument(reference)
    with tempfile.TemporaryDirectory(prefix="portbench-propose-") as tmp:
        result = run_worker(worker_framework(reference, framework),
                            {"propose": PROPOSE.job(model=reference, framework=framework)}, tmp, timeout,
                            env=USER_CODE_ENV)  # nothing hidden from the user's code, as for the run
    error = result.error("propose")
    if error:
        kind = (result.reports.get("propose") or {}).get("error_kind")
        message = error if error.startswith("--model") else f"--model {reference}: {error}"
        raise (SpecError if kind == "SpecError" else InputError)(message)
    return Proposal.from_dict(result.reports["propose"]["proposal"])


@dataclass
class UserRun:
    spec: ModelSpec
    framework: str
    logits: np.ndarray  # or a tower's final tokens (`readout`)
    tensors: dict[str, np.ndarray]  # the canonical weights the model ran with
    binding: dict[str, Any]
    report: dict[str, Any]
    contradictions: list[Contradiction] = field(default_factory=list)
    taps: dict[str, np.ndarray] = field(default_factory=dict)
    framework_note: str | None = None  # the guess that was wrong, what was found, how to skip it

    @property
    def label(self) -> str:
        return f"yours ({self.framework})"

    @property
    def readout(self) -> str:
        """What the model's output is compared as: "logits" (batch, outputs), or the reference tap
        its final tokens (batch, seq_len, dim) are held to, from a tower that returns only those
        (evaluate.check_logits)."""
        return token_tap(self.spec) if self.logits.ndim == 3 else "logits"

    @property
    def origin(self) -> str:
        """The library the model's class comes from (timm, transformers, keras_hub: an installed
        distribution's package), else its framework: diagnose names an epsilon by it."""
        top = str(self.report.get("model_class", "")).split(".")[0]
        return top if top and top in packages_distributions() else self.framework

    def inert_lines(self) -> list[str]:
        """The parameters set aside as inert (the forward never reads them), one line each."""
        return [f"set aside: {name} {why}" for name, why in self.binding.get("inert", {}).items()]

    def binding_lines(self) -> list[str]:
        from shared.core.terminal import format_table

        rows = [[link["native"], link["canonical"], link["layout"], link["why"]]
                for link in self.binding["links"]]
        return [f"binding by {self.binding['rule']}:",
                format_table(["your parameter", "canonical", "layout", "bound by"], rows)]


def run_user(reference: str, spec: ModelSpec, images: np.ndarray, *, framework: str | None = None,
             layout: str | None = None, output: str | None = None, weights: str | None = None,
             rules: str | None = None, taps: bool = False, timeout: float = 300.0) -> UserRun:
    """One worker run of the user's model; bad input of any kind is one-line InputError/WeightsError."""
    reference = check_model_argument(reference)
    loaded = load_weights(weights, spec) if weights else None
    job = {**user_job(spec, framework=framework, layout=layout, output=output, weights=weights,
                      rules=rules, taps=taps), "model": reference}
    entry, guess = (user_entry(framework), "") if framework else framework_guess(reference)
    note = None
    with tempfile.TemporaryDirectory(prefix="portbench-user-") as tmp:
        np.save(Path(tmp) / "x.npy", images)
        job["input"] = str(Path(tmp) / "x.npy")
        result = run_worker(entry, {"user": USER.job(**job)}, tmp, timeout, env=USER_CODE_ENV)
        report = result.reports.get("user") or {}
        if report.get("found"):  # the guess was wrong: the model ran as what its object is
            found = report["found"]
            note = (f"framework: guessed {entry} ({guess}), but the factory returned a "
                    f"{report.get('model_class')}, a {found} model: ran it as {found}; "
                    f"--framework {found} skips the guess")
        if report.get("restart") and not result.error("user"):  # in a worker of its own, once
            job["framework"] = report["found"]
            result = run_worker(report["found"], {"user": USER.job(**job)}, tmp, timeout, env=USER_CODE_ENV)
    error = result.error("user")
    if error:
        kind = (result.reports.get("user") or {}).get("error_kind")
        message = error if error.startswith("--model") else f"--model {reference}: {error}"
        raise (WeightsError if kind == "WeightsError" else InputError)(message)
    run = user_run(spec, result.reports["user"], result.arrays.get("user", {}), loaded)
    run.framework_note = note
    return run


def user_job(spec: ModelSpec, *, framework: str | None = None, layout: str | None = None,
             output: str | None = None, weights: str | None = None, rules: str | None = None,
             taps: bool = False) -> dict[str, Any]:
    """The `user` job's fields (all but the model and its input)."""
    rows = None
    if rules:  # the `--map` file (its reader only then), read and checked before any worker starts
        from shared.your_model.rules import read_rules

        rows = read_rules(rules, spec)
    return {"spec": spec.to_json(), "framework": framework, "layout": layout,
            "output": output, "weights": weights, "taps": taps, "rules": rows}


def user_run(spec: ModelSpec, report: dict[str, Any], arrays: dict[str, np.ndarray],
             loaded: Any = None) -> UserRun:
    """The `user` job's report and arrays in canonical terms."""
    tensors = loaded.tensors if loaded else {k[2:]: v for k, v in arrays.items() if k.startswith("w/")}
    tensors = {name: tensors[name] for name in spec.derived.tensor_shapes}
    run = UserRun(spec, report["framework"], arrays["logits"], tensors, report["binding"], report,
                  taps={k[4:]: v for k, v in arrays.items() if k.startswith("tap/")})
    run.contradictions = from_layers(spec, report.get("layers", []))
    return run
