"""Waiting for something another process does: poll until it holds, fail saying what did not
happen (the operator tiers, tests/operator and tests/kube)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

# Polls return as soon as their condition holds; only a failure waits this long (a loaded CI
# machine runs two test processes beside a chaos run).
WAIT_SECONDS = 90.0


def wait_for(what: str, check: Callable[[], T], timeout: float = WAIT_SECONDS) -> T:
    """Poll ``check`` until it returns something truthy; fail with ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = check()
        except AssertionError as exc:
            last = exc
        else:
            if last:
                return last
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout}s (last: {last!r})")
        time.sleep(0.1)
