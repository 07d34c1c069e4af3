"""The lightweight SDK distribution (`orbit-platform-sdk`, from sdk/ in this repository): installed
alone into a fresh virtual environment -- the SDK from the local path, only httpx and pydantic
from the package index -- it runs a worker against the real server, without the server's
dependencies (FastAPI, SQLAlchemy, Kopf, Kubernetes) being there at all."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from orbit_sdk import Client

from ..conftest import ROOT, Tenant

pytestmark = pytest.mark.slow

WORKER = textwrap.dedent(
    """
    from orbit_sdk import Worker

    worker = Worker(queues=["default"], lease_wait_seconds=1, name="light")


    @worker.handler("light.echo")
    def echo(ctx, params):
        return {"light": params}


    if __name__ == "__main__":
        worker.run()
    """
)


@pytest.fixture(scope="module")
def sdk_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    made = tmp_path_factory.mktemp("sdk")
    venv = made / "venv"
    # Built from a copy: setuptools builds in the source tree (sdk/build), and two builds of one
    # tree at once (this fixture on both test processes) collide there ("File exists").
    source = made / "sdk"
    shutil.copytree(ROOT / "sdk", source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    base_python = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base_python, "-m", "venv", str(venv)], check=True, timeout=120)
    subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", str(source)],
        check=True,
        timeout=900,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    return venv


def test_the_sdk_distribution_brings_only_httpx_and_pydantic(sdk_venv: Path) -> None:
    code = (
        "import importlib.util, json, orbit_sdk; print(json.dumps({m: bool(importlib.util."
        "find_spec(m)) for m in ('fastapi', 'sqlalchemy', 'kopf', 'kubernetes', 'uvicorn', "
        "'orbit', 'orbit_store', 'httpx', 'pydantic')}))"
    )
    done = subprocess.run(
        [str(sdk_venv / "bin" / "python"), "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd="/",
        env={"PATH": "/usr/bin:/bin"},
    )
    found = json.loads(done.stdout)
    assert found.pop("httpx") and found.pop("pydantic")
    assert not any(found.values()), found


def test_a_worker_from_the_sdk_alone_runs_tasks_on_a_real_server(
    sdk_venv: Path, tenant: Tenant, tmp_path: Path
) -> None:
    (tmp_path / "lightworker.py").write_text(WORKER)
    env = {"PATH": "/usr/bin:/bin", "ORBIT_SERVER": tenant.server.url, "ORBIT_TOKEN": tenant.token}
    worker = subprocess.Popen(
        [str(sdk_venv / "bin" / "python"), "lightworker.py"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        with Client(tenant.server.url, token=tenant.token) as client:
            task = client.submit(tenant.namespace, handler="light.echo", params={"n": 7})
            done = client.wait(tenant.namespace, task.id, timeout=60)
        assert (done.state, done.result) == ("SUCCEEDED", {"light": {"n": 7}})
    finally:
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err.decode()[-2000:]
