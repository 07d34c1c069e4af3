"""End-to-end fixtures: the real `orbit server` as a subprocess on 127.0.0.1 (random port)
against MariaDB, and real `orbit worker` subprocesses using the SDK."""

from __future__ import annotations

import functools
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import httpx
import pytest
import sqlalchemy as sa

from orbit_store.access.credentials import create_token
from orbit_store.db import create_store_engine, run_transaction
from orbit_store.pulse.limits.queues import put_queue
from orbit_store.pulse.model import QueuePolicy
from orbit_store.schedules.declare import delete_declared_schedule

ROOT = Path(__file__).resolve().parents[2]
ORBIT = str(Path(sys.executable).with_name("orbit"))


def load_example(relative: str) -> ModuleType:
    """Import a file under examples/ (not a package on sys.path) as a module."""
    path = ROOT / "examples" / relative
    spec = importlib.util.spec_from_file_location(f"example_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and SQLAlchemy look their module up
    spec.loader.exec_module(module)
    return module


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(predicate, timeout: float = 90.0, interval: float = 0.05):  # type: ignore[no-untyped-def]
    # Generous: a CI machine running two test processes beside a chaos run is several times
    # slower than a quiet one, and a poll returns as soon as its condition holds.
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)


@pytest.fixture(scope="session")
def mariadb_url(migrated_database: Callable[[], str]) -> str:
    """The end-to-end server gets a database of its own: its reaper works across every
    namespace, and must not touch the store tests' deliberately lapsed leases."""
    return migrated_database()


@pytest.fixture(scope="session")
def mariadb_engine(mariadb_url: str) -> Iterator[sa.Engine]:
    engine = create_store_engine(mariadb_url)
    yield engine
    engine.dispose()


@dataclass
class Server:
    url: str
    database_url: str
    process: subprocess.Popen[bytes]
    log: Path
    webhook_secrets: Path  # the server's --webhook-secrets-dir

    def put_webhook_secret(self, namespace: str, name: str, secret: str) -> None:
        """Signing secret ``name`` of ``namespace``: a file in the namespace's own folder."""
        folder = self.webhook_secrets / namespace
        folder.mkdir(exist_ok=True)
        (folder / name).write_text(secret + "\n")


