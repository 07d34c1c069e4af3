"""Dispatch latency with idle long-polling workers, within one server process and across them.

Starts real `orbit server` processes on a fresh MariaDB database: replica A (where tasks are
submitted in the cross-replica cases) and replica B (where the workers long-poll, 30 s requests).
Then, for each case, ``--tasks`` tasks are submitted one at a time, each once every worker is
back waiting, and the script prints p50/p90/p99/max of

- *dispatch*: from the task becoming available to its lease, as MySQL recorded both
  (``task_attempts.leased_at - tasks.available_at``, microseconds), and
- *client*: from the submit call returning to the worker's lease call returning.

Cases:

- ``same process``: submit to B itself (the in-process wake-up);
- ``other replica``: submit to A, wake-up by B's shared probe (``--wake-probe-interval``);
- ``other replica, no probe``: the same with B's probe off (``--wake-probe-interval 0``): only
  each request's own 1 s poll finds the task — the behaviour before the probe;
- ``--workers 2``: B runs two HTTP processes and tasks are submitted to B: a submission lands on
  either process, so about half are found by the probe.

Usage: ``.venv/bin/python bench/tasks/dispatch.py [--tasks 200] [--pollers 4]``. Speed is measured
here, never asserted in tests; report the machine's load with the figures.
"""

from __future__ import annotations

import argparse
import functools
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import sqlalchemy as sa

from orbit_store.access.credentials import create_token
from orbit_store.db import create_store_engine, run_transaction
from orbit_store.schema import task_attempts, tasks
from orbit_store.upgrade import migrate

DEFAULT_SERVER = "mysql+pymysql://root@127.0.0.1:3306/"
ORBIT = str(Path(sys.executable).with_name("orbit"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def server(database_url: str, *args: str) -> Iterator[str]:
    port = free_port()
    env = {**os.environ, "ORBIT_DATABASE_URL": database_url, "ORBIT_LOG_LEVEL": "WARNING"}
    process = subprocess.Popen(
        [ORBIT, "server", "--port", str(port), *args], env=env, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or process.poll() is not None:
                raise SystemExit(f"orbit server {' '.join(args)} did not come up")
            time.sleep(0.1)
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()


class Poller(threading.Thread):
    """One idle worker: long-polls B, starts and completes what it gets, polls again."""

    def __init__(self, url: str, namespace: str, token: str, done: threading.Event) -> None:
        super().__init__(daemon=True)
        self.http = httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60
        )
        # The longest session TTL: the bench sends no heartbeats, and a case may last minutes.
        body = {
            "namespace": namespace,
            "worker_name": f"bench-{uuid.uuid4().hex[:8]}",
            "ttl_seconds": 3600,
        }
        self.session = self.http.post("/v1/worker-sessions", json=body).json()["id"]
        self.done, self.waiting = done, threading.Event()
        self.leased: dict[str, float] = {}  # task id -> monotonic time its lease call returned

    def run(self) -> None:
        try:
            self._poll()
        except httpx.HTTPError:
            if not self.done.is_set():  # the server went away at the end of a case: fine
                raise

    def _poll(self) -> None:
        while not self.done.is_set():
            self.waiting.set()
            reply = self.http.post(
                f"/v1/worker-sessions/{self.session}/lease",
                json={"max_tasks": 1, "wait_seconds": 30},
            )
            returned = time.monotonic()
            self.waiting.clear()
            for lease in reply.json().get("leases", []):
                self.leased[lease["task_id"]] = returned
                attempt = f"/v1/attempts/{lease['attempt_id']}"
                self.http.post(f"{attempt}/start", json={"token": lease["token"]})
                self.http.post(
                    f"{attempt}/complete",
                    json={"token": lease["token"], "outcome": "succeeded", "result": {}},
                )


def percentiles(values: list[float]) -> str:
    ordered = sorted(values)
    q = statistics.quantiles(ordered, n=100, method="inclusive")
    return (
        f"p50 {q[49] * 1000:7.1f}  p90 {q[89] * 1000:7.1f}  p99 {q[98] * 1000:7.1f}  "
        f"max {ordered[-1] * 1000:7.1f} ms"
    )


def run_case(
    name: str, engine: sa.Engine, submit_url: str, poll_url: str, tasks_n: int, pollers_n: int
) -> None:
    namespace = f"dispatch-{uuid.uuid4().hex[:8]}"
    token = run_transaction(
        engine,
        functools.partial(create_token, namespace=namespace, name="b", roles=["submit", "work"]),
    ).token
    done = threading.Event()
    pollers = [Poller(poll_url, namespace, token, done) for _ in range(pollers_n)]
    for poller in pollers:
        poller.start()
    submitter = httpx.Client(
        base_url=submit_url, headers={"Authorization": f"Bearer {token}"}, timeout=60
    )
    client_latency: list[float] = []
    for _ in range(tasks_n):
        for poller in pollers:  # every worker idle and waiting again
            poller.waiting.wait(35)
        time.sleep(0.02)
        task_id = submitter.post(f"/v1/namespaces/{namespace}/tasks", json={"handler": "h"}).json()[
            "id"
        ]
        submitted = time.monotonic()
        deadline = submitted + 35
        while not any(task_id in p.leased for p in pollers) and time.monotonic() < deadline:
            time.sleep(0.001)
        returned = next((p.leased[task_id] for p in pollers if task_id in p.leased), deadline)
        client_latency.append(returned - submitted)
    done.set()
    with engine.connect() as conn:
        rows = conn.execute(
            sa.select(tasks.c.available_at, task_attempts.c.leased_at)
            .join(task_attempts, task_attempts.c.task_id == tasks.c.id)
            .where(tasks.c.namespace == namespace)
        ).all()
    dispatch = [max((r.leased_at - r.available_at).total_seconds(), 0.0) for r in rows]
    print(f"{name:28} dispatch {percentiles(dispatch)}")
    print(f"{'':28} client   {percentiles(client_latency)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", default=DEFAULT_SERVER, help="MariaDB server URL")
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--pollers", type=int, default=4, help="idle workers on replica B")
    args = parser.parse_args()
    database = f"orbit_dispatch_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(args.server)
    with admin.begin() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {database}")
    url = f"{args.server.rstrip('/')}/{database}"
    engine = create_store_engine(url)
    try:
        migrate.upgrade(engine)
        print(
            f"{args.tasks} tasks, {args.pollers} idle long-polling workers; load {os.getloadavg()}"
        )
        slow = ("--lease-poll-interval", "30")
        with server(url) as a, server(url, *slow) as b:
            run_case("same process", engine, b, b, args.tasks, args.pollers)
            run_case("other replica", engine, a, b, args.tasks, args.pollers)
        with server(url) as a, server(url, "--wake-probe-interval", "0") as b:
            run_case("other replica, no probe", engine, a, b, args.tasks, args.pollers)
        with server(url, "--workers", "2", *slow) as b:
            run_case("--workers 2 (submit to it)", engine, b, b, args.tasks, args.pollers)
        print(f"load after: {os.getloadavg()}")
    finally:
        engine.dispose()
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP DATABASE {database}")


if __name__ == "__main__":
    main()
