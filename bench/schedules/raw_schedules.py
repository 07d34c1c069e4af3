"""The scheduler's work written as plain PyMySQL transactions, no framework: scan the due
schedules with a plain read, claim them 100 at a time by primary key with SKIP LOCKED, then one
multi-row INSERT each of their tasks, idempotency keys, accepted events and occurrences, and one
UPDATE moving them a minute on. The ceiling Orbit's scheduler would have if it did nothing but
these rows' writes; ``bench/schedules/schedules.py`` runs it in the same run as Orbit, over
copies of the same schedules (``CREATE TABLE … LIKE``)."""

from __future__ import annotations

import datetime as dt
import random
import time
from typing import Any

import pymysql

from bench.baselines.raw_sql import connect
from orbit_store.ids import new_id

TABLES = ("schedules", "schedule_occurrences", "tasks", "submission_keys", "task_events")
BATCH = 100
NOW = "UTC_TIMESTAMP(6)"

SCAN = f"SELECT id FROM raw_schedules WHERE next_fire_at <= {NOW} ORDER BY next_fire_at LIMIT 1000"
CLAIM = (
    "SELECT id, namespace, next_fire_at FROM raw_schedules FORCE INDEX (PRIMARY) "
    f"WHERE id IN ({{ids}}) AND next_fire_at <= {NOW} FOR UPDATE SKIP LOCKED"
)
TASK = (
    "(%s, %s, 'default', 'bench.tick', '{}', 'WAITING', 'READY', 1, 0, "
    f"{NOW}, {NOW}, {NOW}, 3, 0, 1000, 300000, 2.0, 300, 'safe', 1, 0, %s, %s)"
)
TASKS = (
    "INSERT INTO raw_tasks (id, namespace, queue, handler, params, state, wait_path, "
    "state_version, priority, available_at, created_at, updated_at, max_attempts, attempts_used, "
    "backoff_initial_ms, backoff_max_ms, backoff_multiplier, lease_seconds, safety, "
    "concurrency_limit, cancel_requested, schedule_id, submitted_by) VALUES "
)
KEY = f"(%s, %s, 'digest', %s, {NOW}, {NOW} + INTERVAL 1 DAY)"
KEYS = (
    "INSERT INTO raw_submission_keys (namespace, idempotency_key, request_digest, task_id, "
    "created_at, expires_at) VALUES "
)
EVENT = f"(%s, %s, %s, 1, NULL, 'WAITING', 'submitted', NULL, {NOW})"
EVENTS = (
    "INSERT INTO raw_task_events (id, task_id, namespace, state_version, from_state, to_state, "
    "reason, attempt_id, at) VALUES "
)
OCCURRENCE = f"(%s, %s, %s, %s, %s, 1, {NOW}, 1, 'FIRED', 'Scheduled', 'fired', %s)"
OCCURRENCES = (
    "INSERT INTO raw_schedule_occurrences (id, schedule_id, namespace, scheduled_at, through_at, "
    "instants, recorded_at, schedule_version, status, reason, message, task_id) VALUES "
)
# Microseconds to the earliest instant still ahead: the process wakes for it, as Orbit's loop does.
NEXT = (
    f"SELECT TIMESTAMPDIFF(MICROSECOND, {NOW}, MIN(next_fire_at)) FROM raw_schedules "
    f"WHERE next_fire_at > {NOW}"
)
# By primary key, as Orbit's own UPDATE: left to itself the optimizer may scan the table and wait
# on every row the other processes hold.
MOVE = (
    "UPDATE raw_schedules FORCE INDEX (PRIMARY) SET last_fire_at = next_fire_at, "
    "next_fire_at = next_fire_at + INTERVAL 1 MINUTE WHERE id IN ({ids})"
)


def make_tables(conn: Any) -> None:
    """Scratch copies of the tables and of every schedule, none due until :func:`fall_due`."""
    with conn.cursor() as cur:
        for table in TABLES:
            cur.execute(f"CREATE TABLE raw_{table} LIKE {table}")
        cur.execute("INSERT INTO raw_schedules SELECT * FROM schedules")
        cur.execute("UPDATE raw_schedules SET next_fire_at = %s", (dt.datetime(2100, 1, 1),))
    conn.commit()


def fall_due(conn: Any, first_instant: dt.datetime) -> None:
    """Every copied schedule's next instant is ``first_instant`` (the processes are already
    polling: their start-up is not counted in the lateness)."""
    with conn.cursor() as cur:
        cur.execute("UPDATE raw_schedules SET next_fire_at = %s", (first_instant,))
    conn.commit()


def _fire_batch(cur: Any, ids: list[str]) -> int:
    cur.execute(CLAIM.format(ids=", ".join(["%s"] * len(ids))), ids)
    due = cur.fetchall()
    if not due:
        return 0
    tasks, keys, events, occurrences = [], [], [], []
    for schedule_id, namespace, instant in due:
        task_id = new_id()
        key = f"schedule:{schedule_id}:{instant:%Y-%m-%dT%H:%M:%S.%f}Z"
        tasks.append((task_id, namespace, schedule_id, "schedule/raw"))
        keys.append((namespace, key, task_id))
        events.append((new_id(), task_id, namespace))
        occurrences.append((new_id(), schedule_id, namespace, instant, instant, task_id))
    for head, row, values in (
        (TASKS, TASK, tasks),
        (KEYS, KEY, keys),
        (EVENTS, EVENT, events),
        (OCCURRENCES, OCCURRENCE, occurrences),
    ):
        cur.execute(head + ", ".join([row] * len(values)), [v for item in values for v in item])
    ids = [row[0] for row in due]
    if cur.execute(MOVE.format(ids=", ".join(["%s"] * len(ids))), ids) != len(ids):
        raise RuntimeError("a claimed schedule moved")
    return len(due)


def raw_process(url: str, database: str, interval: float, ready: Any, stop: Any, out: Any) -> None:
    """A process's body: connect, say so on ``ready``, run :func:`raw_scheduler` until ``stop``
    is set, put (instants fired, its CPU seconds) on ``out``."""
    conn = connect(url, database)
    ready.put(time.time())
    out.put(raw_scheduler(conn, stop, interval))
    conn.close()


def raw_scheduler(conn: Any, stop: Any, interval: float) -> tuple[int, float]:
    """One raw scheduler process, as Orbit's loop works: a plain-read scan of the due schedules,
    then batches of them (shuffled) claimed by primary key; when the scan comes back short, sleeps
    until the next instant still ahead, ``interval`` at most. Returns (instants fired, its own
    CPU seconds)."""
    cpu, fired = time.process_time(), 0
    while not stop.is_set():
        with conn.cursor() as cur:
            cur.execute(SCAN)
            due = [row[0] for row in cur.fetchall()]
        conn.commit()
        batches = [due[i : i + BATCH] for i in range(0, len(due), BATCH)]
        random.shuffle(batches)
        for ids in batches:
            fired += _in_transaction(conn, ids)
        if len(due) < 1000:
            with conn.cursor() as cur:
                cur.execute(NEXT)
                (due_in,) = cur.fetchone()
            conn.commit()
            stop.wait(interval if due_in is None else min(interval, due_in / 1e6))
    return fired, time.process_time() - cpu


def _in_transaction(conn: Any, ids: list[str]) -> int:
    while True:
        try:
            with conn.cursor() as cur:
                done = _fire_batch(cur, ids)
            conn.commit()
            return done
        except pymysql.err.OperationalError as exc:
            conn.rollback()
            if exc.args[0] not in (1213, 1205):
                raise
