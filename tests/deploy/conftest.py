"""Fixtures for the deployment artefacts: the real helm, promtool and prometheus binaries, as
scripts/ensure-tools installs them (helm in .tools/bin/, the others from Debian's prometheus)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "orbit"
RULES = REPO / "deploy" / "prometheus" / "orbit-rules.yaml"
RULE_TESTS = REPO / "deploy" / "prometheus" / "orbit-rules.test.yaml"
RUNBOOKS = REPO / "docs" / "runbooks"
KUBERNETES = "1.33"


def tool(name: str) -> str:
    """The binary, from .tools/bin or PATH; a clear failure (not a skip) when it is missing."""
    local = REPO / ".tools" / "bin" / name
    if local.is_file():
        return str(local)
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} not found: run scripts/ensure-tools (scripts/test does)")
    return found


Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """Run helm offline with a throw-away HOME (no repositories, no cluster)."""
    home = tmp_path_factory.mktemp("helm-home")
    binary = tool("helm")
    env = {**os.environ, "HOME": str(home), "HELM_CACHE_HOME": str(home / "cache")}
    env.pop("KUBECONFIG", None)

    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [binary, *args], capture_output=True, text=True, env=env, timeout=120
        )
        if check and result.returncode != 0:
            pytest.fail(f"helm {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
        return result

    return run


@pytest.fixture(scope="session")
def promtool() -> Run:
    binary = tool("promtool")

    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run([binary, *args], capture_output=True, text=True, timeout=120)
        if check and result.returncode != 0:
            pytest.fail(f"promtool {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
        return result

    return run
