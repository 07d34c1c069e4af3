"""Claim and complete throughput of Orbit's store, beside the same transactions in raw PyMySQL.

Over a WAITING backlog (bulk-loaded rows shaped like ``submit_task`` writes: a tasks row and its
"submitted" task_event, no idempotency keys; topped up before every cell), each cell runs N
processes for S seconds of claims (B tasks per transaction), then S seconds of start + complete:
orbit = ``claim_tasks`` / ``start_attempt`` / ``complete_attempt`` via ``run_transaction`` (own
engine and worker session per process); raw = PyMySQL, READ COMMITTED: claim = SKIP LOCKED select,
insert attempts, update tasks, insert events, commit; start = update attempt, update task, insert
event, commit; complete = the same plus a result_event (Orbit writes one too), commit.
Usage: ``.venv/bin/python bench/tasks/claim.py [--quick]`` (see --help).
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import hashlib
import json
import logging
import multiprocessing
import os
import secrets
import statistics
import time
import uuid
from typing import Any

import pymysql
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import make_url

from orbit_store.db import create_store_engine, run_transaction
from orbit_store.ids import new_id
from orbit_store.pulse.claim.claim import claim_tasks
from orbit_store.pulse.leases.complete import complete_attempt
from orbit_store.pulse.leases.start import start_attempt
from orbit_store.pulse.limits.queues import put_queue
from orbit_store.pulse.model import Outcome, QueuePolicy
from orbit_store.pulse.workers.sessions import register_session
from orbit_store.upgrade import migrate

DEFAULT_URL = "mysql+pymysql://root@127.0.0.1:3306/orbit_bench"
QUEUE = "bench"
CLIENTS = (1, 4, 16)
BATCHES = (1, 50)
LOAD_CHUNK = 2_000
PHASE_GAP = 0.3  # seconds between the claim phase and the start+complete phase

TASK_COLUMNS = (
    "id, namespace, queue, handler, params, state, wait_path, state_version, priority, "
    "available_at, created_at, updated_at, max_attempts, attempts_used, backoff_initial_ms, "
    "backoff_max_ms, backoff_multiplier, lease_seconds, safety, concurrency_limit, cancel_requested"
)
#: max_attempts .. cancel_requested as submit_task snapshots them from the default QueuePolicy,
#: except lease_seconds (an hour: nothing is reaped while the bench runs).
TASK_DEFAULTS = (3, 0, 1000, 300000, 2.0, 3600, "safe", 1, 0)
EVENT_SQL = (
    "INSERT INTO task_events (id, task_id, namespace, state_version, from_state, to_state, "
    "reason, attempt_id, at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
WAITING_SQL = "SELECT COUNT(*) FROM tasks WHERE namespace = %s AND queue = %s AND state = 'WAITING'"
CLAIM_SQL = (
    "SELECT id, state_version, lease_seconds, UTC_TIMESTAMP(6) FROM tasks "
    "WHERE namespace = %s AND queue = %s AND wait_path = 'READY' "
    "ORDER BY priority, available_at LIMIT %s FOR UPDATE SKIP LOCKED"
)


# --- set-up, in the main process -----------------------------------------------------------------
def raw_connect(url: sa.URL, database: str | None = None) -> Any:
    args = {**url.translate_connect_args(username="user"), "database": database}
    conn = pymysql.connect(**args, charset="utf8mb4")
    with conn.cursor() as cur:
        cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        cur.execute("SET time_zone = '+00:00', innodb_lock_wait_timeout = 10")
    return conn


def load_waiting(conn: Any, namespace: str, count: int) -> float:
    """Bulk-insert ``count`` WAITING tasks and their events (multi-row INSERTs); seconds taken."""
    began = time.perf_counter()
    with conn.cursor() as cur:
        cur.execute("SELECT UTC_TIMESTAMP(6)")
        now = cur.fetchone()[0]
        for start in range(0, count, LOAD_CHUNK):
            ids = [new_id() for _ in range(start, min(start + LOAD_CHUNK, count))]
            head, tail = (namespace, QUEUE, "bench.noop"), ("WAITING", "READY", 1, 0, now, now, now)
            rows = [(i, *head, json.dumps({"n": n}), *tail) for n, i in enumerate(ids, start)]
            cur.executemany(
                f"INSERT INTO tasks ({TASK_COLUMNS}) VALUES ({', '.join(['%s'] * 21)})",
                [(*row, *TASK_DEFAULTS) for row in rows],
            )
            events = [(new_id(), i, namespace, 1, None, "WAITING", "submitted") for i in ids]
            cur.executemany(EVENT_SQL, [(*e, None, now) for e in events])
            conn.commit()
    conn.commit()
    return time.perf_counter() - began


def explain_claim(engine: sa.Engine, namespace: str) -> None:
    """Capture the SQL pulse/claim/claim.py really sends (engine event) and EXPLAIN it on the
    backlog."""
    captured: list[tuple[str, Any]] = []

    def capture(_conn: Any, _cur: Any, statement: str, params: Any, *_: Any) -> None:
        if "SKIP LOCKED" in statement:
            captured.append((statement, params))

    event.listen(engine, "before_cursor_execute", capture)
    with engine.connect() as conn, conn.begin() as tx:
        claim_tasks(conn, namespace=namespace, queues_=[QUEUE], limit=50)
        tx.rollback()
    event.remove(engine, "before_cursor_execute", capture)
    statement, params = captured[0]
    with engine.connect() as conn:
        plan = json.loads(conn.exec_driver_sql("EXPLAIN FORMAT=JSON " + statement, params).scalar())
    print("Orbit's claim statement (captured from claim_tasks, limit 50):")
    print("  " + " ".join(statement.split()), "\n  params:", params)
    print("EXPLAIN FORMAT=JSON:\n" + json.dumps(plan, indent=1))
    table = _find(plan, "table")
    ok = table.get("key") == "ix_tasks_ready" and table.get("access_type") == "ref"
    print(
        f"=> access_type={table.get('access_type')} key={table.get('key')} "
        f"used_key_parts={table.get('used_key_parts')} rows~{table.get('rows')} "
        f"filesort={'filesort' in json.dumps(plan)}: "
        f"{'a' if ok else 'NOT a'} seek into the READY range of ix_tasks_ready\n"
    )


def _find(node: Any, key: str) -> Any:
    if isinstance(node, dict):
        return node[key] if key in node else _find(list(node.values()), key)
    found = [_find(item, key) for item in node] if isinstance(node, list) else []
    return next((f for f in found if f), {})


# --- one cell, in each pool process --------------------------------------------------------------
_ENGINE: sa.Engine | None = None
_RAW: Any = None
_RETRIES = [0]


def _count_retry(_record: logging.LogRecord) -> bool:
    _RETRIES[0] += 1  # orbit_store.db logs every deadlock/lock-wait retry at INFO
    return False


def warm_up(url: str) -> None:
    """Open this pool process's engine and raw connection before anything is timed."""
    global _ENGINE, _RAW
    if _ENGINE is None:
        _ENGINE = create_store_engine(url)
        logging.getLogger("orbit_store.db").addFilter(_count_retry)
        logging.getLogger("orbit_store.db").setLevel(logging.INFO)
        _RAW = raw_connect(make_url(url), make_url(url).database)
    time.sleep(0.5)  # so that every pool process takes one warm-up item


