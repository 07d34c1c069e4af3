"""The five-step workflow (a → b, c → d → e) written as plain PyMySQL transactions, no
framework: the ceiling Orbit's Weave would have if it did nothing but these rows' writes.
``bench/workflows/workflows.py --raw`` measures it in the same run as Orbit.

- a start: the instance, its five steps, the first step's task (one transaction);
- a worker slot (one process each): claim, start, complete a task — the completion also writes
  the outcome's inbox row — each its own transaction (``raw_sql``'s statements);
- a consumer (one process each, as the server's consumer threads): take a pending inbox row
  (SKIP LOCKED), lock its instance, settle the step, activate the steps that became ready with
  their tasks, finish the instance when all are done, mark the row consumed (one transaction).

Tasks use tables made ``LIKE`` Orbit's; the workflow tables are minimal scratch tables.
"""

from __future__ import annotations

import time
from typing import Any

from bench.baselines import raw_sql  # the repository root: workflows.py puts it first
from orbit_store.ids import new_id

DEPENDS = {"a": (), "b": ("a",), "c": ("a",), "d": ("b", "c"), "e": ("d",)}
NOW = raw_sql.NOW

SCRATCH = (
    "CREATE TABLE raw_wf_instances (id CHAR(36) PRIMARY KEY, state VARCHAR(16) NOT NULL, "
    "created_at DATETIME(6) NOT NULL, finished_at DATETIME(6) NULL)",
    "CREATE TABLE raw_wf_steps (instance_id CHAR(36) NOT NULL, name VARCHAR(8) NOT NULL, "
    "state VARCHAR(16) NOT NULL, PRIMARY KEY (instance_id, name))",
    "CREATE TABLE raw_wf_events (id CHAR(36) PRIMARY KEY, instance_id CHAR(36) NOT NULL, "
    "kind VARCHAR(32) NOT NULL, at DATETIME(6) NOT NULL, KEY (instance_id))",
    "CREATE TABLE raw_wf_inbox (id CHAR(36) PRIMARY KEY, instance_id CHAR(36) NOT NULL, "
    "step VARCHAR(8) NOT NULL, state VARCHAR(16) NOT NULL, received_at DATETIME(6) NOT NULL, "
    "consumed_at DATETIME(6) NULL, KEY (state, received_at))",
)

SUBMIT = (
    "INSERT INTO raw_tasks (id, namespace, queue, handler, params, state, wait_path, "
    "state_version, priority, available_at, created_at, updated_at, max_attempts, attempts_used, "
    "backoff_initial_ms, backoff_max_ms, backoff_multiplier, lease_seconds, safety, "
    "concurrency_limit, cancel_requested, submitted_by, workflow_instance_id, "
    "workflow_activation_id) VALUES (%s, %s, 'default', 'bench.step', %s, 'WAITING', 'READY', 1, "
    f"0, {NOW}, {NOW}, {NOW}, 3, 0, 1000, 300000, 2.0, 300, 'safe', 1, 0, 'b', %s, %s)"
)


def make_tables(conn: Any) -> None:
    raw_sql.make_tables(conn)
    with conn.cursor() as cur:
        for statement in SCRATCH:
            cur.execute(statement)


def _task(cur: Any, ns: str, instance_id: str, step: str) -> None:
    task_id = new_id()
    cur.execute(SUBMIT, (task_id, ns, f'{{"step": "{step}"}}', instance_id, step))
    raw_sql._run(cur, "event", new_id(), task_id, ns, 1, None, "WAITING", "submitted", None)


def _event(cur: Any, instance_id: str, kind: str) -> None:
    cur.execute(
        f"INSERT INTO raw_wf_events (id, instance_id, kind, at) VALUES (%s, %s, %s, {NOW})",
        (new_id(), instance_id, kind),
    )


def _start(cur: Any, ns: str) -> None:
    instance_id = new_id()
    cur.execute(
        f"INSERT INTO raw_wf_instances (id, state, created_at) VALUES (%s, 'RUNNING', {NOW})",
        (instance_id,),
    )
    cur.executemany(
        "INSERT INTO raw_wf_steps (instance_id, name, state) VALUES (%s, %s, %s)",
        [(instance_id, name, "ACTIVE" if name == "a" else "PENDING") for name in DEPENDS],
    )
    _task(cur, ns, instance_id, "a")
    _event(cur, instance_id, "step.active")


