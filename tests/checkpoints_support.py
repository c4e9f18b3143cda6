"""Helpers for the checkpoint tests: randomly initialised third-party models (built by the
libraries themselves, no downloads) and the ports that must reproduce their logits."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ports import create_port
from shared.core import reference
from shared.core.spec import ModelSpec
from shared.core.weights import Tensors

# fp32 logits of two implementations of the same small model (width <= 32, depth 2, logits of
# order 1) differ by summation order only: measured max |diff| 1e-7 .. 1.5e-6 across these
# models, ports and libraries; 5e-6 is the project tolerance for small models. A real mapping
# error (a transposed kernel, eps 1e-6 vs 1e-5, tanh vs exact GELU, a shifted position row)
# moves logits by >= 1e-4 here.
ATOL = 5e-6
PORTS = ("torch", "keras", "flax")  # keras on TensorFlow in-process; other backends: subprocesses


def perturbed(model: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Libraries initialise biases to 0 and LayerNorm scales to 1, which would hide a swapped or
    transposed bias; add seeded noise to every parameter, then switch to eval mode."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(0.2 * torch.randn(param.shape, generator=generator))
    return model.eval()


def load_exported_hf(spec: ModelSpec, tensors: Tensors, folder: Path) -> torch.nn.Module:
    """`convert --to hf`'s folder, loaded as a user loads it: the installed Transformers'
    `from_pretrained` of the class its config names, with nothing missing, unexpected or
    mismatched in the load report (a tower left randomly initialised by a silent key mismatch is a
    known Transformers 5 failure)."""
    import transformers

    from shared.checkpoints import export_checkpoint

    export_checkpoint("hf", spec, tensors, folder)
    model_class = getattr(transformers, json.loads((folder / "config.json").read_text())["architectures"][0])
    model, report = model_class.from_pretrained(str(folder), output_loading_info=True)
    keys = ("missing_keys", "unexpected_keys", "mismatched_keys")
    problems = {key: report[key] for key in keys if report[key]}
    assert not problems, f"{model_class.__name__}.from_pretrained({str(folder)!r}): {problems}"
    return model.eval()


def state_dict(model: torch.nn.Module) -> dict[str, np.ndarray]:
    return {name: value.detach().numpy().copy() for name, value in model.state_dict().items()}


def nchw(images: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(images.transpose(0, 3, 1, 2)))


def library_logits(model: torch.nn.Module, images: np.ndarray) -> np.ndarray:
    """The output each library calls its result: timm's forward (logits, or the pooled vector with
    num_classes=0); Transformers' `logits`, or a vision tower's `pooler_output`."""
    with torch.no_grad():
        out = model(pixel_values=nchw(images)) if _is_hf(model) else model(nchw(images))
    if not _is_hf(model):
        return out.numpy()
    return (out.logits if getattr(out, "logits", None) is not None else out.pooler_output).numpy()


def _is_hf(model: torch.nn.Module) -> bool:
    return type(model).__module__.startswith("transformers.")


def images_for(spec: ModelSpec, seed: int = 7, batch: int = 2) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((batch, spec.image_height, spec.image_width, spec.channels)).astype(np.float32)


def assert_ports_match(spec: ModelSpec, tensors: Tensors, images: np.ndarray, expected: np.ndarray,
                       ports: tuple[str, ...] = PORTS, atol: float = ATOL) -> dict[str, float]:
    """The float64 reference and every port reproduce `expected` (a library's own logits) within
    `atol` (a tower's outputs of a larger scale: trace's budget, the tolerance times that scale)."""
    errors = {"reference": float(np.abs(reference.forward(spec, tensors, images) - expected).max())}
    for name in ports:
        port = create_port(name, spec)
        port.load(tensors)
        errors[name] = float(np.abs(port.logits(images) - expected).max())
    bad = {k: v for k, v in errors.items() if not v <= atol}
    assert not bad, f"logits differ from the library's by more than {atol}: {errors}"
    return errors


def assert_same_tensors(a: Tensors, b: Tensors) -> None:
    assert list(a) == list(b) or set(a) == set(b), sorted(set(a) ^ set(b))
    for name in a:
        assert a[name].shape == b[name].shape, name
        assert np.array_equal(a[name], b[name]), name


def live_trace(model: torch.nn.Module, spec: ModelSpec | None = None) -> Any:
    """`trace --model` of a library's object in this process: every tap its layers give (through its
    library's caller, for a patch batch) against the reference's on the probe batch, a `PortTrace`
    (no `spec`: the one read from the model)."""
    from shared.core.inputs import probe_batch
    from shared.runtime.job_kinds import Output
    from shared.teaching.user_check import user_trace
    from shared.your_model.evaluate import evaluate
    from shared.your_model.proposal import propose_spec
    from shared.your_model.run import user_job, user_run

    spec = spec or propose_spec(model).spec
    images, out = probe_batch(spec), Output()
    evaluate(model.eval(), spec, user_job(spec, taps=True), images, out)
    return user_trace(user_run(spec, out.report, out.arrays), images)
