"""The Keras functional and flax.nnx examples (examples/*.py), written differently from ports/,
through the commands a porter runs: canonical weights load into the mistaken model, whose planted
mistake verify names from the modules and diagnose explains; trace binds the model's own
parameters by structure and finds the mistake at the right tensor. (That the correct example
matches the reference is tests/test_user_models.py's in-process proof; a
CLI run of it would repeat it in a worker for 10-13 s each.)"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from shared.core.presets import get_preset
from shared.core.weights import init_weights, save_weights
from tests import background
from tests.adversarial import Outcome

ROOT = Path(__file__).resolve().parent.parent
SPEC = "mnist-vit-small"
EXAMPLES = {  # framework -> (file, what the spec check says, where trace finds the mistake)
    "keras": ("keras_functional_vit.py", "layer_norm_eps: your model 0.001", "block0.norm1"),
    "flax": ("flax_nnx_vit.py", "activation: your model gelu_tanh", "block0.mlp"),
}


def model(framework: str, factory: str) -> str:
    return f"{ROOT / 'examples' / EXAMPLES[framework][0]}:{factory}"


@background.task("user-examples", "test_user_examples.py::")
def user_examples(start: background.Start) -> dict[str, tuple[Outcome, Outcome]]:
    """Each example's mistaken model through verify (canonical weights) and trace, in the
    background (tests/background.py): framework -> (verify, trace)."""
    spec = get_preset(SPEC)
    weights = Path(tempfile.mkdtemp(prefix="portbench-examples-")) / "w.safetensors"
    save_weights(weights, spec, init_weights(spec, 3))
    return {framework: (
        background.compare_py(start, "verify", "--model", model(framework, "build_with_mistake"), "--spec",
                              SPEC, "--weights", weights),
        background.compare_py(start, "trace", "--model", model(framework, "build_with_mistake"), "--spec",
                              SPEC)) for framework in EXAMPLES}


@pytest.mark.parametrize("framework", EXAMPLES)
def test_the_planted_mistake_with_canonical_weights_is_named(framework: str) -> None:
    outcome = background.result("user-examples")[framework][0]
    assert outcome.code == 1, outcome.stdout + outcome.stderr
    assert EXAMPLES[framework][1] in outcome.stdout
    assert "diagnose: gap" in outcome.stdout and "falls to" in outcome.stdout


@pytest.mark.parametrize("framework", EXAMPLES)
def test_trace_finds_the_mistake_where_it_is(framework: str) -> None:
    outcome = background.result("user-examples")[framework][1]
    assert outcome.code == 1
    assert f"yours ({framework}): first divergence at {EXAMPLES[framework][2]}:" in outcome.stdout
