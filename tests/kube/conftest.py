"""The `kube` tier: Orbit against a real Kubernetes API server for custom resources
(k8s.io/apiextensions-apiserver and etcd, started by ``scripts/k8s-api-server``; once per session).

The server judges what an emulator cannot: structural schemas, defaulting, CEL rules, printer
columns, the status subresource, finalizers and resource versions. It has no core API (Secrets,
Pods, Deployments, Events, Leases): what needs those stays in tests/operator (KMock).

The first run builds the server (minutes; cached in ~/.cache/orbit). When it cannot be built or
started the tests fail, never skip, unless ORBIT_SKIP_KUBE_TESTS=1 says to (refused under CI=true).
The tests run on one xdist process, one after another, sharing the server.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
import yaml
from kube_client import ORBIT, Kube, path_of, plural_of
from kube_client import orbit_resource as orbit_resource
from own_mariadb import free_port
from polling import wait_for

from orbit_store.db import create_store_engine

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "k8s-api-server"
ORBIT_CLI = str(Path(sys.executable).with_name("orbit"))
CRD_DIR = ROOT / "crds"
SKIP_ENV = "ORBIT_SKIP_KUBE_TESTS"
# The first build takes minutes; a cached one starts in seconds.
START_SECONDS = 3600
# Modules whose tests start, stop or kill operators of their own.
OWN_OPERATORS = ("test_ordering.py", "test_restart.py")


@pytest.hookimpl(tryfirst=True)  # before xdist reads the group
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks the tier's tests; the modules that run operators of their own go last, so the
    shared operator starts once."""
    here = Path(__file__).parent
    items.sort(key=lambda item: item.path.name in OWN_OPERATORS and here in item.path.parents)
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.kube)
            item.add_marker(pytest.mark.xdist_group("kube"))


def kubectl_binary() -> str:
    local = ROOT / ".tools" / "bin" / "kubectl"  # scripts/ensure-tools
    found = str(local) if local.exists() else shutil.which("kubectl")
    if found is None:
        pytest.fail("kubectl is needed: run scripts/ensure-tools")
    return found