def run_cell(impl: str, url: str, ns: str, batch: int, start_at: float, secs: float) -> Any:
    if _ENGINE is None:
        warm_up(url)
    worker = OrbitWorker(_ENGINE, ns) if impl == "orbit" else RawWorker(_RAW, ns)
    _RETRIES[0] = 0
    finish_start = start_at + secs + PHASE_GAP
    grants: list[Any] = []
    latencies, drained = [], False
    time.sleep(max(start_at - time.time(), 0))
    while time.time() < start_at + secs:
        began = time.perf_counter()
        got = worker.claim(batch)
        latencies.append(time.perf_counter() - began)
        drained = drained or len(got) < batch  # backlog ran dry: claims/s is a lower bound
        if not got:
            break
        grants += got
    claimed_at, finished = time.time(), 0
    time.sleep(max(finish_start - time.time(), 0))
    for grant in grants:
        if time.time() >= finish_start + secs:
            break
        worker.finish(grant)
        finished += 1
    return {
        "claimed": len(grants),
        "claimed_at": claimed_at,
        "finished": finished,
        "finished_at": time.time(),
        "ran_out": finished == len(grants),
        "drained": drained,
        "latencies": latencies,
        "retries": _RETRIES[0] + worker.retries,
    }


class OrbitWorker:
    def __init__(self, engine: Any, ns: str) -> None:
        self.engine, self.ns, self.retries = engine, ns, 0
        register = functools.partial(register_session, namespace=ns, queues=[QUEUE])
        session = functools.partial(register, worker_name=f"bench-{os.getpid()}")
        self.session = run_transaction(engine, session).id

    def claim(self, batch: int) -> list[Any]:
        work = functools.partial(claim_tasks, namespace=self.ns, queues_=[QUEUE], limit=batch)
        return run_transaction(self.engine, functools.partial(work, worker_session_id=self.session))

    def finish(self, grant: Any) -> None:
        ident = {"namespace": self.ns, "attempt_id": grant.attempt_id, "token": grant.token}
        assert run_transaction(self.engine, functools.partial(start_attempt, **ident)).started
        work = functools.partial(complete_attempt, outcome=Outcome.SUCCEEDED, result={"ok": 1})
        done = run_transaction(self.engine, functools.partial(work, **ident))
        assert done.status.value == "applied", done


