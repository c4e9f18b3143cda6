"""The worker's job kinds for a user's own model (`--model FILE.py:NAME`): `user` (the model
built, bound to the canonical tensors, run on the probe batch, its taps captured: evaluate.py) and
`propose` (the spec read from the model: proposal.py). The user's file is imported by their
handlers, in the worker process, never in the parent (guard.py: whatever it does is one line).

The parent imports this module to name a job (`USER.job(...)`, `PROPOSE.job(...)`, run.py). What
a job runs with (the user's code, the binding, every checkpoint library's plug-in) is imported by
its handler as it runs, in the worker, so naming a job loads none of it."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

import ports
from shared.core.spec import ModelSpec
from shared.runtime.job_kinds import JobKind, Output


def user(framework: str, job: dict[str, Any], out: Output) -> None:
    """{"model", "spec", "input": .npy, "framework"?, "layout"?, "output"?, "weights"?, "rules"?,
    "taps"?: bool}."""
    from shared.your_model.evaluate import evaluate
    from shared.your_model.framework import model_class, port_name, user_port, with_variables
    from shared.your_model.guard import build

    spec = ModelSpec.from_json(job["spec"])
    model, held_note = with_variables(build(job["model"], spec), spec)
    found, _ = user_port(model, job.get("framework"))
    if found != port_name(framework):  # the parent's guess was wrong: the object says `found`
        out.report.update(found=found, model_class=model_class(model))
        # A worker of `found` only when its environment (KERAS_BACKEND, MLX_ENABLE_TF32) is not
        # already this one's: nothing is hidden from the user's code (run.USER_CODE_ENV), so
        # otherwise a second worker would build the same model in the same conditions.
        if any(os.environ.get(k) != v for k, v in ports.PORTS[found].env.items()):
            out.report["restart"] = True
            return
    evaluate(model, spec, job, np.load(job["input"], allow_pickle=False), out)
    if held_note:
        out.report["notes"].insert(0, held_note)


USER = JobKind("user", user)


def propose(framework: str, job: dict[str, Any], out: Output) -> None:
    """{"model": FILE.py:NAME, "framework"?}: build the model (its factory takes no spec) and read
    the spec from it."""
    from shared.your_model.guard import build
    from shared.your_model.proposal import propose_spec

    model = build(job["model"], None)  # a factory that takes no spec
    out.report["proposal"] = propose_spec(model, job.get("framework")).to_dict()


PROPOSE = JobKind("propose", propose)
