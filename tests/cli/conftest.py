"""Helpers for CLI tests that need no server: run `orbit` as a user would (a subprocess)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ORBIT = str(Path(sys.executable).with_name("orbit"))

Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def orbit() -> Run:
    """`orbit ARGS…` with no ORBIT_* variables from the caller's environment."""

    def run(
        *args: str, env: dict[str, str] | None = None, **kw: object
    ) -> subprocess.CompletedProcess[str]:
        clean = {k: v for k, v in os.environ.items() if not k.startswith("ORBIT_")}
        return subprocess.run(
            [ORBIT, *args],
            cwd=ROOT,
            env={**clean, **(env or {})},
            capture_output=True,
            text=True,
            timeout=60,
            **kw,  # type: ignore[arg-type]
        )

    return run