def _event(task_id: str, ns: str, version: int, moves: str, attempt_id: str, now: Any) -> Any:
    from_state, to_state, reason = moves.split()
    return (new_id(), task_id, ns, version, from_state, to_state, reason, attempt_id, now)


def _one(cur: Any, sql: str, params: Any) -> None:
    if cur.execute(sql, params) != 1:
        raise RuntimeError(f"expected one row: {sql}")


class RawWorker:
    """The same transactions, hand-written: what Orbit's overhead is measured against."""

    def __init__(self, conn: Any, ns: str) -> None:
        self.conn, self.ns, self.retries = conn, ns, 0

    def _tx(self, work: Any, *args: Any) -> Any:
        while True:
            try:
                with self.conn.cursor() as cur:
                    result = work(cur, *args)
                self.conn.commit()
                return result
            except pymysql.err.OperationalError as exc:
                self.conn.rollback()
                if exc.args[0] not in (1213, 1205):
                    raise
                self.retries += 1

    def claim(self, batch: int) -> list[Any]:
        return self._tx(self._claim, batch)  # type: ignore[no-any-return]

    def _claim(self, cur: Any, batch: int) -> list[Any]:
        cur.execute(CLAIM_SQL, (self.ns, QUEUE, batch))
        rows = cur.fetchall()
        if not rows:
            return []
        grants, attempts, events, case = [], [], [], []
        for task_id, version, lease, now in rows:
            attempt_id, token = new_id(), secrets.token_urlsafe(32)
            token_hash = hashlib.sha256(token.encode()).hexdigest()
            expires = now + dt.timedelta(seconds=lease)
            attempts.append((attempt_id, task_id, self.ns, version + 1, token_hash, now, expires))
            moves = "WAITING LEASED claimed"
            events.append(_event(task_id, self.ns, version + 1, moves, attempt_id, now))
            case += [task_id, attempt_id]
            grants.append((task_id, attempt_id, token, version + 1))
        cur.executemany(
            "INSERT INTO task_attempts (id, task_id, namespace, generation, token_hash, state, "
            "leased_at, lease_expires_at) VALUES (%s, %s, %s, %s, %s, 'LEASED', %s, %s)",
            attempts,
        )
        whens, marks = " ".join(["WHEN %s THEN %s"] * len(rows)), ", ".join(["%s"] * len(rows))
        updated = cur.execute(
            "UPDATE tasks SET state = 'LEASED', wait_path = NULL, "
            "state_version = state_version + 1, "
            f"attempts_used = attempts_used + 1, current_attempt_id = CASE id {whens} END, "
            f"updated_at = %s WHERE id IN ({marks}) AND state = 'WAITING'",
            [*case, rows[0][3], *(row[0] for row in rows)],
        )
        if updated != len(rows):
            raise RuntimeError(f"claim updated {updated} of {len(rows)} locked rows")
        cur.executemany(EVENT_SQL, events)
        return grants

    def finish(self, grant: Any) -> None:
        self._tx(self._start, *grant)
        self._tx(self._complete, *grant)

    def _start(self, cur: Any, task_id: str, attempt_id: str, token: str, version: int) -> None:
        cur.execute("SELECT UTC_TIMESTAMP(6)")
        now, token_hash = cur.fetchone()[0], hashlib.sha256(token.encode()).hexdigest()
        _one(
            cur,
            "UPDATE task_attempts SET state = 'RUNNING', started_at = %s, heartbeat_at = %s, "
            "lease_expires_at = %s WHERE id = %s AND token_hash = %s AND state = 'LEASED' "
            "AND lease_expires_at > %s",
            (now, now, now + dt.timedelta(seconds=3600), attempt_id, token_hash, now),
        )
        _one(
            cur,
            "UPDATE tasks SET state = 'RUNNING', state_version = %s, updated_at = %s "
            "WHERE id = %s AND state = 'LEASED' AND state_version = %s",
            (version + 1, now, task_id, version),
        )
        started = _event(task_id, self.ns, version + 1, "LEASED RUNNING started", attempt_id, now)
        cur.execute(EVENT_SQL, started)

    def _complete(self, cur: Any, task_id: str, attempt_id: str, token: str, version: int) -> None:
        cur.execute("SELECT UTC_TIMESTAMP(6)")
        now, token_hash = cur.fetchone()[0], hashlib.sha256(token.encode()).hexdigest()
        result, done = json.dumps({"ok": 1}), version + 2
        _one(
            cur,
            "UPDATE task_attempts SET state = 'FINISHED', finished_at = %s, outcome = "
            "'SUCCEEDED', outcome_reason = 'succeeded', result = %s "
            "WHERE id = %s AND token_hash = %s AND state = 'RUNNING'",
            (now, result, attempt_id, token_hash),
        )
        _one(
            cur,
            "UPDATE tasks SET state = 'SUCCEEDED', state_version = %s, updated_at = %s, "
            "finished_at = %s, current_attempt_id = NULL, result = %s "
            "WHERE id = %s AND state = 'RUNNING' AND state_version = %s",
            (done, now, now, result, task_id, version + 1),
        )
        moves = "RUNNING SUCCEEDED succeeded"
        cur.execute(EVENT_SQL, _event(task_id, self.ns, done, moves, attempt_id, now))
        payload = json.dumps({"task_id": task_id, "state": "SUCCEEDED", "result": {"ok": 1}})
        cur.execute(
            "INSERT INTO result_events (id, namespace, task_id, state_version, kind, task_state, "
            "queue, handler, payload, created_at) VALUES (%s, %s, %s, %s, 'task.succeeded', "
            "'SUCCEEDED', %s, 'bench.noop', %s, %s)",
            (new_id(), self.ns, task_id, done, QUEUE, payload, now),
        )


