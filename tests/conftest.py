"""Shared fixtures. Keras runs on the TensorFlow backend in the test process; other Keras
backends are exercised in subprocesses."""

from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("USE_TF", "0")
os.environ.setdefault("USE_FLAX", "0")
