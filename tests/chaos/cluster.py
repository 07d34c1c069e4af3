"""The system under fault: a MariaDB the harness owns, `orbit server` replicas behind a TCP
balancer, and `orbit worker` processes — all real subprocesses, started, killed, paused and
restarted by the fault injector."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import sqlalchemy as sa
from own_mariadb import free_port

from orbit_store.access.credentials import create_token
from orbit_store.db import create_store_engine, run_transaction
from orbit_store.pulse.limits.queues import put_queue
from orbit_store.pulse.model import QueuePolicy
from orbit_store.upgrade import migrate

from . import ledger
from .balancer import Balancer
from .mariadb_instance import MariaDBInstance, started_instance

ROOT = Path(__file__).resolve().parents[2]
ORBIT = str(Path(sys.executable).with_name("orbit"))
NAMESPACE = "chaos"


@dataclass
class Replica:
    port: int
    log: Path
    process: subprocess.Popen[bytes] | None = None


@dataclass
class WorkerProcess:
    process: subprocess.Popen[bytes]
    paused: bool = False
    started: float = field(default_factory=time.monotonic)

    def age(self) -> float:
        return time.monotonic() - self.started


@dataclass
class Cluster:
    root: Path
    shared_server: str  # host:port of the shared MariaDB, for the ledger only
    lease_seconds: int = 3
    replica_count: int = 2
    worker_count: int = 4
    instance: MariaDBInstance | None = None
    database_url: str = ""
    token: str = ""
    ledger_url: str = ""
    replicas: list[Replica] = field(default_factory=list)
    workers: list[WorkerProcess] = field(default_factory=list)
    balancer: Balancer | None = None
    engine: sa.Engine | None = None
    lock: threading.RLock = field(default_factory=threading.RLock)
    #: Every worker pid ever started (the ledger names pids).
    worker_pids: set[int] = field(default_factory=set)

    # --- setup ---------------------------------------------------------------------------------

    def start(self) -> None:
        self.instance = started_instance(self.root / "mariadb")
        self.database_url = self.instance.create_database("orbit")
        self.engine = create_store_engine(self.database_url)
        migrate.upgrade(self.engine)
        self.token = run_transaction(
            self.engine,
            functools.partial(
                create_token,
                namespace=NAMESPACE,
                name="chaos",
                roles=["submit", "work", "review", "admin"],
            ),
        ).token
        for queue in ("default", "keyed"):
            run_transaction(
                self.engine,
                functools.partial(
                    put_queue,
                    namespace=NAMESPACE,
                    policy=QueuePolicy(name=queue, lease_seconds=self.lease_seconds),
                ),
            )
        self.ledger_url = f"{self.shared_server}/chaos_ledger_{uuid.uuid4().hex[:10]}"
        ledger.create(self.ledger_url)
        self.replicas = [
            Replica(free_port(), self.root / f"server-{i}.log") for i in range(self.replica_count)
        ]
        starting = [threading.Thread(target=self.start_replica, args=(r,)) for r in self.replicas]
        for thread in starting:
            thread.start()
        for thread in starting:
            thread.join()
        self.balancer = Balancer([r.port for r in self.replicas])
        for _ in range(self.worker_count):
            self.start_worker()

    def stop(self, *, drop_ledger: bool) -> None:
        for w in self.workers:
            if w.paused:
                w.process.send_signal(signal.SIGCONT)
            if w.process.poll() is None:
                w.process.kill()
                w.process.wait(10)
        for replica in self.replicas:
            if replica.process is not None and replica.process.poll() is None:
                replica.process.kill()
                replica.process.wait(10)
        if self.balancer is not None:
            self.balancer.close()
        if self.engine is not None:
            self.engine.dispose()
        if self.instance is not None:
            self.instance.stop()
        if drop_ledger and self.ledger_url:
            ledger.drop(self.ledger_url)

    # --- replicas ------------------------------------------------------------------------------

    def start_replica(self, replica: Replica, timeout: float = 180) -> None:
        """Start (or restart, on its port) and wait for /healthz; a start refused because the
        database is down (a crash fault in progress) is tried again."""
        deadline = time.monotonic() + timeout
        env = {**os.environ, "ORBIT_DATABASE_URL": self.database_url, "ORBIT_LOG_LEVEL": "INFO"}
        args = [
            *(ORBIT, "server", "--port", str(replica.port)),
            *("--reaper-interval", "0.5", "--heartbeat-interval", "1"),
            *("--scheduler-interval", "0.5", "--delivery-interval", "1"),
            *("--gauge-interval", "10"),
        ]
        while True:
            with replica.log.open("ab") as sink:
                replica.process = subprocess.Popen(
                    args, env=env, stdout=sink, stderr=subprocess.STDOUT, cwd=ROOT
                )
            while replica.process.poll() is None:
                try:
                    url = f"http://127.0.0.1:{replica.port}/healthz"
                    if httpx.get(url, timeout=1).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"replica on {replica.port} did not start")
                time.sleep(0.1)
            if time.monotonic() > deadline:
                raise RuntimeError(f"replica on {replica.port} kept exiting: see {replica.log}")
            time.sleep(0.5)

    def kill_replica(self, replica: Replica) -> None:
        assert replica.process is not None
        replica.process.send_signal(signal.SIGKILL)
        replica.process.wait(10)

    def alive_replicas(self) -> list[Replica]:
        return [r for r in self.replicas if r.process is not None and r.process.poll() is None]

    # --- workers -------------------------------------------------------------------------------

    def start_worker(self) -> WorkerProcess:
        assert self.balancer is not None
        env = {
            **os.environ,
            "ORBIT_SERVER": self.balancer.url,
            "ORBIT_TOKEN": self.token,
            "ORBIT_NAMESPACE": NAMESPACE,
            "CHAOS_LEDGER_URL": self.ledger_url,
            "PYTHONPATH": f"{ROOT / 'tests'}{os.pathsep}{ROOT}",
            "ORBIT_LOG_LEVEL": os.environ.get("CHAOS_WORKER_LOG_LEVEL", "INFO"),
        }
        log = (self.root / "workers.log").open("ab")
        process = subprocess.Popen(
            [ORBIT, "worker", "chaos.handlers:worker"],
            env=env,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        worker = WorkerProcess(process)
        with self.lock:
            self.workers.append(worker)
            self.worker_pids.add(process.pid)
        return worker

    def running_workers(self) -> list[WorkerProcess]:
        with self.lock:
            return [w for w in self.workers if w.process.poll() is None and not w.paused]

    # --- the database --------------------------------------------------------------------------

    def server_connection_ids(self) -> list[int]:
        """Connections of the servers (and workers' nothing: they speak HTTP) to `orbit`."""
        assert self.instance is not None
        with self.instance.admin() as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT id FROM information_schema.processlist "
                "WHERE db = 'orbit' AND id <> CONNECTION_ID()"
            )
            return [int(row[0]) for row in cur.fetchall()]