# --- driver --------------------------------------------------------------------------------------
def measure(pool: Any, impl: str, url: str, ns: str, clients: int, batch: int, secs: float) -> Any:
    start_at = time.time() + 1.5
    parts = pool.starmap(run_cell, [(impl, url, ns, batch, start_at, secs)] * clients, chunksize=1)
    latencies = sorted(x for p in parts for x in p["latencies"]) or [float("nan")]
    claim_wall = max(p["claimed_at"] for p in parts) - start_at
    finish_wall = max(p["finished_at"] for p in parts) - (start_at + secs + PHASE_GAP)
    return {
        "claims": sum(p["claimed"] for p in parts) / claim_wall,
        "completes": sum(p["finished"] for p in parts) / finish_wall,
        "p50": statistics.median(latencies) * 1000,
        "p99": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000,
        "retries": sum(p["retries"] for p in parts),
        "ran_out": any(p["ran_out"] for p in parts),
        "drained": any(p["drained"] for p in parts),
    }


def run(url: sa.URL, name: str, backlog: int, seconds: float) -> list[Any]:
    url_text = url.set(database=name).render_as_string(hide_password=False)
    namespace = f"bench-{uuid.uuid4().hex[:8]}"
    engine = create_store_engine(url_text)
    migrate.upgrade(engine)
    policy = QueuePolicy(QUEUE, lease_seconds=3600)
    run_transaction(engine, lambda c: put_queue(c, namespace, policy))
    conn = raw_connect(url, name)
    took = load_waiting(conn, namespace, backlog)
    print(
        f"namespace {namespace}; backlog: {backlog} WAITING tasks + {backlog} task_events loaded "
        f"in {took:.1f}s ({backlog / took:,.0f} tasks/s, multi-row INSERTs of {LOAD_CHUNK})\n"
    )
    explain_claim(engine, namespace)
    engine.dispose()
    table = []
    with multiprocessing.get_context("spawn").Pool(max(CLIENTS)) as pool:
        pool.map(warm_up, [url_text] * max(CLIENTS), chunksize=1)
        for n, (clients, batch) in enumerate((c, b) for c in CLIENTS for b in BATCHES):
            cell = {}
            for impl in ("orbit", "raw") if n % 2 == 0 else ("raw", "orbit"):
                with conn.cursor() as cur:
                    cur.execute(WAITING_SQL, (namespace, QUEUE))
                    top_up = backlog - int(cur.fetchone()[0])
                load_waiting(conn, namespace, top_up)
                r = cell[impl] = measure(pool, impl, url_text, namespace, clients, batch, seconds)
                print(
                    f"  {impl:5} clients={clients:2} batch={batch:2}: {r['claims']:7,.0f} claims/s "
                    f"{r['completes']:5,.0f} completes/s, claim p50 {r['p50']:.1f} ms p99 "
                    f"{r['p99']:.1f} ms, retries {r['retries']} (topped up {top_up} first)",
                    flush=True,
                )
            table.append((clients, batch, cell))
    conn.close()
    return table


