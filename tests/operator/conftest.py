"""Operator fixtures: the emulated Kubernetes API (KMock subclass, kube_emulator.py) with Orbit's
CRDs, and the real operator (``kopf run -m orbit_operator --standalone``) in
KopfRunner's thread against MariaDB, once per session. Each test works in its own namespace, so
its rows in the shared database are its own. Tests drive the API over HTTP as kubectl would and
assert by polling with a deadline.

What the emulator is not: it stores objects without Kubernetes' schema, defaulting, CEL or
admission checks and runs no controllers (a Deployment gets no pods; tests set their status). The
operator's own admission is what refuses bad specs here. tests/kube runs the operator against a
real API server for custom resources; this tier stays for what that server cannot serve: Secrets
(Credential), Deployments (WorkerPool), pods (registration) and Events.

Set ORBIT_TEST_OPERATOR_LOG=PATH to keep Kopf's verbose log of the session. A failing test
shows the operator's last log lines (INFO and up) beside its own output.
"""

from __future__ import annotations

import logging
import os
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import kopf
import pytest
import sqlalchemy as sa
import yaml
from kopf.testing import KopfRunner

# The tests import these from here, with the fixtures.
from kube_client import ORBIT as ORBIT
from kube_client import Kube
from kube_client import orbit_resource as orbit_resource
from kube_client import secret as secret
from kube_emulator import EmulatorThread
from own_mariadb import free_port
from polling import wait_for

ROOT = Path(__file__).resolve().parents[2]
CRD_DIR = ROOT / "crds"
LOGIN_MODULE = Path(__file__).with_name("kopf_login.py")
# Short intervals so the timers (resync, autoscale) and retries show within a test's deadline.
RESYNC_SECONDS = "1"
RETRY_SECONDS = "1"
SERVER_URL = "http://orbit.test:8080"
OPERATOR_LOG_TAIL = 80
OPERATOR_LOGGERS = ("kopf", "orbit_operator", "orbit")


class Running:
    """What the operator tests started, stopped (last first) as soon as they are over rather
    than at the end of the whole session: the rest of the suite should not share the machine
    with a busy operator."""

    def __init__(self) -> None:
        self._stops: list[Callable[[], None]] = []

    def add(self, stop: Callable[[], None]) -> None:
        self._stops.append(stop)

    def stop_all(self) -> None:
        while self._stops:
            self._stops.pop()()


RUNNING = Running()


