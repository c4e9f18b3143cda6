"""The worker's job for a user's own model (`--model FILE.py:NAME`): `run_user_job`, whose job
kind, `USER`, shared/teaching/user_model.py declares (it hands in the tables the model's library
names it by, `ModelTables`: the runtime imports no tool). The user's file is imported here, in the
worker process, never in the parent. One job builds the model once and, as asked: binds its
parameters to the canonical tensors (the conventions arrive as table text from the parent; the
port's own table and the model's library's are added here, from the built model), returns them or
loads canonical weights into it, runs it on the probe batch and captures the canonical taps
(timing it is the timing harness's, through `UserPort`).

The user's file is imported and its factory called by `user_guard.build`: whatever they do is
one line, and the launcher is told the phase (`user-import`, `user-build`: each has its own,
shorter time limit, shared.runtime.launch; then `user-bind`, `user-forward`, `user-taps`, which a
timeout names). The framework is read from the object it returns."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

import ports
from shared.core.binding import Binding, bind
from shared.core.mapping import Table
from shared.core.spec import ModelSpec
from shared.core.weights import load_weights
from shared.errors import InputError, PortbenchError
from shared.runtime.job_kinds import Output
from shared.runtime.user_guard import build, user_code
from shared.runtime.worker import one_line, print_phase

USER_FRAMEWORKS = ("keras", "flax", "torch", "mlx")  # Keras first: on torch it is an nn.Module too
# The tables a built model's library names its tensors by (a Transformers 5 model's own names),
# read from the model in the worker: shared/checkpoints' `model_tables`, handed in by the tool that
# runs the job.
ModelTables = Callable[[Any, ModelSpec], list[Table]]


def no_tables(model: Any, spec: ModelSpec) -> list[Table]:
    """No library's tables: the port's and the parent's conventions only."""
    return []


def user_port(model: Any, framework: str | None) -> tuple[str, Any]:
    """(framework, its ports/<fw>/user.py) owning `model`, read from the object; an explicit
    `framework` is never overridden: a model of another framework is one line naming both."""
    if framework:
        module = ports.load_port_part(framework, "user")
        if module.owns(model):
            return port_name(framework), module
    owner = _owner(model)
    if framework:
        what = f"a {owner[0]} model" if owner else "not a model of any framework portbench runs"
        instead = f"--framework {owner[0]}, or no --framework" if owner else "a model of that framework"
        raise InputError(f"--framework {framework}, but --model returned a {type(model).__name__}, {what}; "
                         f"pass {instead}")
    if owner is None:
        raise InputError(f"--model returned a {type(model).__name__}, not a torch.nn.Module, Keras model "
                         "or layer, or nnx.Module")
    return owner


def port_name(entry: str) -> str:
    """The port a registry entry runs ("keras-jax" -> "keras")."""
    return ports.PORTS[entry].module.rsplit(".", 1)[-1]


def model_class(model: Any) -> str:
    """The model's class as `module.Name` (timm.models.vision_transformer.VisionTransformer)."""
    return f"{type(model).__module__}.{type(model).__qualname__}"


def _owner(model: Any) -> tuple[str, Any] | None:
    for name in (f for f in USER_FRAMEWORKS if f in sys.modules):  # a model's framework is imported
        module = ports.load_port_part(name, "user")
        if module.owns(model):
            return name, module
    return None


def conventions(job: dict[str, Any], framework: str, spec: ModelSpec, model: Any = None,
                model_tables: ModelTables = no_tables) -> list[Table]:
    """The port's own transfer table first, then the model's library's, then the parent's (each a
    list of texts, base last)."""
    out: list[Table] = []
    with contextlib.suppress(PortbenchError):  # a port that cannot load here names nothing
        out.append(ports.load_port_part(framework, "transfer").table(spec))
    out += model_tables(model, spec)
    for name, levels, inert in job.get("conventions", []):
        base = None
        for i, text in enumerate(reversed(levels)):  # the last level is the table itself
            base = Table(text, name, base=base, inert=tuple(inert) if i == len(levels) - 1 else ())
        out.append(base)  # type: ignore[arg-type]
    return out


def check_logits(logits: np.ndarray, spec: ModelSpec, batch: int) -> None:
    expected = (batch, spec.derived.outputs)
    if tuple(logits.shape) != expected:
        what = f"num_classes {spec.num_classes}" if spec.num_classes else "the pooled width: no classifier"
        raise InputError(f"your model's forward returns shape {tuple(logits.shape)}, expected {expected} "
                         f"(batch {batch} x {what})")
    if not np.all(np.isfinite(logits)):
        bad = int(logits.size - np.count_nonzero(np.isfinite(logits)))
        raise InputError(f"your model's logits hold {bad} non-finite values (NaN or infinity)")


def run_user_job(framework: str, job: dict[str, Any], out: Output, model_tables: ModelTables) -> None:
    """{"model", "spec", "input": .npy, "framework"?, "layout"?, "output"?, "weights"?, "rules"?,
    "conventions", "taps"?: bool}."""
    spec = ModelSpec.from_json(job["spec"])
    model = build(job["model"], spec)
    found, _ = user_port(model, job.get("framework"))
    if found != port_name(framework):  # the parent's guess was wrong: the object says `found`
        out.report.update(found=found, model_class=model_class(model))
        # A worker of `found` only when its environment (KERAS_BACKEND, MLX_ENABLE_TF32) is not
        # already this one's: nothing is hidden from the user's code (user_model.USER_CODE_ENV), so
        # otherwise a second worker would build the same model in the same conditions.
        if any(os.environ.get(k) != v for k, v in ports.PORTS[found].env.items()):
            out.report["restart"] = True
            return
    evaluate(model, spec, job, np.load(job["input"], allow_pickle=False), out, model_tables)