def start_server(database_url: str, log: Path, *args: str, port: int | None = None) -> Server:
    """`orbit server` on ``port`` (default: a free one) of 127.0.0.1, once it answers /healthz
    (not necessarily ready: a test may start one on a schema it refuses)."""
    port = free_port() if port is None else port
    secrets = log.parent / "webhook-secrets"
    secrets.mkdir(exist_ok=True)
    env = {**os.environ, "ORBIT_DATABASE_URL": database_url, "ORBIT_LOG_LEVEL": "INFO"}
    with log.open("ab") as sink:
        process = subprocess.Popen(
            [ORBIT, "server", "--port", str(port), "--webhook-secrets-dir", str(secrets), *args],
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
    server = Server(f"http://127.0.0.1:{port}", database_url, process, log, secrets)
    try:
        wait_for_http(process, f"{server.url}/healthz", log)
    except BaseException:
        # A server that never answered must not outlive its test: left running (with its HTTP
        # processes) it loaded the machine for every test after it (2026-12-04, a slow hour).
        stop_server(server)
        raise
    return server


def wait_for_http(process: subprocess.Popen[bytes], url: str, log: Path) -> None:
    """Until ``url`` answers 200; fail with the end of ``log`` if the process exits first."""

    def answers() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"{process.args[0]} exited: {log.read_text()[-3000:]}")
        try:
            return httpx.get(url, timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        # Generous: a loaded 2-core machine can take tens of seconds to start several server
        # processes (each imports the whole app); a slow start is not what these tests judge.
        wait_until(answers, timeout=180)
    except AssertionError as exc:
        ends = log.read_text()[-3000:]
        raise AssertionError(f"{url} did not answer; the log ends: {ends}") from exc


def stop_server(server: Server) -> None:
    server.process.send_signal(signal.SIGTERM)
    try:
        server.process.wait(10)
    except subprocess.TimeoutExpired:
        server.process.kill()


def is_ready(server: Server) -> bool:
    return httpx.get(f"{server.url}/readyz", timeout=5).status_code == 200


@pytest.fixture(scope="session")
def server(mariadb_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    log = tmp_path_factory.mktemp("server") / "server.log"
    fast = [
        *("--reaper-interval", "0.2", "--heartbeat-interval", "0.5"),
        *("--gauge-interval", "0.5", "--delivery-interval", "0.2"),
        # The tests' webhook receivers listen on this machine: loopback is refused by default.
        *("--webhook-allow", "127.0.0.1/32"),
    ]
    started = start_server(mariadb_url, log, *fast)
    wait_until(lambda: is_ready(started), timeout=30)
    yield started
    stop_server(started)


@dataclass
class Tenant:
    """A fresh namespace with a token holding the given roles."""

    namespace: str
    token: str
    server: Server
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    worker_logs: list[Path] = field(default_factory=list)  # one per worker, in start order

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def env(self, **extra: str) -> dict[str, str]:
        return {
            **os.environ,
            "ORBIT_SERVER": self.server.url,
            "ORBIT_TOKEN": self.token,
            "ORBIT_NAMESPACE": self.namespace,
            "PYTHONPATH": str(ROOT),
            **extra,
        }

    def start_worker(
        self, spec: str = "tests.e2e.handlers:worker", **env: str
    ) -> subprocess.Popen[bytes]:
        """An `orbit worker` process; its log (stderr) goes to a file in ``worker_logs``, not
        to a pipe nobody reads, where a chatty worker would block once the pipe is full."""
        log = self.server.log.parent / f"worker-{self.namespace}-{len(self.worker_logs)}.log"
        with log.open("wb") as sink:
            process = subprocess.Popen(
                [ORBIT, "worker", spec],
                env=self.env(**env),
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=sink,
            )
        self.workers.append(process)
        self.worker_logs.append(log)
        return process

    def log_of(self, worker: subprocess.Popen[bytes]) -> str:
        """What ``worker`` (one of :meth:`start_worker`'s) has logged so far."""
        return self.worker_logs[self.workers.index(worker)].read_text(errors="replace")


def make_tenant(server: Server, engine: sa.Engine, roles: list[str]) -> Tenant:
    namespace = f"e2e-{uuid.uuid4().hex[:10]}"
    issued = run_transaction(
        engine, functools.partial(create_token, namespace=namespace, name="e2e", roles=roles)
    )
    return Tenant(namespace, issued.token, server)


#: A workflow definition with a task step and a signal wait (published as "flow").
FLOW_SPEC = {
    "steps": [
        {"name": "first", "task": {"handler": "e2e.echo", "params": {"n": "${input.n}"}}},
        {"name": "approval", "dependsOn": ["first"], "wait": {"signal": "go"}},
    ]
}


def flow_admin(server: Server, engine: sa.Engine) -> Tenant:
    """An admin tenant whose namespace has FLOW_SPEC published as workflow "flow"."""
    from orbit_sdk import Client

    tenant = make_tenant(server, engine, ["admin"])
    with Client(server.url, token=tenant.token) as client:
        client.publish_workflow(tenant.namespace, "flow", FLOW_SPEC)
    return tenant


def short_lease_queue(
    engine: sa.Engine, tenant: Tenant, name: str = "short", lease_seconds: int = 2
) -> str:
    """Declare queue ``name`` in the tenant's namespace with a short lease; its name."""
    policy = QueuePolicy(name=name, lease_seconds=lease_seconds)
    run_transaction(engine, functools.partial(put_queue, namespace=tenant.namespace, policy=policy))
    return name


@pytest.fixture
def tenant(server: Server, mariadb_engine: sa.Engine) -> Iterator[Tenant]:
    t = make_tenant(server, mariadb_engine, ["submit", "work", "review"])
    yield t
    for process in t.workers:
        if process.poll() is None:
            process.kill()
            process.wait(10)


def delete_schedules(engine: sa.Engine, namespace: str, *names: str) -> None:
    """Delete a test's schedules when it ends: left behind, a schedule firing every second keeps
    making tasks nobody runs for the rest of the session, for every server on the database."""
    for name in names:
        with engine.begin() as conn:
            delete_declared_schedule(conn, namespace, name)


def lease_and_start(tenant: Tenant) -> tuple[str, str]:
    """Play a worker by hand: lease the namespace's one waiting task and start it; returns the
    attempt's URL and its token."""
    base, headers = tenant.server.url, tenant.headers
    session = httpx.post(
        f"{base}/v1/worker-sessions",
        headers=headers,
        json={"namespace": tenant.namespace, "worker_name": "by-hand"},
    ).json()
    lease = httpx.post(
        f"{base}/v1/worker-sessions/{session['id']}/lease", json={}, headers=headers
    ).json()["leases"][0]
    attempt = f"{base}/v1/attempts/{lease['attempt_id']}"
    httpx.post(f"{attempt}/start", json={"token": lease["token"]}, headers=headers)
    return attempt, lease["token"]


def report_unknown_outcome(tenant: Tenant) -> None:
    """Lease, start and report an unknown outcome: an unsafe task goes to NEEDS_REVIEW."""
    attempt, token = lease_and_start(tenant)
    httpx.post(
        f"{attempt}/complete", json={"token": token, "outcome": "unknown"}, headers=tenant.headers
    )
