"""Orbit end to end with its default settings, beside pgqueuer and procrastinate on durable
PostgreSQL (and, with ``--raw``, the same lifecycle in plain SQL), measured in one run.

Orbit as installed: one `orbit server` (one HTTP process; a ``mysql://`` URL gets the C driver
where it is installed), 2 `orbit worker` processes of 8 slots (``--slots-per-worker``), a no-op
handler, the SDK's defaults. Each round runs every cell in turn, so a machine whose speed drifts
moves them alike; the medians of the rounds are printed last:

- **orbit one by one**: N ``Client.submit`` calls from 8 threads sharing one ``Client`` (its
  default coalescing), then the workers drain them;
- **orbit bulk**: N tasks by ``Client.submit_many``, then their drain;
- **pgqueuer / procrastinate** (``bench/baselines/peers.py``): N jobs enqueued one by one and in
  bulk, each drained by 2 worker processes;
- **raw** (``--raw``): ``bench/baselines/raw_sql.py``, 8 submitting and 16 draining processes.

``e2e = N / (submit seconds + drain seconds)``; Orbit's drain runs from the first lease to the
last finish (database clock, worker start-up not counted), the peers' from the moment their
started processes begin to the last one's return. The load average is printed beside each
cell: other work on the machine moves every figure.

Dispatch latency (``--latency-samples``): idle long-polling workers, tasks submitted one at a
time; available -> started p50/p99 with one replica, with two replicas (a worker on each,
submissions alternating between them), and with two replicas where every task is submitted to
the replica no worker waits on (only the shared probe finds it: what the probe costs).

``--profile DIR`` samples the server and the workers with py-spy (``pip install py-spy``; the
thread holding the GIL) during each drain and writes their collapsed stacks there
(``bench/profiling/stacks.py`` sums them).

Usage: ``.venv/bin/python bench/tasks/e2e.py [--tasks 5000] [--rounds 3] [--raw]`` (see --help);
``--peers`` needs ``pip install pgqueuer asyncpg procrastinate 'psycopg[binary]'``.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.baselines import peers, raw_sql  # the repository root, added above
from orbit_sdk import Client

ROOT = Path(__file__).resolve().parents[2]
ORBIT = str(Path(sys.executable).with_name("orbit"))
DEFAULT_URL = "mysql://root@127.0.0.1:3306/orbit_bench_e2e"
HANDLER = "bench.noop"
THREADS = 8


def say(*parts: str) -> None:
    print("".join(parts), flush=True)


def load() -> float:
    return os.getloadavg()[0]


def cpu_seconds(pid: int) -> float:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:  # gone meanwhile
        return 0.0
    return (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(pid: int) -> float:
    """The CPU of ``pid`` and of its descendants still running (granian serves in a child)."""
    parents: dict[int, list[int]] = {}
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError, IndexError):
            if proc.name.isdigit():
                ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
                parents.setdefault(ppid, []).append(int(proc.name))
    total, todo = 0.0, [pid]
    while todo:
        proc = todo.pop()
        total += cpu_seconds(proc)
        todo += parents.get(proc, [])
    return total


def mariadb_pid() -> int | None:
    """The local mariadbd/mysqld (None when the database runs elsewhere)."""
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if proc.name.isdigit() and (proc / "comm").read_text().strip() in (
                "mariadbd",
                "mysqld",
            ):
                return int(proc.name)
    return None


def pct(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Orbit:
    """Orbit's processes, started as a user starts them, and its database read directly."""

    def __init__(self, args: argparse.Namespace, logs: Path) -> None:
        self.args, self.logs, self.url = args, logs, args.database_url
        self.procs: list[subprocess.Popen[bytes]] = []
        self.db = raw_sql.connect(self.url, make_url(self.url).database, autocommit=True)
        self.mariadb = mariadb_pid()

    def cli(self, *argv: str) -> str:
        cmd = [ORBIT, *argv, "--database-url", self.url]
        return subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout

    def tenant(self, kind: str) -> tuple[str, str]:
        """A fresh namespace and a token that may submit and work in it."""
        namespace = f"{kind}-{uuid.uuid4().hex[:6]}"
        roles = ("-r", "submit", "-r", "work", "--name", "bench")
        return namespace, self.cli("admin", "token", "create", "-n", namespace, *roles).strip()

    def spawn(
        self, argv: list[str], log: str, program: str = ORBIT, **env: str
    ) -> subprocess.Popen[bytes]:
        env = {**os.environ, "PYTHONPATH": str(ROOT), **env}
        with (self.logs / log).open("ab") as out:  # own session: Ctrl-C reaches only us
            kw: Any = {"stdout": out, "stderr": subprocess.STDOUT, "start_new_session": True}
            proc = subprocess.Popen([program, *argv], env=env, cwd=ROOT, **kw)
        self.procs.append(proc)
        return proc

    def server(self, log: str) -> tuple[subprocess.Popen[bytes], str]:
        """`orbit server` with its defaults on a free port, once ready."""
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        if self.args.asgi == "granian":  # the same app under granian (bench/tasks/asgi_app.py)
            argv = ["--interface", "asgi", "--factory", "--host", "127.0.0.1", "--port", str(port)]
            argv += ["--no-access-log", "bench.tasks.asgi_app:app"]
            granian = str(Path(sys.executable).with_name("granian"))
            proc = self.spawn(argv, log, granian, ORBIT_DATABASE_URL=self.url)
        else:
            argv = ["server", "--port", str(port)]
            proc = self.spawn(argv, log, ORBIT_DATABASE_URL=self.url)
        for _ in range(300):
            if proc.poll() is not None:
                raise RuntimeError(f"orbit server exited with {proc.returncode}; see {log}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                    return proc, base
            time.sleep(0.1)
        raise RuntimeError("orbit server not ready after 30s")

    def workers(self, bases: list[str], namespace: str, token: str) -> list[Any]:
        """One `orbit worker` per base URL, each of ``--slots-per-worker`` slots."""
        started = []
        for k, base in enumerate(bases):
            env = {"ORBIT_SERVER": base, "ORBIT_TOKEN": token, "ORBIT_NAMESPACE": namespace}
            env["BENCH_WORKER_NAME"] = f"{namespace}-w{k}"
            slots = str(self.args.slots_per_worker)
            argv = ["worker", "bench.tasks.e2e_worker:worker", "--concurrency", slots]
            started.append(self.spawn(argv, f"worker-{namespace}-{k}.log", **env))
        return started

    @staticmethod
    def stop(procs: list[subprocess.Popen[bytes]]) -> None:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def query(self, sql: str, *params: Any) -> Any:
        with self.db.cursor() as cur:
            cur.execute(sql, params)
            return cur.fetchall()

    def settled(self, namespace: str, n: int, procs: list[Any], stall: float = 60.0) -> None:
        """Until every task of ``namespace`` has settled; all must have SUCCEEDED. The poll
        counts only unsettled states (an index range that shrinks as the drain goes)."""
        unsettled = (
            "SELECT COUNT(*) FROM tasks WHERE namespace = %s AND state IN "
            "('WAITING', 'LEASED', 'RUNNING', 'NEEDS_REVIEW')"
        )
        last, since = -1, time.monotonic()
        while (left := self.query(unsettled, namespace)[0][0]) > 0:
            if any(p.poll() is not None for p in procs):
                raise RuntimeError(f"a process exited early; logs in {self.logs}")
            if left != last:
                last, since = left, time.monotonic()
            elif time.monotonic() - since > stall:
                raise RuntimeError(f"no progress for {stall}s with {left} tasks left")
            time.sleep(0.02)
        done = self.query(
            "SELECT COUNT(*) FROM tasks WHERE namespace = %s AND state = 'SUCCEEDED'", namespace
        )[0][0]
        if done != n:
            raise RuntimeError(f"{done} of {n} tasks SUCCEEDED in {namespace}")

    def drain(self, server: Any, base: str, namespace: str, token: str, n: int) -> dict[str, Any]:
        """Start the workers on the namespace's backlog; seconds from the first lease to the last
        finish, and the CPU each kind of process spent per task from the first lease on."""
        db = cpu_seconds(self.mariadb) if self.mariadb else 0.0
        fleet = self.workers([base, base], namespace, token)
        first = "SELECT 1 FROM task_attempts WHERE namespace = %s LIMIT 1"
        while not self.query(first, namespace):
            time.sleep(0.005)
        samplers = self.sample([server, *fleet], namespace)
        cpus = [tree_cpu_seconds(server.pid), sum(cpu_seconds(w.pid) for w in fleet)]
        self.settled(namespace, n, [server, *fleet])
        for sampler in samplers:
            sampler.send_signal(signal.SIGINT)  # py-spy writes its stacks on SIGINT
        server_cpu = tree_cpu_seconds(server.pid) - cpus[0]
        cpus = [server_cpu, sum(cpu_seconds(w.pid) for w in fleet) - cpus[1]]
        mariadb = (cpu_seconds(self.mariadb) - db) if self.mariadb else float("nan")
        self.stop(fleet)
        for sampler in samplers:
            sampler.wait(30)
        ((leased, finished),) = self.query(
            "SELECT MIN(a.leased_at), MAX(t.finished_at) FROM tasks t JOIN task_attempts a "
            "ON a.task_id = t.id WHERE t.namespace = %s",
            namespace,
        )
        per_task = [1000 * c / n for c in (*cpus, mariadb)]
        return {"seconds": (finished - leased).total_seconds(), "cpu": per_task}

    def sample(self, procs: list[Any], namespace: str) -> list[subprocess.Popen[bytes]]:
        """py-spy on each of ``procs`` (the server first) while the drain runs (``--profile``)."""
        if not self.args.profile:
            return []
        out = Path(self.args.profile)
        out.mkdir(parents=True, exist_ok=True)
        spy = str(Path(sys.executable).with_name("py-spy"))
        samplers = []
        for k, proc in enumerate(procs):
            name = out / f"{namespace}-{'server' if k == 0 else f'worker{k}'}.txt"
            argv = [spy, "record", "--pid", str(proc.pid), "--format", "raw", "--threads", "--gil"]
            argv += ["--rate", "250", "--nonblocking", "--output", str(name)]
            samplers.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL))
        return samplers

    def cell(self, server: Any, base: str, bulk: bool) -> dict[str, Any]:
        n, (namespace, token) = self.args.tasks, self.tenant("bulk" if bulk else "one")
        before = load()
        with Client(base, token=token, timeout=60) as client:
            began = time.perf_counter()
            if bulk:
                items = [{"handler": HANDLER, "params": {"i": i}} for i in range(n)]
                results = client.submit_many(namespace, items)
                if not all(r.status == "created" for r in results):
                    raise RuntimeError("submit_many: some items were not created")
            else:
                with ThreadPoolExecutor(THREADS) as threads:
                    work = lambda i: client.submit(namespace, handler=HANDLER, params={"i": i})  # noqa: E731
                    list(threads.map(work, range(n)))
            submit_s = time.perf_counter() - began
        drained = self.drain(server, base, namespace, token, n)
        drain_s = drained["seconds"]
        return {
            "submit": n / submit_s,
            "drain": n / drain_s,
            "e2e": n / (submit_s + drain_s),
            "cpu": drained["cpu"],
            "load": (before + load()) / 2,
        }

    def dispatch(self, worker_bases: list[str], submit_bases: list[str]) -> list[float]:
        """Idle long-polling workers on ``worker_bases``; tasks submitted one at a time to
        ``submit_bases`` in turn: each task's available -> started, in ms."""
        namespace, token = self.tenant("latency")
        fleet = self.workers(worker_bases, namespace, token)
        sessions = "SELECT COUNT(*) FROM worker_sessions WHERE namespace = %s AND state = 'ACTIVE'"
        while self.query(sessions, namespace)[0][0] < len(fleet):
            time.sleep(0.05)
        time.sleep(1.0)  # every worker's lease request is waiting
        clients = [Client(base, token=token) for base in submit_bases]
        samples = self.args.latency_samples
        for i in range(samples):
            clients[i % len(clients)].submit(namespace, handler=HANDLER, params={"i": i})
            time.sleep(self.args.spacing)
        for client in clients:
            client.close()
        self.settled(namespace, samples, fleet)
        self.stop(fleet)
        rows = self.query(
            "SELECT TIMESTAMPDIFF(MICROSECOND, t.available_at, a.started_at) FROM tasks t "
            "JOIN task_attempts a ON a.task_id = t.id WHERE t.namespace = %s",
            namespace,
        )
        return [row[0] / 1000 for row in rows]


