"""Weave throughput and latency through a real `orbit server` and real `orbit worker`s.

A five-step workflow (a → b, c in parallel → d → e, all task steps) is started N times at once
over HTTP (SDK, several threads) while the workers run; measured from the database's own clock:

- step advances/s: step state changes (activations and results, from the workflows' histories)
  divided by first start → last finish;
- instance latency: created → finished per instance (p50, p99), under that load and, in a
  second phase, one instance at a time with idle workers;
- orchestration lag: a task's outcome persisted → consumed by the inbox loop (p50, p99);
- with ``--sleep S``, step b is a sleep of S seconds (the timer loop's work) and the timer lag
  is measured too: a sleep's deadline → the transaction that fired it (p50, p99).

With ``--raw`` the same run then does the same work in plain SQL
(``bench/workflows/raw_workflows.py``: as many worker processes as slots, as many consumer
processes as the server has consumer threads): the ceiling of these rows' writes on this
machine, beside Orbit's figures.

Usage: ``.venv/bin/python bench/workflows/workflows.py [--instances 1000] [--quick] [--raw]
[--keep] [--sleep 1]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
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

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.workflows import raw_workflows  # the repository root, added above
from orbit_sdk import Client
from orbit_store.db import create_store_engine
from orbit_store.weave.inbox import due_messages
from orbit_store.weave.timers import due_instances

ROOT = Path(__file__).resolve().parents[2]
ORBIT = str(Path(sys.executable).with_name("orbit"))
DEFAULT_URL = "mysql+pymysql://root@127.0.0.1:3306/orbit_bench_workflows"
NS = "bench"


def task(name: str, *deps: str) -> dict[str, Any]:
    return {
        "name": name,
        "dependsOn": list(deps),
        "task": {"handler": "bench.step", "params": {"step": name, "n": "${input.n}"}},
    }


def spec(sleep: float | None) -> dict[str, Any]:
    """a → b, c → d → e; b sleeps ``sleep`` seconds instead of running a task when given."""
    b = (
        task("b", "a")
        if sleep is None
        else {"name": "b", "dependsOn": ["a"], "sleep": {"seconds": sleep}}
    )
    return {"steps": [task("a"), b, task("c", "a"), task("d", "b", "c"), task("e", "d")]}


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
            self.spawn(
                ["worker", "bench.workflows.workflow_worker:worker"], f"worker-{k}.log", **env
            )

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
        timer_lag = [
            row[0] / 1000
            for row in self.query(
                "SELECT TIMESTAMPDIFF(MICROSECOND, deadline_at, finished_at) FROM workflow_waits "
                "WHERE namespace = %s AND created_at >= %s AND kind = 'sleep'",
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
            "timer": timer_lag,
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
            for table in _tables(json.loads(plan)):  # the timer scan reads a derived table
                say(
                    f"  {table.get('table_name', '?'):20} access_type=",
                    f"{table.get('access_type')} key={table.get('key')} rows~{table.get('rows')}",
                )
    engine.dispose()


def _tables(node: Any) -> list[dict[str, Any]]:
    """Every table access of an EXPLAIN FORMAT=JSON plan, outermost first."""
    if isinstance(node, list):
        return [t for item in node for t in _tables(item)]
    if not isinstance(node, dict):
        return []
    own = [node["table"]] if isinstance(node.get("table"), dict) else []
    return own + [t for key, value in node.items() for t in _tables(value)]


def show(title: str, m: dict[str, Any]) -> None:
    say(f"\n{title}")
    say(
        f"  {m['instances']} instances in {m['seconds']:.1f}s (first start -> last finish, DB ",
        f"clock): {m['instances'] / m['seconds']:,.1f} instances/s, {m['advances']} step ",
        f"advances = {m['advances'] / m['seconds']:,.0f} advances/s",
    )
    shown = (("instance latency", "latency"), ("orchestration lag", "lag"), ("timer lag", "timer"))
    for name, key in shown:
        values = m.get(key) or []
        if not values:  # no sleeps: no timer lag
            continue
        say(
            f"  {name:18} ms: p50 {pct(values, 0.5):8.1f}  p99 {pct(values, 0.99):8.1f}  ",
            f"max {max(values):8.1f}",
        )


#: Consumer processes and starting processes of the raw-SQL run: as the server's consumer threads
#: (``weave_workers``) and this script's starting threads.
RAW_CONSUMERS, RAW_STARTERS = 8, 8


def run_raw(bench: Bench, pool: Any, args: argparse.Namespace) -> None:
    """The same instances in plain SQL, measured the same way."""
    for proc in bench.procs:  # the machine to itself, as Orbit had it
        proc.send_signal(signal.SIGTERM)
    for proc in bench.procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(15)
    raw_workflows.make_tables(bench.db)
    slots = args.workers * args.concurrency
    raw_workflows.raw_run(
        pool, args.database_url, "raw", args.instances, slots, RAW_CONSUMERS, RAW_STARTERS
    )
    ((instances, created, finished),) = bench.query(
        "SELECT COUNT(*), MIN(created_at), MAX(finished_at) FROM raw_wf_instances"
    )
    ((advances,),) = bench.query("SELECT COUNT(*) FROM raw_wf_events")
    latency = [
        row[0] / 1000
        for row in bench.query(
            "SELECT TIMESTAMPDIFF(MICROSECOND, created_at, finished_at) FROM raw_wf_instances"
        )
    ]
    lag = [
        row[0] / 1000
        for row in bench.query(
            "SELECT TIMESTAMPDIFF(MICROSECOND, received_at, consumed_at) FROM raw_wf_inbox"
        )
    ]
    measured = {
        "instances": instances,
        "seconds": (finished - created).total_seconds(),
        "advances": advances,
        "latency": latency,
        "lag": lag,
    }
    show(
        f"raw SQL, the same {args.instances} instances ({slots} worker processes, "
        f"{RAW_CONSUMERS} consumers):",
        measured,
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
    add("--raw", action="store_true", help="the same work in plain SQL too (raw_workflows.py)")
    add("--sleep", type=float, help="step b sleeps this many seconds instead of a task")
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
    raw_pool = None
    if args.raw:  # forked before any thread exists
        raw_pool = multiprocessing.get_context("fork").Pool(
            RAW_CONSUMERS + RAW_STARTERS + args.workers * args.concurrency
        )
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
            client.publish_workflow(NS, "bench", spec(args.sleep))
            mark = bench.query("SELECT UTC_TIMESTAMP(6)")[0][0]
            started_in = bench.start_many(client, 0, args.instances)
            bench.wait_done(args.instances)
            loaded = bench.measure(mark)
            say(f"started {args.instances} instances in {started_in:.1f}s over HTTP")
            shape = (
                "a 5-step workflow" if args.sleep is None else f"5 steps, b a {args.sleep:g}s sleep"
            )
            show(f"{args.instances} concurrent instances of {shape}:", loaded)
            mark = bench.query("SELECT UTC_TIMESTAMP(6)")[0][0]
            for i in range(args.solo):
                wf = client.start_workflow(NS, "bench", input={"n": i}, start_key=f"solo-{i}")
                client.wait_workflow(NS, wf.id, timeout=60, poll_interval=0.05)
            show(f"{args.solo} instances one at a time, idle workers:", bench.measure(mark))
        explain_loops(args.database_url)
        if raw_pool is not None:
            run_raw(bench, raw_pool, args)
    finally:
        for proc in bench.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in bench.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(15)
            if proc.poll() is None:
                proc.kill()
        if raw_pool is not None:
            raw_pool.terminate()
        if not args.keep:
            with server.cursor() as cur:
                cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        say(f"logs in {logs}")


if __name__ == "__main__":
    main()
