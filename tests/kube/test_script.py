"""scripts/k8s-api-server itself: a second server starts beside the session's from the cache,
answers kubectl through the kubeconfig it writes and stops leaving nothing running; without the
network the first `start` (which builds) fails with a message that says so."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import yaml

from .conftest import SCRIPT, Cluster, kubectl_binary


def script(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


def pids(directory: Path) -> list[int]:
    return [int(p.read_text()) for p in directory.glob("*.pid")]


def running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_start_env_and_stop_a_second_server(cluster: Cluster, tmp_path: Path) -> None:
    directory = tmp_path / "second"
    started = script("start", str(directory))
    assert started.returncode == 0, started.stderr
    assert started.stdout.strip() == f"KUBECONFIG={directory}/kubeconfig"
    started_pids = pids(directory)
    try:
        assert len(started_pids) == 2 and all(running(p) for p in started_pids)
        assert script("env", str(directory)).stdout.strip() == (
            f"export KUBECONFIG={directory}/kubeconfig"
        )
        kubeconfig = yaml.safe_load((directory / "kubeconfig").read_text())
        assert kubeconfig["clusters"][0]["cluster"]["server"] != cluster.server  # its own
        version = subprocess.run(
            [kubectl_binary(), "version", "-o", "yaml"],
            env={**os.environ, "KUBECONFIG": str(directory / "kubeconfig")},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert version.returncode == 0, version.stderr
        assert yaml.safe_load(version.stdout)["serverVersion"]["gitVersion"].startswith("v1.")
        again = script("start", str(directory))
        assert again.returncode == 1 and "already running" in again.stderr
    finally:
        stopped = script("stop", str(directory))
    assert stopped.returncode == 0, stopped.stderr
    assert not any(running(p) for p in started_pids)


def test_without_the_network_a_first_build_fails_saying_so(tmp_path: Path) -> None:
    offline = {
        "ORBIT_CACHE_DIR": str(tmp_path / "empty-cache"),
        "ORBIT_DEBIAN_MIRROR": "http://127.0.0.1:9/debian",  # nothing listens on the discard port
    }
    started = script("start", str(tmp_path / "never"), env=offline)
    assert started.returncode == 1
    assert "cannot reach the Debian archive" in started.stderr, started.stderr
    assert "building" not in started.stderr  # it stops there: nothing is built or installed
    assert not (tmp_path / "empty-cache" / "k8s-api-server" / "builds").exists()
    assert not (tmp_path / "never" / "apiserver.pid").exists()
