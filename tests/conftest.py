"""Shared fixtures. Keras runs on the TensorFlow backend in the test process; other Keras
backends are exercised in subprocesses."""

from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("USE_TF", "0")
os.environ.setdefault("USE_FLAX", "0")
# torch.compile's C++ compiles in the process that asked, not in a pool of compile workers, each of
# which imports torch: on CI's two cores the pool cost ~7 s of CPU per process that compiles
# (measured on tests/test_user_patch_batches.py: 34 s of CPU with the pool, 27 s without), and the
# generated code is the same. The workers the tests start inherit it.
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")

# Import torch's compiler stack before TensorFlow: once TensorFlow is loaded, importing triton
# (which torch.compile and torch.optim import lazily) crashes the process. The tests load all
# the frameworks in one process; compare.py never does (one framework per subprocess).
import importlib.util

import pytest

if importlib.util.find_spec("torch") is not None:
    import torch._dynamo  # noqa: F401

# ---- Ctrl-C reaches the commands the tests start ------------------------------------------------
# A shell starts a background job (`make test &`, nohup) with SIGINT ignored, and every process
# inherits that: the tests that send SIGINT to `compare.py` would then wait on a command that,
# rightly, ignores it. The suite's own process takes SIGINT back, so its children start with it.
import signal

if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


# ---- ast.parse, one thread at a time -----------------------------------------------------------
# CPython 3.11 keeps the AST converter's recursion counter per interpreter, not per thread, so two
# threads inside `ast.parse` at once fail with "SystemError: AST constructor recursion depth
# mismatch" (python/cpython#106905). The background runner's threads parse too: NumPy reads every
# .npy header with `ast.literal_eval`, which calls `ast.parse`. One lock around it keeps the suite's
# own parsing (the parallel-text and layering tests, pytest's assertion rewriting) correct.
import ast
import threading

_AST_LOCK = threading.RLock()
_ast_parse = ast.parse


def _parse_one_at_a_time(*args, **kwargs):
    with _AST_LOCK:
        return _ast_parse(*args, **kwargs)


ast.parse = _parse_one_at_a_time


# ---- Transformers 4.x's classes, for the workers a test starts ----------------------------------
@pytest.fixture
def transformers4(monkeypatch) -> None:
    """Transformers' TensorFlow and Flax ViT classes, which 4.x alone has, in the workers the test
    starts: where the installed Transformers is 5, its side directory first on their PYTHONPATH
    (tests/background.py's `transformers4_environ`, which a background task uses too)."""
    from tests.background import transformers4_environ

    path = transformers4_environ().get("PYTHONPATH")
    if path:
        monkeypatch.setenv("PYTHONPATH", path)


# ---- the checkout is left as found (tests/checkout_guard.py), and no temporary file outlives the run --
SCRATCH: list[str] = []  # this process's root for every tempfile the tests and their tasks make


def pytest_sessionstart(session) -> None:
    """The checkout recorded; `tempfile` pointed at one folder of this run, removed when it ends
    (pytest_unconfigure): the tests' and background tasks' mkdtemp folders, each one run's weight
    files and results (hundreds of MB for the large presets), and those of a CLI run killed at the
    session's end would otherwise stay in /tmp."""
    import tempfile

    from tests import checkout_guard

    checkout_guard.record()
    SCRATCH.append(tempfile.mkdtemp(prefix="portbench-tests-"))
    tempfile.tempdir = os.environ["TMPDIR"] = SCRATCH[0]  # TMPDIR: the CLI runs and workers it starts too


# ---- the fast tier (`make check`, `pytest -m fast`) --------------------------------------------
# The core units (spec, records, weights, mapping, equivalence, timing statistics, schedules, the
# layering and parallel-text rules, the one-line refusals that need no framework run) and one
# preset in each port: under 3 minutes on 2 cores. CI runs everything.
FAST_MODULES = {
    "test_spec.py", "test_core_record.py", "test_core_mapping.py", "test_weights.py",
    "test_layering.py", "test_ports_parallel.py", "test_runtime_equivalence.py",
    "test_ports_parallel_text.py",
    "test_timing_units.py", "test_training_schedule.py", "test_training_spec_data.py",
    "test_user_binding.py", "test_teaching_mutations.py", "test_teaching_lessons.py",
    "test_teaching_diagnose.py", "test_bad_input_decoding.py", "test_bad_input_options.py",
    "test_bad_input_allocation.py", "test_bad_input_reports.py", "test_bad_input_precision.py",
    "test_bad_input_unwritable.py", "test_zz_checkout_unchanged.py",
}
FAST_PRESET = "quadrant"  # test_ports.py's every-port tests at this one preset


def is_fast(item) -> bool:
    if item.path.name in FAST_MODULES:
        return True
    params = getattr(getattr(item, "callspec", None), "params", {})
    return item.path.name == "test_ports.py" and params.get("preset") == FAST_PRESET


@pytest.hookimpl(tryfirst=True)  # before `-m fast` deselects by the marker
def pytest_collection_modifyitems(session, config, items) -> None:
    for item in items:
        if is_fast(item):
            item.add_marker(pytest.mark.fast)


# ---- worker runs in the background (tests/background.py) ------------------------------------------
def pytest_collection_finish(session) -> None:
    """Once the tests to run are known (after deselection): start the background workers they
    read, and run those tests last, just before the check that the checkout is unchanged."""
    from tests import background, checkout_guard

    def position(item) -> int:
        return 2 if item.path.name == checkout_guard.MODULE else int(background.reads_a_task(item.nodeid))

    session.items.sort(key=position)  # stable: the rest keep their order
    background.start([item.nodeid for item in session.items])


def pytest_runtest_logfinish(nodeid: str, location) -> None:
    """When the last test that reads no background task ended: the summary sets it beside the
    background's spans, so it shows which of the two a run's wall time waited on."""
    from tests import background, checkout_guard

    if not background.reads_a_task(nodeid) and checkout_guard.MODULE not in nodeid:
        background.mark_in_process_end()


def pytest_terminal_summary(terminalreporter) -> None:
    from tests import background

    for line in background.summary():
        terminalreporter.write_line(line)


def pytest_unconfigure(config) -> None:
    import sys

    if "tests.background" in sys.modules:
        sys.modules["tests.background"].stop()  # its processes first: they may write into the scratch
    if SCRATCH:
        import shutil
        import tempfile

        tempfile.tempdir = None
        shutil.rmtree(SCRATCH.pop(), ignore_errors=True)