def evaluate(model: Any, spec: ModelSpec, job: dict[str, Any], images: np.ndarray, out: Output,
             model_tables: ModelTables = no_tables) -> None:
    """The `user` job on a built model; `portbench.check` calls it in the caller's process."""
    fw, module = user_port(model, job.get("framework"))
    out.report.update(framework=fw, model_class=model_class(model))
    print_phase("user-bind")
    params = module.parameters(model)
    found = module.layers(model)
    out.report["layers"] = [{"path": a.path, "kind": a.kind, "params": list(a.params), "settings": a.settings}
                            for a in found]
    binding = bind(spec, {n: v.shape for n, v in params.items()}, found, fw,
                   conventions(job, fw, spec, model, model_tables), job.get("rules"))
    bound = {link.native for link in binding.links}  # all but a convention's inert tensors
    out.report.update({"binding": binding.to_dict(),
                       "param_count": int(sum(v.size for n, v in params.items() if n in bound))})
    if job.get("weights"):
        module.assign(model, binding.to_native(load_weights(job["weights"], spec).tensors))
    else:
        out.arrays.update({f"w/{k}": v for k, v in binding.to_canonical(params, consume=True).items()})
    del params
    layout = job.get("layout") or ("NCHW" if fw == "torch" else "NHWC")
    print_phase("user-forward")
    with user_code(str(job.get("model")), "running the forward"):
        try:
            logits = np.asarray(module.run(model, images, layout, job.get("output")), np.float32)
        except PortbenchError:
            raise
        except Exception as exc:  # whatever the user's forward raises is one line
            raise InputError(f"your model's forward raised {one_line(exc)}") from None
    check_logits(logits, spec, len(images))
    out.arrays["logits"] = logits
    if job.get("taps"):
        print_phase("user-taps")
        paths = tap_paths(binding, found, spec)
        got = module.capture(model, images, layout, list(paths.values()))
        out.arrays.update({f"tap/{tap}": _tokens(got[p], spec) for tap, p in paths.items() if p in got})


def tap_paths(binding: Binding, found: list[Any], spec: ModelSpec) -> dict[str, str]:
    """Canonical tap -> the user's layer whose output it is, through the binding."""
    native = binding.canonical_of()
    owner = {}
    for layer in found:
        for p in layer.params:
            owner.setdefault(p, layer.path)
    taps = {"patch_embed": "patch_embed.kernel"}
    for i in range(spec.depth):
        b = f"blocks.{i}"
        taps |= {f"block{i}.norm1": f"{b}.norm1.scale", f"block{i}.attn": f"{b}.attn.out.kernel",
                 f"block{i}.norm2": f"{b}.norm2.scale", f"block{i}.mlp": f"{b}.mlp.fc2.kernel"}
    if spec.final_norm == "tokens":
        taps["final_norm"] = "final_norm.scale"
    paths = {tap: owner.get(native.get(tensor, ""), "") for tap, tensor in taps.items()}
    return {tap: path for tap, path in paths.items() if path}


def _tokens(value: np.ndarray, spec: ModelSpec) -> np.ndarray:
    """A patch embedding's (B, D, h, w) or (B, h, w, D) output as tokens (B, h*w, D)."""
    if value.ndim == 4:
        channels_first = value.shape[1] == spec.dim and value.shape[-1] != spec.dim
        value = value.reshape(*value.shape[:2], -1).transpose(0, 2, 1) if channels_first else \
            value.reshape(value.shape[0], -1, value.shape[-1])
    return np.ascontiguousarray(value)


class UserPort:
    """The user's model behind the part of the port interface the timing harness calls
    (`shared.measure.phases`): built once, the harness's canonical weights loaded through the
    binding, NumPy images in (the layout change and the copy to the framework are part of each
    forward, as they are of `user.run`), NumPy logits out."""

    device_class = "cpu"

    def __init__(self, job: dict[str, Any], spec: ModelSpec, tensors: dict[str, np.ndarray],
                 model_tables: ModelTables = no_tables) -> None:
        self.spec = spec
        self.model = build(job["model"], spec)
        self.framework, self.module = user_port(self.model, job.get("framework"))
        print_phase("user-bind")
        params = self.module.parameters(self.model)
        found = self.module.layers(self.model)
        binding = bind(spec, {n: v.shape for n, v in params.items()}, found, self.framework,
                       conventions(job, self.framework, spec, self.model, model_tables), job.get("rules"))
        self.count = int(sum(v.size for v in params.values()))
        del params
        self.module.assign(self.model, binding.to_native(tensors))
        print_phase("user-run")  # the timing harness's progress lines name its steps
        self.layout = job.get("layout") or ("NCHW" if self.framework == "torch" else "NHWC")
        self.output = job.get("output")

    def prepare(self, images: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(images, dtype=np.float32)

    def forward(self, images: np.ndarray, train: bool = False) -> np.ndarray:
        return self.module.run(self.model, images, self.layout, self.output)

    def compiled_forward(self) -> Any:
        return self.module.compiled(self.model, self.layout, self.output)

    def sync(self, value: Any = None) -> None:
        """NumPy results are already on the host: nothing is pending."""

    def to_numpy(self, value: Any) -> np.ndarray:
        return np.asarray(value)

    def param_count(self) -> int:
        return self.count
