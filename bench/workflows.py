"""Weave throughput and latency through a real `orbit server` and real `orbit worker`s.

A five-step workflow (a → b, c in parallel → d → e, all task steps) is started N times at once
over HTTP (SDK, several threads) while the workers run; measured from the database's own clock:

- step advances/s: step state changes (activations and results, from the workflows' histories)
  divided by first start → last finish;
- instance latency: created → finished per instance (p50, p99), under that load and, in a
  second phase, one instance at a time with idle workers;
- orchestration lag: a task's outcome persisted → consumed by the inbox loop (p50, p99).

Usage: ``.venv/bin/python bench/workflows.py [--instances 1000] [--quick] [--keep]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pymysql
from sqlalchemy import event
from sqlalchemy.engine import make_url

from orbit_sdk import Client
from orbit_store.db import create_store_engine
from orbit_store.weave.inbox import due_messages
from orbit_store.weave.timers import due_instances

ROOT = Path(__file__).resolve().parents[1]
ORBIT = str(Path(sys.executable).with_name("orbit"))
DEFAULT_URL = "mysql+pymysql://root@127.0.0.1:3306/orbit_bench_workflows"
NS = "bench"


def task(name: str, *deps: str) -> dict[str, Any]:
    return {
        "name": name,
        "dependsOn": list(deps),
        "task": {"handler": "bench.step", "params": {"step": name, "n": "${input.n}"}},
    }


SPEC = {"steps": [task("a"), task("b", "a"), task("c", "a"), task("d", "b", "c"), task("e", "d")]}


def say(*parts: str) -> None:
    print("".join(parts), flush=True)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)]


class Bench:
    def __init__(self, args: argparse.Namespace, logs: Path) -> None:
        self.args, self.logs, self.url = args, logs, args.database_url
        self.procs: list[subprocess.Popen[bytes]] = []
        args_ = make_url(self.url).translate_connect_args(username="user")
        self.db = pymysql.connect(**args_, charset="utf8mb4", autocommit=True)
        self.base = self.token = ""

    def orbit(self, *argv: str) -> str:
        cmd = [ORBIT, *argv, "--database-url", self.url]
        return subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout

    def spawn(self, argv: list[str], log: str, **env: str) -> subprocess.Popen[bytes]:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "ORBIT_LOG_LEVEL": "WARNING", **env}
        with (self.logs / log).open("ab") as out:
            kw: Any = {"stdout": out, "stderr": subprocess.STDOUT, "start_new_session": True}
            proc = subprocess.Popen([ORBIT, *argv], env=env, cwd=ROOT, **kw)
        self.procs.append(proc)
        return proc

    def start(self) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        self.base = f"http://127.0.0.1:{port}"
        self.spawn(["server", "--port", str(port)], "server.log", ORBIT_DATABASE_URL=self.url)
        for _ in range(300):
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.base}/readyz", timeout=1).status_code == 200:
                    break
            time.sleep(0.1)
        else:
            raise RuntimeError("orbit server not ready after 30s")
        for k in range(self.args.workers):
            env = {"ORBIT_SERVER": self.base, "ORBIT_TOKEN": self.token, "ORBIT_NAMESPACE": NS}
            env["BENCH_CONCURRENCY"] = str(self.args.concurrency)
            self.spawn(["worker", "bench.workflow_worker:worker"], f"worker-{k}.log", **env)

    def query(self, sql: str, *params: Any) -> Any:
        with self.db.cursor() as cur:
            cur.execute(sql, params)
            return cur.fetchall()

    def wait_done(self, expected: int, stall: float = 120.0) -> None:
        """Until every instance has SUCCEEDED; loud when nothing (no step) moves for ``stall`` s."""
        last, since = -1, time.monotonic()
        states = (
            "SELECT state, COUNT(*) FROM workflow_instances WHERE namespace = %s GROUP BY state"
        )
        events = "SELECT COUNT(*) FROM workflow_events WHERE namespace = %s"
        while True:
            for proc in self.procs:
                if proc.poll() is not None:
                    raise RuntimeError(f"{proc.args} exited; see {self.logs}")
            counts = dict(self.query(states, NS))
            if counts.get("SUCCEEDED", 0) >= expected:
                if len(counts) > 1:
                    raise RuntimeError(f"not all succeeded: {counts}")
                return
            moved = self.query(events, NS)[0][0]
            if moved != last:
                last, since = moved, time.monotonic()
            elif time.monotonic() - since > stall:
                raise RuntimeError(f"no workflow moved for {stall}s: {counts}")
            time.sleep(0.2)

    def start_many(self, client: Client, first: int, n: int) -> float:
        began = time.perf_counter()
        with ThreadPoolExecutor(self.args.submitters) as pool:
            work = lambda i: client.start_workflow(  # noqa: E731
                NS, "bench", input={"n": i}, start_key=f"wf-{i}"
            )
            list(pool.map(work, range(first, first + n)))
        return time.perf_counter() - began

    def measure(self, mark: Any) -> dict[str, Any]:
        ((instances, created, finished),) = self.query(
            "SELECT COUNT(*), MIN(created_at), MAX(finished_at) FROM workflow_instances "
            "WHERE namespace = %s AND created_at >= %s",
            *(NS, mark),
        )
        ((advances,),) = self.query(
            "SELECT COUNT(*) FROM workflow_events e JOIN workflow_instances i "
            "ON i.id = e.instance_id WHERE i.namespace = %s AND i.created_at >= %s "
            "AND e.kind LIKE 'step.%%'",
            *(NS, mark),
        )
        latency = [
            row[0] / 1000
            for row in self.query(
                "SELECT TIMESTAMPDIFF(MICROSECOND, created_at, finished_at) FROM "
                "workflow_instances WHERE namespace = %s AND created_at >= %s",
                *(NS, mark),
            )
        ]
        lag = [
            row[0] / 1000
            for row in self.query(
                "SELECT TIMESTAMPDIFF(MICROSECOND, received_at, consumed_at) FROM workflow_inbox "
                "WHERE namespace = %s AND received_at >= %s",
                *(NS, mark),
            )
        ]
        seconds = (finished - created).total_seconds()
        return {
            "instances": instances,
            "seconds": seconds,
            "advances": advances,
            "latency": latency,
            "lag": lag,
        }


def explain_loops(url: str) -> None:
    """EXPLAIN the statements the inbox and timer loops scan with, as they really send them."""
    engine = create_store_engine(url)
    captured: list[tuple[str, Any]] = []

    def capture(_conn: Any, _cur: Any, statement: str, params: Any, *_: Any) -> None:
        if "FROM workflow_inbox" in statement or "FROM workflow_instances" in statement:
            captured.append((statement, params))

    event.listen(engine, "before_cursor_execute", capture)
    with engine.connect() as conn:
        due_messages(conn, limit=200)
        due_instances(conn, limit=200)
    event.remove(engine, "before_cursor_execute", capture)
    say("\nthe loops' scans (EXPLAIN on the tables as the run left them):")
    with engine.connect() as conn:
        for statement, params in captured:
            plan = conn.exec_driver_sql("EXPLAIN FORMAT=JSON " + statement, params).scalar()
            table = _find(json.loads(plan), "table")
            say(
                f"  {statement.split('FROM ')[1].split()[0]:20} access_type=",
                f"{table.get('access_type')} key={table.get('key')} rows~{table.get('rows')}",
            )
    engine.dispose()


def _find(node: Any, key: str) -> Any:
    if isinstance(node, dict):
        return node[key] if key in node else _find(list(node.values()), key)
    found = [_find(item, key) for item in node] if isinstance(node, list) else []
    return next((f for f in found if f), {})


def show(title: str, m: dict[str, Any]) -> None:
    say(f"\n{title}")
    say(
        f"  {m['instances']} instances in {m['seconds']:.1f}s (first start -> last finish, DB ",
        f"clock): {m['instances'] / m['seconds']:,.1f} instances/s, {m['advances']} step ",
        f"advances = {m['advances'] / m['seconds']:,.0f} advances/s",
    )
    for name, values in (("instance latency", m["latency"]), ("orchestration lag", m["lag"])):
        say(
            f"  {name:18} ms: p50 {pct(values, 0.5):8.1f}  p99 {pct(values, 0.99):8.1f}  ",
            f"max {max(values):8.1f}",
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--database-url", default=DEFAULT_URL, help="created (dropped first), dropped at the end")
    add("--instances", type=int, default=1000, help="concurrent instances (default 1000)")
    add("--solo", type=int, default=30, help="instances one at a time (default 30)")
    add("--workers", type=int, default=2, help="worker processes (default 2)")
    add("--concurrency", type=int, default=16, help="slots per worker (default 16)")
    add("--submitters", type=int, default=8, help="threads starting workflows (default 8)")
    add("--quick", action="store_true", help="100 concurrent instances, 10 one at a time")
    add("--keep", action="store_true", help="keep the database and the logs")
    args = parser.parse_args()
    if args.quick:
        args.instances, args.solo = 100, 10
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    logs = Path(tempfile.mkdtemp(prefix="orbit-bench-workflows-"))
    name = make_url(args.database_url).database
    admin = make_url(args.database_url).translate_connect_args(username="user")
    admin.pop("database", None)
    server = pymysql.connect(**admin, autocommit=True)
    with server.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        cur.execute(f"CREATE DATABASE `{name}`")
    bench = Bench(args, logs)
    try:
        say(bench.orbit("admin", "migrate").strip().splitlines()[-1])
        roles = ("-r", "admin", "--name", "bench")
        bench.token = bench.orbit("admin", "token", "create", "-n", NS, *roles).strip()
        (version,) = bench.query("SELECT VERSION()")[0]
        say(f"MariaDB {version}; {os.cpu_count()} CPUs shared by MariaDB, server, workers, us")
        bench.start()
        say(f"{args.workers} workers x {args.concurrency} slots; logs in {logs}")
        with Client(bench.base, token=bench.token, timeout=60) as client:
            client.publish_workflow(NS, "bench", SPEC)
            mark = bench.query("SELECT UTC_TIMESTAMP(6)")[0][0]
            started_in = bench.start_many(client, 0, args.instances)
            bench.wait_done(args.instances)
            loaded = bench.measure(mark)
            say(f"started {args.instances} instances in {started_in:.1f}s over HTTP")
            show(f"{args.instances} concurrent instances of a 5-step workflow:", loaded)
            mark = bench.query("SELECT UTC_TIMESTAMP(6)")[0][0]
            for i in range(args.solo):
                wf = client.start_workflow(NS, "bench", input={"n": i}, start_key=f"solo-{i}")
                client.wait_workflow(NS, wf.id, timeout=60, poll_interval=0.05)
            show(f"{args.solo} instances one at a time, idle workers:", bench.measure(mark))
        explain_loops(args.database_url)
    finally:
        for proc in bench.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in bench.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(15)
            if proc.poll() is None:
                proc.kill()
        if not args.keep:
            with server.cursor() as cur:
                cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        say(f"logs in {logs}")


if __name__ == "__main__":
    main()
