"""End-to-end throughput and dispatch latency of a real `orbit server` + `orbit worker`s, beside the
same task lifecycle written as plain PyMySQL (the raw-SQL ceiling), measured in the same run.

For each total of worker slots (1 = one process with 1 slot, 4 = 2+2, 16 = 8+8, 64 = 32+32: the
last makes the worker batches large enough for the set-based paths): submit N tasks
over HTTP (SDK ``Client.submit``, several threads), start the workers, wait until all are SUCCEEDED
("pre-submitted"); then submit N more while the workers run ("live"); then stop the workers, submit
N more with ``Client.submit_many`` (requests of --batch-size) and drain them again. The workers
lease with start (worker protocol 3: no start call; ``--no-lease-with-start`` for protocol 2),
batch their reports, and wait ``--lease-linger`` for fuller lease requests. Drain time comes from
the database's own timestamps (first lease -> last finish), so worker start-up is not counted.
Dispatch latency: idle long-polling workers, one task at a time; available_at -> leased/started.
Raw: scratch tables made with CREATE TABLE ... LIKE, as many processes as slots, READ COMMITTED.
``--rounds N`` alternates the Orbit and raw cells N times and prints each round's ratios and
their medians: a machine whose speed drifts during the run (a shared host) moves both sides of a
round alike, while one round's ratio can be off by the drift between its two halves.
Usage: ``.venv/bin/python bench/e2e.py [--quick] [--rounds 3] [--keep]`` (see --help).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import multiprocessing
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pymysql
from sqlalchemy.engine import make_url

from orbit_sdk import Client
from orbit_store.ids import new_id

ROOT = Path(__file__).resolve().parents[1]
ORBIT = str(Path(sys.executable).with_name("orbit"))
DEFAULT_URL = "mysql+pymysql://root@127.0.0.1:3306/orbit_bench_e2e"
PLANS = {1: (1,), 4: (2, 2), 16: (8, 8), 64: (32, 32)}  # total slots -> each worker's concurrency
NS = "bench"
PEERS = (
    "pgqueuer 1.6 (batch 10), durable PostgreSQL 15, 2 worker processes: ~1.3k jobs/s end to end "
    "(4.6k/s drain)",
    "procrastinate 3.10, same set-up: ~280 jobs/s end to end",
    "Orbit-style SQL on durable MariaDB, no framework: 638 tasks/s (claim 1), 973 (claim 10)",
)
NOW = "UTC_TIMESTAMP(6)"
RAW_SQL = {
    "submit": "INSERT INTO raw_tasks (id, namespace, queue, handler, params, state, wait_path, "
    "state_version, "
    "priority, available_at, created_at, updated_at, max_attempts, attempts_used, "
    "backoff_initial_ms, backoff_max_ms, backoff_multiplier, lease_seconds, safety, "
    "concurrency_limit, cancel_requested, submitted_by) VALUES (%s, %s, 'default', 'bench.noop', "
    f"%s, 'WAITING', 'READY', 1, 0, {NOW}, {NOW}, {NOW}, 3, 0, 1000, 300000, 2.0, 300, 'safe', 1, "
    "0, 'b')",
    "event": "INSERT INTO raw_task_events (id, task_id, namespace, state_version, from_state, "
    f"to_state, reason, attempt_id, at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, {NOW})",
    "pick": "SELECT id, state_version, lease_seconds FROM raw_tasks WHERE namespace = %s AND "
    "queue = 'default' AND wait_path = 'READY' "
    "ORDER BY priority, available_at LIMIT 1 FOR UPDATE SKIP LOCKED",
    "lease_task": "UPDATE raw_tasks SET state = 'LEASED', wait_path = NULL, "
    "state_version = state_version + 1, "
    f"attempts_used = attempts_used + 1, current_attempt_id = %s, updated_at = {NOW} "
    "WHERE id = %s AND state = 'WAITING'",
    "attempt": "INSERT INTO raw_task_attempts (id, task_id, namespace, generation, token_hash, "
    f"state, leased_at, lease_expires_at) VALUES (%s, %s, %s, %s, %s, 'LEASED', {NOW}, "
    f"{NOW} + INTERVAL %s SECOND)",
    "start_attempt": f"UPDATE raw_task_attempts SET state = 'RUNNING', started_at = {NOW}, "
    f"heartbeat_at = {NOW} WHERE id = %s AND token_hash = %s AND state = 'LEASED' "
    f"AND lease_expires_at > {NOW}",
    "start_task": f"UPDATE raw_tasks SET state = 'RUNNING', state_version = %s, updated_at = {NOW} "
    "WHERE id = %s AND state = 'LEASED' AND state_version = %s",
    "finish_attempt": f"UPDATE raw_task_attempts SET state = 'FINISHED', finished_at = {NOW}, "
    "outcome = 'SUCCEEDED', outcome_reason = 'succeeded', result = 'null' "
    "WHERE id = %s AND token_hash = %s AND state = 'RUNNING'",
    "finish_task": f"UPDATE raw_tasks SET state = 'SUCCEEDED', state_version = %s, updated_at = "
    f"{NOW}, finished_at = {NOW}, current_attempt_id = NULL, result = 'null' "
    "WHERE id = %s AND state = 'RUNNING' AND state_version = %s",
}


def say(*parts: str) -> None:
    print("".join(parts), flush=True)


def connect(url: str, database: str | None = None, autocommit: bool = False) -> Any:
    args = make_url(url).translate_connect_args(username="user") | {"database": database}
    conn = pymysql.connect(**args, charset="utf8mb4", autocommit=autocommit)
    with conn.cursor() as cur:
        cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        cur.execute("SET time_zone = '+00:00', innodb_lock_wait_timeout = 10")
    return conn


# --- the raw-SQL ceiling, in pool processes ------------------------------------------------------
_CONN: Any = None
_RETRIES = [0]


def raw_warm(url: str) -> None:
    global _CONN
    if _CONN is None:
        _CONN = connect(url, make_url(url).database)
    time.sleep(0.5)  # so that every pool process takes one warm-up item


def _tx(work: Any, *args: Any) -> Any:
    while True:
        try:
            with _CONN.cursor() as cur:
                result = work(cur, *args)
            _CONN.commit()
            return result
        except pymysql.err.OperationalError as exc:
            _CONN.rollback()
            if exc.args[0] not in (1213, 1205):
                raise
            _RETRIES[0] += 1


def _run(cur: Any, name: str, *params: Any, one: bool = True) -> None:
    if cur.execute(RAW_SQL[name], params) != 1 and one:
        raise RuntimeError(f"expected one row: {RAW_SQL[name]}")


def _event(cur: Any, ns: str, task_id: str, version: int, move: str, attempt: Any) -> None:
    from_state, to_state, reason = move.split()
    _run(cur, "event", new_id(), task_id, ns, version, from_state, to_state, reason, attempt)


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _submit(cur: Any, ns: str, i: int) -> None:
    task_id = new_id()
    _run(cur, "submit", task_id, ns, f'{{"i": {i}}}')
    _run(cur, "event", new_id(), task_id, ns, 1, None, "WAITING", "submitted", None)


def _claim(cur: Any, ns: str) -> Any:
    _run(cur, "pick", ns, one=False)
    if (row := cur.fetchone()) is None:
        return None
    (task_id, version, lease), attempt_id, token = row, new_id(), secrets.token_urlsafe(32)
    _run(cur, "lease_task", attempt_id, task_id)
    _run(cur, "attempt", attempt_id, task_id, ns, version + 1, _hash(token), lease)
    _event(cur, ns, task_id, version + 1, "WAITING LEASED claimed", attempt_id)
    return task_id, attempt_id, token, version + 1


def _start(cur: Any, ns: str, task_id: str, attempt_id: str, token: str, version: int) -> None:
    _run(cur, "start_attempt", attempt_id, _hash(token))
    _run(cur, "start_task", version + 1, task_id, version)
    _event(cur, ns, task_id, version + 1, "LEASED RUNNING started", attempt_id)


def _complete(cur: Any, ns: str, task_id: str, attempt_id: str, token: str, version: int) -> None:
    _run(cur, "finish_attempt", attempt_id, _hash(token))
    _run(cur, "finish_task", version + 2, task_id, version + 1)
    _event(cur, ns, task_id, version + 2, "RUNNING SUCCEEDED succeeded", attempt_id)


def raw_part(url: str, ns: str, start_at: float, numbers: range | None) -> tuple[int, float, int]:
    """Submit ``numbers`` (one transaction each), or drain: claim, start, complete until empty."""
    raw_warm(url)
    _RETRIES[0], done = 0, 0
    time.sleep(max(start_at - time.time(), 0))
    for i in numbers or ():
        _tx(_submit, ns, i)
    while numbers is None and (grant := _tx(_claim, ns)) is not None:
        _tx(_start, ns, *grant)
        _tx(_complete, ns, *grant)
        done += 1
    return done, time.time(), _RETRIES[0]


def orbit_submit_part(base: str, token: str, start_at: float, numbers: range) -> float:
    """One submitting process: its share of one-by-one ``Client.submit`` calls; when it ended."""
    with Client(base, token=token, timeout=30) as client:
        time.sleep(max(start_at - time.time(), 0))
        for i in numbers:
            client.submit(NS, handler="bench.noop", params={"i": i})
    return time.time()


def raw_cell(pool: Any, url: str, slots: int, n: int, submitters: int) -> dict[str, float]:
    ns, start_at = f"raw-{slots}", time.time() + 1.0
    shares = [(url, ns, start_at, range(k, n, submitters)) for k in range(submitters)]
    submit_s = max(p[1] for p in pool.starmap(raw_part, shares, chunksize=1)) - start_at
    start_at = time.time() + 1.0
    parts = pool.starmap(raw_part, [(url, ns, start_at, None)] * slots, chunksize=1)
    drain_s = max(p[1] for p in parts) - start_at
    if sum(p[0] for p in parts) != n:
        raise RuntimeError(f"raw drain finished {sum(p[0] for p in parts)} of {n} tasks")
    out = {"submit": n / submit_s, "drain": n / drain_s, "e2e": n / (submit_s + drain_s)}
    return out | {"retries": sum(p[2] for p in parts)}


# --- Orbit through its real interfaces -----------------------------------------------------------
def process_tree(pid: int) -> list[int]:
    """``pid`` and its child processes (the HTTP processes of `orbit server --workers N`)."""
    children = []
    for thread in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            children += [int(c) for c in (thread / "children").read_text().split()]
    return [pid, *children]


def cpu_seconds(pid: int) -> float:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:  # gone meanwhile
        return 0.0
    return (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")


def mariadb_pid() -> int | None:
    """The local mariadbd/mysqld (None when the database runs elsewhere)."""
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            names = ("mariadbd", "mysqld")
            if proc.name.isdigit() and (proc / "comm").read_text().strip() in names:
                return int(proc.name)
    return None


def pct(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))]


_BY_STATE = "SELECT state, COUNT(*) FROM tasks WHERE namespace = %s GROUP BY state"


class Bench:
    def __init__(self, args: argparse.Namespace, logs: Path) -> None:
        self.args, self.logs, self.url, self.expected = args, logs, args.database_url, 0
        self.procs: list[subprocess.Popen[bytes]] = []  # every process started, for the cleanup
        self.workers: list[subprocess.Popen[bytes]] = []
        self.db = connect(self.url, make_url(self.url).database, autocommit=True)
        self.mariadb = mariadb_pid()
        self.drain_cpu: dict[str, float] = {}  # CPU seconds of the last drain, by process kind
        self.drain_questions = 0  # statements MariaDB received during the last drain

    def orbit(self, *argv: str) -> str:
        cmd = [ORBIT, *argv, "--database-url", self.url]
        return subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout

    def spawn(self, argv: list[str], log: str, **env: str) -> subprocess.Popen[bytes]:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "ORBIT_LOG_LEVEL": self.args.log_level, **env}
        with (self.logs / log).open("ab") as out:  # own session: Ctrl-C reaches only us
            kw: Any = {"stdout": out, "stderr": subprocess.STDOUT, "start_new_session": True}
            proc = subprocess.Popen([ORBIT, *argv], env=env, cwd=ROOT, **kw)
        self.procs.append(proc)
        return proc

    def start_server(self, *extra: str, log: str = "server.log") -> None:
        """`orbit server` on a free port (``extra``: more of its options), once it is ready."""
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        self.base = f"http://127.0.0.1:{port}"
        argv = ["server", "--port", str(port), "--workers", str(self.args.server_workers), *extra]
        self.server = self.spawn(argv, log, ORBIT_DATABASE_URL=self.url)
        for _ in range(300):
            self.check_alive()
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.base}/readyz", timeout=1).status_code == 200:
                    return
            time.sleep(0.1)
        raise RuntimeError("orbit server not ready after 30s")

    def check_alive(self) -> None:
        for proc in [self.server, *self.workers]:
            if proc.poll() is not None:
                raise RuntimeError(f"{proc.args} exited with {proc.returncode}; see {self.logs}")

    def query(self, sql: str, *params: Any) -> Any:
        with self.db.cursor() as cur:
            cur.execute(sql, params)
            return cur.fetchall()

    def start_workers(self, slots: int) -> None:
        for k, concurrency in enumerate(PLANS[slots]):
            env = {"ORBIT_SERVER": self.base, "ORBIT_TOKEN": self.token, "ORBIT_NAMESPACE": NS}
            env |= {"BENCH_CONCURRENCY": str(concurrency), "BENCH_WORKER_NAME": f"w{slots}-{k}"}
            env |= {
                "BENCH_LEASE_WITH_START": str(int(self.args.lease_with_start)),
                "BENCH_LEASE_LINGER": str(self.args.lease_linger),
            }
            argv = ["worker", "bench.e2e_worker:worker"]
            self.workers.append(self.spawn(argv, f"worker-{slots}-{k}.log", **env))

    def stop(self, procs: list[subprocess.Popen[bytes]]) -> None:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                say(f"  ! {proc.args} ignored SIGTERM for 15s; killing it")
                proc.kill()
                proc.wait()

    def submit(self, client: Client, n: int) -> float:
        """``n`` one-by-one ``Client.submit`` calls from ``--submitters`` processes (as the raw
        baseline submits), or threads of this process with ``--submit-threads``."""
        self.expected += n
        if self.args.submit_threads:
            began = time.perf_counter()
            with ThreadPoolExecutor(self.args.submitters) as threads:
                work = lambda i: client.submit(NS, handler="bench.noop", params={"i": i})  # noqa: E731
                list(threads.map(work, range(n)))
            return time.perf_counter() - began
        start_at, k = time.time() + 1.0, self.args.submitters
        shares = [(self.base, self.token, start_at, range(j, n, k)) for j in range(k)]
        return max(self.pool.starmap(orbit_submit_part, shares, chunksize=1)) - start_at

    def wait_done(self, stall: float = 30.0) -> None:
        """Until every submitted task has settled (one poll per 50 ms), then checks that all are
        SUCCEEDED; loud when stuck. The poll counts only the unsettled states, an index range
        that shrinks as the drain goes: counting every state of the namespace would scan all
        of its tasks, which grows over the rounds, on the MariaDB the drain is measured on
        (the raw cells have no such poll)."""
        last, since = -1, time.monotonic()
        open_states = "('WAITING', 'LEASED', 'RUNNING', 'NEEDS_REVIEW')"
        unsettled = f"SELECT COUNT(*) FROM tasks WHERE namespace = %s AND state IN {open_states}"
        while True:
            self.check_alive()
            left = self.query(unsettled, NS)[0][0]
            if left == 0:
                break
            if left != last:
                last, since = left, time.monotonic()
            elif time.monotonic() - since > stall:
                counts = dict(self.query(_BY_STATE, NS))
                raise RuntimeError(f"no progress for {stall}s: {counts} (want {self.expected})")
            time.sleep(0.05)
        counts = dict(self.query(_BY_STATE, NS))
        if counts.get("SUCCEEDED", 0) != self.expected or len(counts) > 1:
            raise RuntimeError(f"expected {self.expected} SUCCEEDED tasks, have {counts}")

    def mark(self) -> tuple[Any, int, float]:
        """The DB clock, MariaDB's count of connections ever opened (server-wide, so other
        clients of this MariaDB add to it), and the CPU seconds the orbit server used (Linux;
        with --server-workers, its HTTP processes too)."""
        now = self.query("SELECT UTC_TIMESTAMP(6)")[0][0]
        conns = int(self.query("SHOW GLOBAL STATUS LIKE 'Connections'")[0][1])
        return now, conns, sum(map(cpu_seconds, process_tree(self.server.pid)))

    def phase(self, mark: Any) -> tuple[float, float]:
        """Seconds from the first lease and from the first submit to the last finish (DB clock)."""
        ((tasks, attempts, created, leased, finished),) = self.query(
            "SELECT COUNT(DISTINCT t.id), COUNT(a.id), MIN(t.created_at), MIN(a.leased_at), "
            "MAX(t.finished_at) FROM tasks t LEFT JOIN task_attempts a ON a.task_id = t.id "
            "WHERE t.namespace = %s AND t.created_at >= %s",
            *(NS, mark),
        )
        if attempts != tasks:
            say(f"  ! {attempts} attempts for {tasks} tasks (retries or lost leases)")
        return (finished - leased).total_seconds(), (finished - created).total_seconds()

    def submit_many(self, client: Client, n: int) -> float:
        """``Client.submit_many`` in requests of ``--batch-size``, ``--submitters`` at a time."""
        items = [{"handler": "bench.noop", "params": {"i": i}} for i in range(n)]
        size = self.args.batch_size
        chunks = [items[k : k + size] for k in range(0, n, size)]
        began = time.perf_counter()
        with ThreadPoolExecutor(self.args.submitters) as pool:
            answers = list(pool.map(lambda chunk: client.submit_many(NS, chunk), chunks))
        took = time.perf_counter() - began
        if not all(r.status == "created" for results in answers for r in results):
            raise RuntimeError("submit_many: some items were not created")
        self.expected += n
        return took

    def questions(self) -> int:
        """MariaDB's count of statements clients sent (server-wide: this script's polls count)."""
        return int(self.query("SHOW GLOBAL STATUS LIKE 'Questions'")[0][1])

    def workers_cpu(self) -> float:
        return sum(cpu_seconds(p) for w in self.workers for p in process_tree(w.pid))

    def drain(self, slots: int, mark: Any) -> float:
        """Start the workers on the pre-submitted backlog; seconds from first lease to last
        finish (DB clock). Keeps the CPU seconds the server, the workers (from their first
        lease on, so not their start-up) and the local MariaDB spent in ``self.drain_cpu``."""
        db = cpu_seconds(self.mariadb) if self.mariadb else 0.0
        self.start_workers(slots)
        newest = "SELECT leased_at FROM task_attempts ORDER BY id DESC LIMIT 1"  # UUIDv7 ids
        while not (row := self.query(newest)) or row[0][0] < mark:
            self.check_alive()
            time.sleep(0.005)
        workers, server, questions = self.workers_cpu(), self.mark()[2], self.questions()
        self.wait_done()
        self.drain_cpu = {
            "server": self.mark()[2] - server,
            "workers": self.workers_cpu() - workers,
            "mariadb": (cpu_seconds(self.mariadb) - db) if self.mariadb else float("nan"),
        }
        self.drain_questions = self.questions() - questions
        return self.phase(mark)[0]

    def orbit_cell(self, client: Client, slots: int) -> dict[str, float]:
        n, (mark, conns, cpu) = self.args.tasks, self.mark()
        cpus = [cpu]  # server CPU seconds at each phase boundary

        def lap() -> None:
            cpus.append(self.mark()[2])

        submit_s = self.submit(client, n)
        lap()
        drain_s = self.drain(slots, mark)
        drain_cpu, drain_questions = self.drain_cpu, self.drain_questions
        lap()
        mark = self.mark()[0]
        self.submit(client, n)
        self.wait_done()
        live_s = self.phase(mark)[1]
        self.stop(self.workers)
        self.workers, mark = [], self.mark()[0]
        lap()
        many_s = self.submit_many(client, n)
        lap()
        many_drain_s = self.drain(slots, mark)
        drain2_cpu, drain2_questions = self.drain_cpu, self.drain_questions
        lap()
        out = {"submit": n / submit_s, "drain": n / drain_s, "e2e": n / (submit_s + drain_s)}
        out |= {"many": n / many_s, "many_drain": n / many_drain_s}
        out["many_e2e"] = n / (many_s + many_drain_s)
        _, conns_after, cpu_after = self.mark()
        out |= {"live": n / live_s, "cpu": (cpu_after - cpu) * 1000 / (3 * n)}
        phases = [(cpus[k + 1] - cpus[k]) * 1000 / n for k in range(len(cpus) - 1)]
        names = ("cpu_submit", "cpu_drain", "cpu_live", "cpu_many", "cpu_drain2")
        out |= dict(zip(names, phases, strict=True))
        say(
            f"  orbit {slots:2} slots: submit {out['submit']:6,.0f}/s, drain {out['drain']:6,.0f}",
            f"/s, e2e {out['e2e']:6,.0f}/s, live {out['live']:6,.0f}/s; submit_many ",
            f"{out['many']:6,.0f}/s, drain {out['many_drain']:6,.0f}/s, e2e ",
            f"{out['many_e2e']:6,.0f}/s; server CPU {out['cpu']:.2f} ms/task (submit ",
            f"{out['cpu_submit']:.2f}, drain {out['cpu_drain']:.2f}, live {out['cpu_live']:.2f}, ",
            f"submit_many {out['cpu_many']:.2f}, its drain {out['cpu_drain2']:.2f}); ",
            f"{(conns_after - conns) / (3 * n):.2f} new MySQL connections/task (server-wide)",
        )
        for name, cpu_by, asked in (
            ("drain", drain_cpu, drain_questions),
            ("drain after submit_many", drain2_cpu, drain2_questions),
        ):
            split = ", ".join(f"{k} {v * 1000 / n:.2f}" for k, v in cpu_by.items())
            per = f"{asked / n:.1f} statements/task"
            say(f"    {name} (first lease on): CPU ms/task {split}; {per}")
        return out

    def latency(self, client: Client, samples: int) -> dict[str, list[float]]:
        mark = self.mark()[0]
        for i in range(samples):
            client.submit(NS, handler="bench.noop", params={"i": i})
            time.sleep(self.args.spacing)
        self.expected += samples
        self.wait_done()
        ends = {"leased": "a.leased_at", "started": "a.started_at", "SUCCEEDED": "t.finished_at"}
        cols = ", ".join(f"TIMESTAMPDIFF(MICROSECOND, t.available_at, {c})" for c in ends.values())
        join = "FROM tasks t JOIN task_attempts a ON a.task_id = t.id"
        rows = self.query(
            f"SELECT {cols} {join} WHERE t.namespace = %s AND t.created_at >= %s", NS, mark
        )
        return {f"available -> {e}": [row[k] / 1000 for row in rows] for k, e in enumerate(ends)}


def server_sql(url: str, statement: str) -> None:
    conn = connect(url, autocommit=True)
    with conn.cursor() as cur:
        cur.execute(statement)
    conn.close()


def _ratio_values(o: dict[str, float], r: dict[str, float]) -> dict[str, float]:
    return {
        "e2e": o["e2e"] / r["e2e"],
        "many_e2e": o["many_e2e"] / r["e2e"],
        "drain": o["drain"] / r["drain"],
        "many_drain": o["many_drain"] / r["drain"],
        "cpu": o["cpu"],
    }


def _ratios(v: dict[str, float]) -> str:
    return (
        f"one-by-one e2e {v['e2e']:.2f}x [>=1.5], submit_many e2e {v['many_e2e']:.2f}x [>=3], "
        f"drain {v['drain']:.2f}x (after submit_many {v['many_drain']:.2f}x) [>=3], server CPU "
        f"{v['cpu']:.2f} ms/task [<=2]"
    )


def report(bench: Bench, rows: list[Any], lat: dict[str, list[float]]) -> None:
    args = bench.args
    say(
        f"\n=== {args.tasks} tasks per cell; {args.submitters} submitting ",
        "threads (Orbit: one Client)" if args.submit_threads else "processes (a Client each)",
        f" / processes (raw); slots -> worker processes' concurrency: {PLANS} ===",
    )
    say(
        "drain = N / (first lease -> last finish, DB clock); e2e = N / (submit time + drain ",
        "time); live = N submitted while the workers ran / (first submit -> last finish)",
    )
    head = "Orbit submit/s,drain/s,e2e/s,many e2e/s,raw submit/s,drain/s,e2e/s"
    say("slots", *(f"{h:>13}" for h in head.split(",")), "  CPU ms/task")
    for slots, o, r in rows:
        cells = [o["submit"], o["drain"], o["e2e"], o["many_e2e"], r["submit"], r["drain"]]
        say(f"{slots:>5}", *(f"{v:>13,.0f}" for v in [*cells, r["e2e"]]), f"{o['cpu']:>13.2f}")
    say("\nratios to the raw-SQL lifecycle of the same run (issue 9 targets in brackets):")
    for slots, o, r in rows:
        say(f"{slots:>5} slots: {_ratios(_ratio_values(o, r))}")
    for slots in sorted({slots for slots, _, _ in rows}):
        rounds = [_ratio_values(o, r) for s, o, r in rows if s == slots]
        if len(rounds) > 1:
            medians = {k: statistics.median(v[k] for v in rounds) for k in rounds[0]}
            say(f"{slots:>5} slots, median of {len(rounds)} rounds: {_ratios(medians)}")
    say(f"(ratio = Orbit / raw; raw deadlock/lock-wait retries: {[r[2]['retries'] for r in rows]})")
    if lat:
        n, plan = len(next(iter(lat.values()))), "+".join(map(str, PLANS[args.latency_slots]))
        say(
            f"\ndispatch latency (ms), {n} tasks one at a time every {args.spacing * 1000:.0f} ",
            f"ms, idle long-polling workers ({plan} slots):",
        )
        for name, v in lat.items():
            say(f"  {name:24} p50 {pct(v, 0.5):7.1f}  p99 {pct(v, 0.99):7.1f}  max {max(v):7.1f}")
    say("\nfor context -- measured elsewhere on this machine, NOT in this run (MYSQL-FACTS.md):")
    say("\n".join(f"  {peer}" for peer in PEERS))
    say("\nwarning/error lines in the server and worker logs:")
    for log in sorted(bench.logs.glob("*.log")):
        marks = ('"level": "warning"', '"level": "error"', "Traceback")
        lines = log.read_text(errors="replace").splitlines()
        if bad := [line for line in lines if any(m in line for m in marks)]:
            say(f"  {log.name}: {len(bad)}, first: {bad[0][:300]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--database-url", default=DEFAULT_URL, help="created (dropped first), dropped at the end")
    add("--tasks", type=int, default=2000, help="tasks per throughput cell (default 2000)")
    add("--latency-samples", type=int, default=200, help="default 200")
    add("--spacing", type=float, default=0.02, help="seconds between latency samples")
    add("--latency-slots", type=int, default=4, choices=sorted(PLANS), help="default 4 (2+2)")
    add("--submitters", type=int, default=8, help="submitting processes (Orbit and raw)")
    add(
        "--submit-threads",
        action="store_true",
        help="Orbit's one-by-one submitters are threads of one process (one client's GIL)",
    )
    add("--batch-size", type=int, default=1000, help="items per submit_many request (<= 1000)")
    add("--slots", type=int, nargs="+", default=sorted(PLANS), choices=sorted(PLANS))
    add("--server-workers", default="1", help="orbit server --workers (default 1)")
    add("--log-level", default="INFO", help="ORBIT_LOG_LEVEL of the server and workers")
    add("--quick", action="store_true", help="150 tasks per cell, 50 latency samples")
    add(
        "--no-lease-with-start",
        dest="lease_with_start",
        action="store_false",
        help="workers start every grant by a call (protocol 2, before issue 9)",
    )
    add(
        "--lease-linger",
        type=float,
        default=0.01,
        help="workers' lease_linger (0: ask as soon as one slot is free, before issue 9)",
    )
    add("--keep", action="store_true", help="keep the database and the logs")
    add(
        "--rounds",
        type=int,
        default=1,
        help="Orbit and raw cells alternated this many times per slot count; medians printed",
    )
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.quick:
        args.tasks, args.latency_samples = 150, 50
    size = max(*args.slots, args.submitters)  # forked before any thread exists; Ctrl-C is ours
    pool = multiprocessing.get_context("fork").Pool(
        size, signal.signal, (signal.SIGINT, signal.SIG_IGN)
    )
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM -> the finally below
    logs, bench, ok = Path(tempfile.mkdtemp(prefix="orbit-bench-e2e-")), None, False
    name = make_url(args.database_url).database
    try:
        server_sql(args.database_url, f"DROP DATABASE IF EXISTS `{name}`")
        server_sql(args.database_url, f"CREATE DATABASE `{name}`")
        bench = Bench(args, logs)
        bench.pool = pool
        say(bench.orbit("admin", "migrate").strip().splitlines()[-1])
        roles = ("-r", "submit", "-r", "work", "--name", "bench")
        bench.token = bench.orbit("admin", "token", "create", "-n", NS, *roles).strip()
        names = "('innodb_flush_log_at_trx_commit', 'log_bin', 'sync_binlog', 'version')"
        settings = dict(bench.query(f"SHOW VARIABLES WHERE Variable_name IN {names}"))
        say(f"MariaDB {settings.pop('version')}, durability settings in force: {settings}")
        say(f"{os.cpu_count()} CPUs, shared by MariaDB, the server, the workers and this script")
        say(
            f"workers: lease with start {'on' if args.lease_with_start else 'off'}, "
            f"lease_linger {args.lease_linger}s; load: {os.getloadavg()}"
        )
        for table in ("tasks", "task_attempts", "task_events"):
            bench.query(f"CREATE TABLE raw_{table} LIKE {table}")
        bench.start_server()
        say(f"orbit server on {bench.base} (pid {bench.server.pid}); logs in {logs}")
        rows, lat = [], {}
        with Client(bench.base, token=bench.token, timeout=30) as client:
            for slots in args.slots:
                for round_ in range(args.rounds):
                    orbit = bench.orbit_cell(client, slots)
                    if slots == args.latency_slots and args.latency_samples and not round_:
                        lat = bench.latency(client, args.latency_samples)
                    bench.stop(bench.workers)
                    bench.workers = []
                    pool.map(raw_warm, [args.database_url] * size, chunksize=1)
                    raw = raw_cell(pool, args.database_url, slots, args.tasks, args.submitters)
                    say(
                        f"  raw   {slots:2} slots: submit {raw['submit']:6,.0f}/s, drain ",
                        f"{raw['drain']:6,.0f}/s, e2e {raw['e2e']:6,.0f}/s",
                    )
                    rows.append((slots, orbit, raw))
        report(bench, rows, lat)
        ok = True
    finally:
        if bench is not None:
            bench.stop(bench.procs)
            bench.db.close()
        pool.terminate()
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