@dataclass(frozen=True)
class Cluster:
    """The running API server: its kubeconfig, kubectl, and a small HTTP client for polling."""

    kubeconfig: Path
    server: str
    pki: Path

    def kubectl(
        self, *args: str, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [kubectl_binary(), *args],
            env={**os.environ, "KUBECONFIG": str(self.kubeconfig)},
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: {done.stderr or done.stdout}")
        return done

    def tls(self) -> ssl.SSLContext:
        """The server's CA and the admin's client certificate."""
        context = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        context.load_cert_chain(str(self.pki / "admin.crt"), str(self.pki / "admin.key"))
        return context

    def http(self) -> httpx.Client:
        return httpx.Client(base_url=self.server, verify=self.tls(), timeout=30)


def _start(directory: Path) -> Cluster:
    started = subprocess.run(
        [str(SCRIPT), "start", str(directory)],
        capture_output=True,
        text=True,
        timeout=START_SECONDS,
    )
    if started.returncode != 0:
        pytest.fail(
            "scripts/k8s-api-server could not build or start the API server; the kube tests "
            f"cannot run ({SKIP_ENV}=1 skips them on a developer's machine):\n"
            f"{started.stderr[-4000:]}",
            pytrace=False,
        )
    kubeconfig = directory / "kubeconfig"
    server = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    return Cluster(kubeconfig, server, directory / "pki")


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The API server and etcd, with Orbit's CRDs applied server-side and established."""
    if os.environ.get(SKIP_ENV) == "1":
        if os.environ.get("CI") == "true":
            pytest.fail(f"{SKIP_ENV}=1 is for developers' machines; CI runs the kube tests")
        pytest.skip(f"{SKIP_ENV}=1: the real API server tier is skipped")
    directory = tmp_path_factory.mktemp("k8s-api-server")
    running = _start(directory)
    try:
        running.kubectl("apply", "--server-side", "-f", str(CRD_DIR))
        running.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        yield running
    finally:
        subprocess.run([str(SCRIPT), "stop", str(directory)], capture_output=True, timeout=60)


@pytest.fixture(autouse=True, scope="module")
def emptied_after_the_module(cluster: Cluster) -> Iterator[None]:
    """What a module leaves in the cluster is deleted after it (and after its operator, whose
    finalizers are taken off): the next module's operator starts on an empty cluster."""
    yield
    with cluster.http() as http:
        for crd in CRD_DIR.glob("*.yaml"):
            plural = yaml.safe_load(crd.read_text())["spec"]["names"]["plural"]
            for item in http.get(f"/apis/{ORBIT}/{plural}").json().get("items", []):
                meta = item["metadata"]
                path = f"/apis/{ORBIT}/namespaces/{meta['namespace']}/{plural}/{meta['name']}"
                if meta.get("finalizers"):
                    http.patch(
                        path,
                        json={"metadata": {"finalizers": None}},
                        headers={"Content-Type": "application/merge-patch+json"},
                    )
                http.delete(path)


# --- resources ---------------------------------------------------------------------------------


def orbit_path(kind: str, namespace: str, name: str | None = None, sub: str = "") -> str:
    return path_of(ORBIT, plural_of(kind), namespace, name, sub)


@pytest.fixture
def api(cluster: Cluster) -> Iterator[Kube]:
    """The server's HTTP API as the admin (no operator running)."""
    client = Kube(cluster.server, verify=cluster.tls())
    yield client
    client.http.close()


@pytest.fixture
def namespace() -> str:
    return f"op-{uuid.uuid4().hex[:10]}"


def apply(cluster: Cluster, *objects: dict[str, Any], args: tuple[str, ...] = ()) -> str:
    """`kubectl apply -f -` of the objects; kubectl's output."""
    stdin = yaml.safe_dump_all(list(objects))
    return cluster.kubectl("apply", *args, "-f", "-", stdin=stdin).stdout


def as_json(done: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(done.stdout)


# --- the operator and MariaDB ------------------------------------------------------------------


@pytest.fixture(scope="session")
def database_url(migrated_database: Callable[[], str]) -> str:
    """A migrated database of the tier's own: the `orbit server` it runs reaps every
    namespace."""
    return migrated_database()


@pytest.fixture(scope="session")
def engine(database_url: str) -> Iterator[sa.Engine]:
    made = create_store_engine(database_url)
    yield made
    made.dispose()


@dataclass
class Operator:
    """`orbit operator` as a process, against the cluster's kubeconfig and MariaDB."""

    process: subprocess.Popen[bytes]
    log: Path
    liveness: str

    def alive(self) -> bool:
        try:
            return httpx.get(self.liveness, timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)

    def kill(self) -> None:
        """SIGKILL: the process gets no chance to finish what it is doing."""
        self.process.kill()
        self.process.wait(10)

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def troubles(self, lines: int = 40) -> str:
        """The last warnings and errors of the log."""
        found = [
            line
            for line in self.log.read_text(errors="replace").splitlines()
            if '"level": "warning"' in line or '"level": "error"' in line
        ]
        return "\n".join(found[-lines:])


def start_operator(
    cluster: Cluster,
    database_url: str,
    log: Path,
    *,
    resync_seconds: float,
    retry_seconds: float = 1.0,
    extra: tuple[str, ...] = (),
) -> Operator:
    liveness = f"http://127.0.0.1:{free_port()}/healthz"
    args = [
        ORBIT_CLI, "operator", "--database-url", database_url,
        "--resync-seconds", str(resync_seconds), "--retry-seconds", str(retry_seconds),
        "--autoscale-seconds", str(resync_seconds), "--metrics-port", "0",
        "--liveness", liveness, *extra,
    ]  # fmt: skip
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "ORBIT_LOG_LEVEL": "INFO"}
    with log.open("ab") as sink:
        process = subprocess.Popen(args, env=env, stdout=sink, stderr=subprocess.STDOUT, cwd=ROOT)
    operator = Operator(process, log, liveness)

    def up() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"the operator exited: {operator.tail()}")
        return operator.alive()

    try:
        wait_for("the operator's liveness probe", up)
    except BaseException:
        operator.stop()
        raise
    return operator


class Operators:
    """At most one operator at a time (two would both act on every resource): the one asked for
    is kept running for the tests after it that ask for the same, and replaced when another is
    asked for. Modules that need their own run last (see the collection hook)."""

    def __init__(self, cluster: Cluster, database_url: str, logs: Path) -> None:
        self.cluster, self.database_url, self.logs = cluster, database_url, logs
        self.running: Operator | None = None
        self.options: dict[str, float] = {}

    def get(self, **options: float) -> Operator:
        current = self.running
        if current is not None and options == self.options and current.process.poll() is None:
            return current
        self.stop()
        log = self.logs / f"operator-{len(list(self.logs.iterdir()))}.log"
        self.running = start_operator(self.cluster, self.database_url, log, **options)
        self.options = options
        return self.running

    def stop(self) -> None:
        if self.running is not None:
            self.running.stop()
            self.running = None


@pytest.fixture(scope="session")
def operators(
    cluster: Cluster, database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Operators]:
    pool = Operators(cluster, database_url, tmp_path_factory.mktemp("operators"))
    yield pool
    pool.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failing test shows the end of the log of each operator it used."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.failed and call.when == "call":
        for name in ("operator", "own_operator"):
            running = getattr(item, "funcargs", {}).get(name)
            if isinstance(running, Operator):
                report.sections.append((f"{name} log: warnings and errors", running.troubles()))
                report.sections.append((f"{name} log (last lines)", running.tail()))


@pytest.fixture
def operator(operators: Operators) -> Operator:
    """The operator most tests share: resync and retries every second."""
    return operators.get(resync_seconds=1)


@pytest.fixture
def kube(cluster: Cluster, operator: Operator) -> Iterator[Kube]:
    """The server's HTTP API, with the operator running."""
    client = Kube(cluster.server, verify=cluster.tls())
    yield client
    client.http.close()