def _complete(cur: Any, ns: str, task_id: str, attempt_id: str, token: str, version: int) -> None:
    raw_sql._complete(cur, ns, task_id, attempt_id, token, version)
    cur.execute(
        "SELECT workflow_instance_id, workflow_activation_id FROM raw_tasks WHERE id = %s",
        (task_id,),
    )
    instance_id, step = cur.fetchone()
    cur.execute(
        "INSERT INTO raw_wf_inbox (id, instance_id, step, state, received_at) "
        f"VALUES (%s, %s, %s, 'PENDING', {NOW})",
        (new_id(), instance_id, step),
    )


def _consume(cur: Any, ns: str) -> bool:
    cur.execute(
        "SELECT id, instance_id, step FROM raw_wf_inbox WHERE state = 'PENDING' "
        "ORDER BY received_at LIMIT 1 FOR UPDATE SKIP LOCKED"
    )
    if (row := cur.fetchone()) is None:
        return False
    inbox_id, instance_id, done = row
    cur.execute("SELECT state FROM raw_wf_instances WHERE id = %s FOR UPDATE", (instance_id,))
    cur.execute(
        "UPDATE raw_wf_steps SET state = 'SUCCEEDED' WHERE instance_id = %s AND name = %s "
        "AND state = 'ACTIVE'",
        (instance_id, done),
    )
    _event(cur, instance_id, "step.succeeded")
    cur.execute("SELECT name, state FROM raw_wf_steps WHERE instance_id = %s", (instance_id,))
    states = dict(cur.fetchall())
    for name, deps in DEPENDS.items():
        if states[name] == "PENDING" and all(states[d] == "SUCCEEDED" for d in deps):
            cur.execute(
                "UPDATE raw_wf_steps SET state = 'ACTIVE' WHERE instance_id = %s AND name = %s",
                (instance_id, name),
            )
            _task(cur, ns, instance_id, name)
            _event(cur, instance_id, "step.active")
    if all(state == "SUCCEEDED" for state in states.values()):
        cur.execute(
            f"UPDATE raw_wf_instances SET state = 'SUCCEEDED', finished_at = {NOW} WHERE id = %s",
            (instance_id,),
        )
    cur.execute(
        f"UPDATE raw_wf_inbox SET state = 'CONSUMED', consumed_at = {NOW} WHERE id = %s",
        (inbox_id,),
    )
    return True


def _succeeded(cur: Any) -> int:
    cur.execute("SELECT COUNT(*) FROM raw_wf_instances WHERE state = 'SUCCEEDED'")
    return int(cur.fetchone()[0])


def raw_part(url: str, ns: str, start_at: float, role: str, n: int, total: int) -> float:
    """One process: start ``n`` instances, or work tasks, or consume outcomes, until every
    instance has finished; returns when it stopped."""
    raw_sql.raw_warm(url)
    time.sleep(max(start_at - time.time(), 0))
    for _ in range(n if role == "start" else 0):
        raw_sql._tx(_start, ns)
    while role != "start":
        if role == "work" and (grant := raw_sql._tx(raw_sql._claim, ns)) is not None:
            raw_sql._tx(raw_sql._start, ns, *grant)
            raw_sql._tx(_complete, ns, *grant)
        elif role == "consume" and raw_sql._tx(_consume, ns):
            pass
        elif raw_sql._tx(_succeeded) >= total:
            break
        else:
            time.sleep(0.005)
    return time.time()


def raw_run(
    pool: Any, url: str, ns: str, n: int, slots: int, consumers: int, starters: int
) -> None:
    """``n`` instances started by ``starters`` processes while ``slots`` worker processes and
    ``consumers`` consumer processes run them; the caller reads the scratch tables."""
    start_at = time.time() + 1.0
    shares = [n // starters + (1 if k < n % starters else 0) for k in range(starters)]
    jobs = [(url, ns, start_at, "start", share, n) for share in shares]
    jobs += [(url, ns, start_at, "work", 0, n)] * slots
    jobs += [(url, ns, start_at, "consume", 0, n)] * consumers
    pool.starmap(raw_part, jobs, chunksize=1)
