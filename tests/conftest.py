"""Shared fixtures. Keras runs on the TensorFlow backend in the test process; other Keras
backends are exercised in subprocesses."""

from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("USE_TF", "0")
os.environ.setdefault("USE_FLAX", "0")

# Import torch's compiler stack before TensorFlow: once TensorFlow is loaded, importing triton
# (which torch.compile and torch.optim import lazily) crashes the process. The tests load all
# three frameworks in one process; compare.py never does (one framework per subprocess).
import importlib.util

if importlib.util.find_spec("torch") is not None:
    import torch._dynamo  # noqa: F401


# ---- the precision ladder runs in the background (tests/ladder_support.py) ------------------------
def pytest_collection_modifyitems(session, config, items) -> None:
    """Start the ladder's workers once its tests are collected, and run those tests last."""
    import ladder_support

    ladder_items = [item for item in items if item.path.name == ladder_support.MODULE]
    if ladder_items:
        items[:] = [item for item in items if item.path.name != ladder_support.MODULE] + ladder_items
        ladder_support.start()


def pytest_unconfigure(config) -> None:
    import sys

    if "ladder_support" in sys.modules:
        sys.modules["ladder_support"].stop()