def print_table(table: list[Any], backlog: int, seconds: float) -> None:
    print(
        f"\nbacklog {backlog} WAITING rows before every cell; {seconds:g}s of claims, then "
        f"{seconds:g}s of start+complete per cell.\nclaims/s = tasks leased per second; "
        "completes/s = tasks taken LEASED -> RUNNING -> SUCCEEDED per second (2 tx each); "
        "p50/p99 = latency of one claim transaction"
    )
    rows = [("clients", "batch", "claims/s orbit", "raw", "o/r", "completes/s orbit", "raw")]
    rows[0] += ("o/r", "claim p50 orbit", "raw", "claim p99 orbit", "raw", "retries o/r", "")
    for clients, batch, cell in table:
        o, r = cell["orbit"], cell["raw"]
        flag = ("!" if o["drained"] or r["drained"] else "") + (
            "*" if o["ran_out"] or r["ran_out"] else ""
        )
        row = (str(clients), str(batch), f"{o['claims']:,.0f}", f"{r['claims']:,.0f}")
        row += (f"{o['claims'] / r['claims']:.2f}", f"{o['completes']:,.0f}")
        row += (f"{r['completes']:,.0f}", f"{o['completes'] / r['completes']:.2f}")
        row += tuple(f"{x:.1f} ms" for x in (o["p50"], r["p50"], o["p99"], r["p99"]))
        rows.append((*row, f"{o['retries']}/{r['retries']}", flag))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for n, row in enumerate(rows):
        print("  ".join(f"{v:>{w}}" for v, w in zip(row, widths, strict=True)))
        if n == 0:
            print("-" * (sum(widths) + 2 * len(widths) - 2))
    print(
        "! the backlog ran dry during the cell (claims/s is a lower bound); * a process "
        "completed all it had claimed before the phase ended (completes/s is a lower bound)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=DEFAULT_URL, help=f"default {DEFAULT_URL}")
    parser.add_argument("--backlog", type=int, help="WAITING rows before each cell (100000)")
    parser.add_argument("--seconds", type=float, help="seconds per phase of each cell (5)")
    parser.add_argument("--quick", action="store_true", help="backlog 10000, 2 s cells")
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    args = parser.parse_args()
    backlog = args.backlog or (10_000 if args.quick else 100_000)
    seconds = args.seconds or (2.0 if args.quick else 5.0)
    url = make_url(args.database_url)
    name = url.database or "orbit_bench"
    admin = raw_connect(url)
    with admin.cursor() as cur:
        created = not cur.execute("SHOW DATABASES LIKE %s", (name,))
        if created:
            cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
        cur.execute("SELECT @@version, @@innodb_flush_log_at_trx_commit, @@log_bin, @@sync_binlog")
        server = cur.fetchone()
    print(
        f"server {server[0]}: innodb_flush_log_at_trx_commit={server[1]} log_bin={server[2]} "
        f"sync_binlog={server[3]}; {os.cpu_count()} cores; database {name} "
        f"({'created' if created else 'existing, kept'})"
    )
    try:
        print_table(run(url, name, backlog, seconds), backlog, seconds)
    finally:
        if created and not args.keep:
            with admin.cursor() as cur:
                cur.execute(f"DROP DATABASE `{name}`")
            print(f"dropped database {name}")
        admin.close()


if __name__ == "__main__":
    main()