@pytest.hookimpl(tryfirst=True)  # before xdist reads the group
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under ``pytest -n`` (xdist, ``--dist loadgroup``) the operator tests run on one process,
    one after another: the emulator and the operator are shared by them and stopped when the
    run leaves this directory (below)."""
    here = Path(__file__).parent
    for item in items:
        if item.path.parent == here:
            item.add_marker(pytest.mark.xdist_group("operator"))


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    if nextitem is None or nextitem.path.parent != item.path.parent:
        RUNNING.stop_all()


def write_kubeconfig(path: Path, server: str) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "emulator", "cluster": {"server": server}}],
                "users": [{"name": "test", "user": {"token": "test"}}],
                "contexts": [{"name": "test", "context": {"cluster": "emulator", "user": "test"}}],
                "current-context": "test",
            }
        )
    )
    return path


def start_api() -> EmulatorThread:
    """An emulated API server with Orbit's CRDs (from crds/)."""
    api = EmulatorThread().start()
    client = Kube(api.url)
    for path in sorted(CRD_DIR.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                client.create(doc)
    client.http.close()
    return api


@pytest.fixture(scope="session")
def kube_api() -> Iterator[EmulatorThread]:
    """The emulated API server with Orbit's CRDs."""
    api = start_api()
    RUNNING.add(api.stop)
    yield api
    RUNNING.stop_all()


@pytest.fixture(scope="session")
def operator_ports() -> dict[str, int]:
    return {"liveness": free_port(), "metrics": free_port()}


@pytest.fixture(scope="session")
def operator(
    kube_api: EmulatorThread,
    mariadb_url: str,
    operator_ports: dict[str, int],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[KopfRunner]:
    """`kopf run -A --standalone -m orbit_operator` against the emulator and MariaDB."""
    kubeconfig = write_kubeconfig(tmp_path_factory.mktemp("operator") / "kubeconfig", kube_api.url)
    env = {
        "KUBECONFIG": str(kubeconfig),
        "ORBIT_TEST_KUBE_URL": kube_api.url,
        "ORBIT_DATABASE_URL": mariadb_url,
        "ORBIT_SERVER_URL": SERVER_URL,
        "ORBIT_OPERATOR_RESYNC_SECONDS": RESYNC_SECONDS,
        "ORBIT_OPERATOR_AUTOSCALE_SECONDS": RESYNC_SECONDS,
        "ORBIT_OPERATOR_RETRY_SECONDS": RETRY_SECONDS,
        "ORBIT_OPERATOR_METRICS_PORT": str(operator_ports["metrics"]),
        "ORBIT_OPERATOR_METRICS_HOST": "127.0.0.1",
    }
    mp = pytest.MonkeyPatch()
    RUNNING.add(mp.undo)
    for key, value in env.items():
        mp.setenv(key, value)
    # Kopf imports the handlers into the fresh registry only if they are not imported yet.
    for name in [m for m in sys.modules if m.split(".")[0] == "orbit_operator"]:
        del sys.modules[name]
    liveness = f"http://127.0.0.1:{operator_ports['liveness']}/healthz"
    args = ["run", "-A", "--standalone", f"--liveness={liveness}"]
    if os.environ.get("ORBIT_TEST_OPERATOR_LOG"):
        args.append("--verbose")
    args += ["-m", "orbit_operator", str(LOGIN_MODULE)]
    runner = KopfRunner(args, registry=kopf.OperatorRegistry(), timeout=60)
    runner.__enter__()
    _keep_operator_log(tmp_path_factory.mktemp("operator-log") / "operator.log")

    def stop() -> None:
        runner.__exit__(None, None, None)
        log = os.environ.get("ORBIT_TEST_OPERATOR_LOG")
        if log:
            Path(log).write_text(runner.output)

    RUNNING.add(stop)
    wait_for("the operator's liveness probe", lambda: _alive(liveness), timeout=30)
    yield runner
    RUNNING.stop_all()


class _OperatorLog:
    """Where the running operator's log goes (KopfRunner's own output is only read at exit)."""

    path: Path | None = None


def _keep_operator_log(path: Path) -> None:
    handler = logging.FileHandler(path)
    handler.setLevel(logging.INFO)
    handler.setFormatter(
        logging.Formatter(
            "%(asctime)s %(levelname)s %(name)s %(k8s_ref)s %(message)s", defaults={"k8s_ref": ""}
        )
    )
    for name in OPERATOR_LOGGERS:
        logging.getLogger(name).addHandler(handler)
    _OperatorLog.path = path

    def forget() -> None:
        for name in OPERATOR_LOGGERS:
            logging.getLogger(name).removeHandler(handler)
        handler.close()
        _OperatorLog.path = None

    RUNNING.add(forget)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    path = _OperatorLog.path
    if report.failed and call.when == "call" and path is not None and path.exists():
        tail = path.read_text(errors="replace").splitlines()[-OPERATOR_LOG_TAIL:]
        report.sections.append(("operator log (last lines)", "\n".join(tail)))


def _alive(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture
def kube(kube_api: EmulatorThread, operator: KopfRunner) -> Iterator[Kube]:
    """The API client, with the operator running."""
    client = Kube(kube_api.url)
    yield client
    client.http.close()


@pytest.fixture
def namespace() -> str:
    return f"op-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def engine(mariadb_engine: sa.Engine) -> sa.Engine:
    return mariadb_engine
