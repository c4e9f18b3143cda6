"""Bad `--model` input: each is one `error:` line naming the problem, exit 2, no traceback, and
every file in the folder byte-identical afterwards (tests/adversarial.py's `refused`; the models
that fail only once run are `compare.py` processes in the background, checked the same way)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from tests import background
from tests.adversarial import Outcome, refused, snapshot

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SPEC = ("--spec", "mnist-vit-small")
# A bindable model (the example's) whose forward is replaced: the failure is in the forward.
SUBCLASS = f"""
import sys
sys.path.insert(0, {str(EXAMPLES)!r})
import torch
from torch_mha_vit import MnistViT


class Broken(MnistViT):
    def forward(self, images):
        logits = super().forward(images)
        {{body}}


def build(spec):
    return Broken(spec)
"""

CASES = {
    "syntax_error": ("def build(:\n", "syntax error at line 1"),
    "raises_on_import": ("raise RuntimeError('no GPU here')\n",
                         "importing it raised RuntimeError: no GPU here"),
    "name_missing": ("x = 1\n", "the module has no 'build'"),
    "not_callable": ("build = 3\n", "int is not callable"),
    "not_a_model": ("def build():\n    return 42\n", "returned a int, not a torch.nn.Module"),
    "factory_raises": ("def build(spec):\n    raise ValueError('bad width')\n",
                       "calling it raised ValueError: bad width"),
    # Transformers' ImportErrors start with a newline: the first non-empty line is quoted
    "message_starts_with_a_newline": ("def build():\n    raise ImportError('\\nneeds torch\\nsee docs')\n",
                                      "calling it raised ImportError: needs torch"),
    "forward_raises": (SUBCLASS.format(body="raise RuntimeError('shape mismatch in my block')"),
                       "forward raised RuntimeError: shape mismatch in my block"),
    "wrong_shape": (SUBCLASS.format(body="return logits[:, :3]"), "returns shape (4, 3), expected (4, 10)"),
    "nan_logits": (SUBCLASS.format(body="return logits * float('nan')"), "40 non-finite values"),
    # a parameter the forward reads (one it never reads is set aside as inert, not refused)
    "unbindable": (SUBCLASS.format(body="return logits + self.extra.sum()").replace(
        "    return Broken(spec)", "    m = Broken(spec)\n    m.extra = torch.nn.Parameter(torch.ones(3))\n"
                                  "    return m"), "unused (extra)"),
}


# The model is built, bound and run before it is refused: seconds of a torch worker each, which the
# pytest process would spend waiting, so these run as `compare.py` processes in the background.
RUN_CASES = ("forward_raises", "wrong_shape", "nan_logits", "unbindable")


@pytest.mark.parametrize("case", [c for c in CASES if c not in RUN_CASES])
def test_a_bad_model_is_refused_in_one_line(tmp_path, case: str) -> None:
    text, expect = CASES[case]
    (tmp_path / "mine.py").write_text(text)
    refused(tmp_path, "verify", "--model", "mine.py:build", *SPEC, expect=expect)


@background.task("bad-models-run", "test_user_bad_input.py::test_a_model_that_fails_when_run")
def bad_models_run(start: background.Start) -> dict[str, tuple[Outcome, dict[str, str], dict[str, str]]]:
    """Each RUN_CASES model's `verify --model` in a folder of its own: (outcome, the folder's files
    before, after)."""
    runs = {}
    for case in RUN_CASES:
        folder = Path(tempfile.mkdtemp(prefix=f"portbench-bad-model-{case}-"))
        (folder / "mine.py").write_text(CASES[case][0])
        before = snapshot(folder)
        outcome = background.compare_py(start, "verify", "--model", "mine.py:build", *SPEC, cwd=folder)
        runs[case] = (outcome, before, snapshot(folder))
    return runs


@pytest.mark.parametrize("case", RUN_CASES)
def test_a_model_that_fails_when_run_is_refused_in_one_line(case: str) -> None:
    outcome, before, after = background.result("bad-models-run")[case]
    assert outcome.code == 2, (outcome.code, outcome.stderr)
    assert CASES[case][1] in outcome.error, outcome.error
    assert after == before, "a file was changed, added or left behind"


def test_a_missing_file_and_a_malformed_reference_are_refused_before_any_worker(tmp_path) -> None:
    refused(tmp_path, "verify", "--model", "nope.py:build", *SPEC, expect="file 'nope.py' does not exist")
    refused(tmp_path, "verify", "--model", "mine.py", *SPEC, expect="expected FILE.py:NAME")


def test_a_factory_that_hangs_is_killed_at_the_timeout(tmp_path) -> None:
    (tmp_path / "slow.py").write_text("import time\n\ndef build():\n    time.sleep(600)\n")
    refused(tmp_path, "verify", "--model", "slow.py:build", *SPEC, "--timeout", "5",
            expect="timed out after 5 s while building your model; worker killed")


def test_a_bad_rename_file_and_an_existing_json_are_refused(tmp_path) -> None:
    (tmp_path / "mine.py").write_text("def build():\n    return 42\n")
    (tmp_path / "rules.toml").write_text("[map\n")
    refused(tmp_path, "verify", "--model", "mine.py:build", *SPEC, "--map", "rules.toml",
            expect="malformed TOML")
    (tmp_path / "out.json").write_text("mine\n")
    refused(tmp_path, "verify", "--model", "mine.py:build", *SPEC, "--json", "out.json", expect="out.json")


def test_diagnose_needs_exactly_one_of_logits_and_model(tmp_path) -> None:
    refused(tmp_path, "diagnose", *SPEC, expect="exactly one of --logits")