def server_sql(url: str, statement: str) -> None:
    conn = raw_sql.connect(url, autocommit=True)
    with conn.cursor() as cur:
        cur.execute(statement)
    conn.close()


def describe(name: str, cell: dict[str, Any]) -> str:
    cpu = ""
    if "cpu" in cell:
        server, workers, mariadb = cell["cpu"]
        cpu = f"; drain CPU ms/task: server {server:.2f}, workers {workers:.2f}, db {mariadb:.2f}"
    return (
        f"  {name:26} submit {cell['submit']:7,.0f}/s  drain {cell['drain']:6,.0f}/s  "
        f"e2e {cell['e2e']:6,.0f}/s  (load {cell['load']:.1f}){cpu}"
    )


def peer(pool: Any, args: argparse.Namespace, name: str, bulk: bool) -> dict[str, Any]:
    before = load()
    cell = peers.peer_cell(pool, args.pg_dsn, name, args.tasks, bulk)
    return {**cell, "load": (before + load()) / 2}


def summary(rows: dict[str, list[dict[str, Any]]], latency: dict[str, list[float]]) -> None:
    say("\n=== medians of the rounds ===")
    med: dict[str, dict[str, float]] = {}
    for name, cells in rows.items():
        med[name] = {k: statistics.median(c[k] for c in cells) for k in ("submit", "drain", "e2e")}
        med[name]["load"] = statistics.median(c["load"] for c in cells)
        say(describe(name, med[name]))
    reference = med.get("pgqueuer bulk")
    if reference:
        say(f"\nagainst pgqueuer's bulk e2e ({reference['e2e']:,.0f}/s):")
        for name in ("orbit bulk", "orbit one by one (8 thr)"):
            if name in med:
                say(f"  {name:26} {med[name]['e2e'] / reference['e2e']:.2f}x")
    for name, values in latency.items():
        say(
            f"\ndispatch available -> started, {name}: p50 {pct(values, 0.5):.1f} ms, p99 "
            f"{pct(values, 0.99):.1f} ms, max {max(values):.1f} ms ({len(values)} tasks)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--database-url", default=DEFAULT_URL, help="created (dropped first), dropped at the end")
    add("--pg-dsn", default=peers.DEFAULT_DSN, help="PostgreSQL for the peers")
    add("--tasks", type=int, default=5000, help="tasks per cell (default 5000)")
    add("--rounds", type=int, default=1, help="every cell this many times, alternated")
    add("--slots-per-worker", type=int, default=8, help="each of the 2 workers' concurrency")
    add("--peers", nargs="*", default=sorted(peers.PEERS), choices=sorted(peers.PEERS))
    add("--raw", action="store_true", help="the raw-SQL lifecycle too (bench/baselines/raw_sql.py)")
    add("--latency-samples", type=int, default=200, help="0: no dispatch measurement")
    add("--spacing", type=float, default=0.02, help="seconds between latency samples")
    add("--keep", action="store_true", help="keep the database and the logs")
    add("--profile", help="py-spy's stacks of each drain's processes into this folder")
    add("--asgi", choices=("uvicorn", "granian"), default="uvicorn", help="the ASGI server")
    args = parser.parse_args()
    raw_pool = None
    if args.raw:  # forked before any thread exists
        raw_pool = multiprocessing.get_context("fork").Pool(2 * args.slots_per_worker)
    peer_pool = multiprocessing.get_context("spawn").Pool(peers.WORKERS)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # -> the finally below
    logs, ok, bench = Path(tempfile.mkdtemp(prefix="orbit-bench-e2e-")), False, None
    name = make_url(args.database_url).database
    try:
        server_sql(args.database_url, f"DROP DATABASE IF EXISTS `{name}`")
        server_sql(args.database_url, f"CREATE DATABASE `{name}`")
        bench = Orbit(args, logs)
        bench.cli("admin", "migrate")
        names = "('innodb_flush_log_at_trx_commit', 'log_bin', 'sync_binlog', 'version')"
        found = dict(bench.query(f"SHOW VARIABLES WHERE Variable_name IN {names}"))
        say(f"MariaDB {found.pop('version')}: {found}; {os.cpu_count()} CPUs; load {load():.1f}")
        if args.peers:
            say(f"PostgreSQL: {peers.settings(args.pg_dsn)}")
        if raw_pool is not None:
            raw_sql.make_tables(bench.db)
        server, base = bench.server("server.log")
        say(f"orbit server {base} (pid {server.pid}), workers 2 x {args.slots_per_worker} slots")
        rows: dict[str, list[dict[str, Any]]] = {}

        def record(label: str, cell: dict[str, Any]) -> None:
            rows.setdefault(label, []).append(cell)
            say(describe(label, cell))

        for round_ in range(args.rounds):
            say(f"round {round_ + 1} of {args.rounds}")
            record("orbit one by one (8 thr)", bench.cell(server, base, bulk=False))
            record("orbit bulk", bench.cell(server, base, bulk=True))
            for peer_name in args.peers:
                record(f"{peer_name} one by one", peer(peer_pool, args, peer_name, False))
                record(f"{peer_name} bulk", peer(peer_pool, args, peer_name, True))
            if raw_pool is not None:
                before, ns = load(), f"raw-{round_}"
                slots = 2 * args.slots_per_worker
                cell = raw_sql.raw_cell(raw_pool, args.database_url, ns, slots, args.tasks, THREADS)
                record("raw SQL", {**cell, "load": (before + load()) / 2})
        latency: dict[str, list[float]] = {}
        if args.latency_samples:
            latency["one replica"] = bench.dispatch([base, base], [base])
            _, other = bench.server("server-2.log")
            latency["two replicas, spread"] = bench.dispatch([base, other], [base, other])
            latency["two replicas, probe only"] = bench.dispatch([base, base], [other])
        summary(rows, latency)
        for log in sorted(logs.glob("*.log")):
            lines = log.read_text(errors="replace").splitlines()
            marks = ('"level": "error"', "Traceback")
            if bad := [line for line in lines if any(m in line for m in marks)]:
                say(f"  {log.name}: {len(bad)} error lines, first: {bad[0][:300]}")
        ok = True
    finally:
        if bench is not None:
            bench.stop(bench.procs)
            bench.db.close()
        peer_pool.terminate()
        if raw_pool is not None:
            raw_pool.terminate()
        if not args.keep:
            server_sql(args.database_url, f"DROP DATABASE IF EXISTS `{name}`")
        if ok and not args.keep:
            for log in logs.glob("*.log"):
                log.unlink()
            logs.rmdir()
        else:
            say(f"logs kept in {logs}")


if __name__ == "__main__":
    main()
