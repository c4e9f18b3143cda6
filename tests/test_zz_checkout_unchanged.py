"""Runs last (conftest.py orders it): the session left the checkout exactly as it found it."""

from __future__ import annotations

from tests import checkout_guard


def test_the_suite_left_the_checkout_unchanged() -> None:
    changed = checkout_guard.changes()
    assert not changed, "the test session wrote into the checkout:\n" + "\n".join(changed)
