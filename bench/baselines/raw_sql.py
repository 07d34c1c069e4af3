"""The task lifecycle written as plain PyMySQL transactions, no framework: submit (one
transaction each), then claim one, start, complete — each its own transaction — from as many
processes as a fleet has slots. The ceiling Orbit's store would have if it did nothing but these
rows' writes; ``bench/tasks/e2e.py --raw`` measures it in the same run as Orbit. Scratch tables are
made with ``CREATE TABLE … LIKE`` Orbit's, READ COMMITTED."""

from __future__ import annotations

import hashlib
import secrets
import time
from typing import Any

import pymysql
from sqlalchemy.engine import make_url

from orbit_store.ids import new_id


def connect(url: str, database: str | None = None, autocommit: bool = False) -> Any:
    args = make_url(url).translate_connect_args(username="user") | {"database": database}
    conn = pymysql.connect(**args, charset="utf8mb4", autocommit=autocommit)
    with conn.cursor() as cur:
        cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        cur.execute("SET time_zone = '+00:00', innodb_lock_wait_timeout = 10")
    return conn


TABLES = ("tasks", "task_attempts", "task_events")


def make_tables(conn: Any) -> None:
    with conn.cursor() as cur:
        for table in TABLES:
            cur.execute(f"CREATE TABLE raw_{table} LIKE {table}")


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


def raw_cell(pool: Any, url: str, ns: str, slots: int, n: int, submitters: int) -> dict[str, float]:
    """Submit ``n`` from ``submitters`` processes, then drain them with ``slots`` processes."""
    start_at = time.time() + 1.0
    shares = [(url, ns, start_at, range(k, n, submitters)) for k in range(submitters)]
    submit_s = max(p[1] for p in pool.starmap(raw_part, shares, chunksize=1)) - start_at
    start_at = time.time() + 1.0
    parts = pool.starmap(raw_part, [(url, ns, start_at, None)] * slots, chunksize=1)
    drain_s = max(p[1] for p in parts) - start_at
    if sum(p[0] for p in parts) != n:
        raise RuntimeError(f"raw drain finished {sum(p[0] for p in parts)} of {n} tasks")
    out = {"submit": n / submit_s, "drain": n / drain_s, "e2e": n / (submit_s + drain_s)}
    return out | {"retries": sum(p[2] for p in parts)}
