"""The side-effect ledger: what the chaos handlers did, written by the handlers themselves into
a database of its own on the shared MariaDB (so a crash of the harness's own MariaDB cannot
lose it).

Each row is one side effect (``begin`` or ``end``) of one attempt: task, attempt, generation,
the worker's pid, and the ledger server's time. Writes go through a generation fence, as a
downstream system should use Orbit's fencing number: a write whose generation is older than
one the fence has seen is recorded with ``accepted = 0`` and counts as no effect. The checker
then asks whether any *accepted* effect of a superseded generation landed after its successor
began, and how many late writes only the fence stopped (a worker paused between
``ctx.check()`` and its write: the gap no local check can close).
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import pymysql

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS ledger (
        id BIGINT AUTO_INCREMENT PRIMARY KEY,
        task_id VARCHAR(36) NOT NULL,
        attempt_id VARCHAR(36) NOT NULL,
        generation INT NOT NULL,
        handler VARCHAR(64) NOT NULL,
        kind VARCHAR(12) NOT NULL,
        accepted TINYINT NOT NULL,
        pid INT NOT NULL,
        at DATETIME(6) NOT NULL,
        KEY ix_ledger_task (task_id, generation)
    ) ENGINE=InnoDB""",
    """CREATE TABLE IF NOT EXISTS fence (
        task_id VARCHAR(36) PRIMARY KEY,
        generation INT NOT NULL
    ) ENGINE=InnoDB""",
)


def connect(url: str) -> pymysql.connections.Connection:
    """``url``: ``host:port/database`` of the ledger (root, no password)."""
    hostport, database = url.split("/", 1)
    host, port = hostport.split(":")
    return pymysql.connect(
        host=host, port=int(port), user="root", database=database, autocommit=False
    )


def create(url: str) -> None:
    hostport, database = url.split("/", 1)
    host, port = hostport.split(":")
    admin = pymysql.connect(host=host, port=int(port), user="root", autocommit=True)
    with admin as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE IF NOT EXISTS `{database}`")
        cur.execute(f"USE `{database}`")
        for statement in SCHEMA:
            cur.execute(statement)


def drop(url: str) -> None:
    hostport, database = url.split("/", 1)
    host, port = hostport.split(":")
    admin = pymysql.connect(host=host, port=int(port), user="root", autocommit=True)
    with admin as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{database}`")


class Ledger:
    """One per handler thread (a pymysql connection is not thread-safe)."""

    def __init__(self, url: str, pid: int) -> None:
        self.url, self.pid = url, pid
        self._conn: Any = None

    def write(self, ctx: Any, kind: str) -> bool:
        """Record one side effect through the fence; True when the fence accepted it. Retried
        until it lands: the ledger server is not under fault."""
        for attempt in range(50):
            try:
                return self._write(ctx, kind)
            except pymysql.err.Error:
                self._conn = None
                time.sleep(min(0.05 * 2**attempt, 1.0))
        raise RuntimeError("ledger unreachable")

    def failures(self, task_id: str) -> int:
        """How many attempts of the task have failed on purpose so far (``kind = failed``)."""
        for attempt in range(50):
            try:
                if self._conn is None:
                    self._conn = connect(self.url)
                with self._conn.cursor() as cur:
                    cur.execute(
                        "SELECT COUNT(*) FROM ledger WHERE task_id = %s AND kind = 'failed' "
                        "AND accepted = 1",
                        (task_id,),
                    )
                    count = int(cur.fetchone()[0])
                self._conn.commit()
                return count
            except pymysql.err.Error:
                self._conn = None
                time.sleep(min(0.05 * 2**attempt, 1.0))
        raise RuntimeError("ledger unreachable")

    def _write(self, ctx: Any, kind: str) -> bool:
        if self._conn is None:
            self._conn = connect(self.url)
        conn = self._conn
        try:
            with conn.cursor() as cur:
                cur.execute(
                    "INSERT INTO fence (task_id, generation) VALUES (%s, %s) "
                    "ON DUPLICATE KEY UPDATE generation = GREATEST(generation, "
                    "VALUES(generation))",
                    (ctx.task_id, ctx.generation),
                )
                cur.execute("SELECT generation FROM fence WHERE task_id = %s", (ctx.task_id,))
                accepted = cur.fetchone()[0] == ctx.generation
                cur.execute(
                    "INSERT INTO ledger (task_id, attempt_id, generation, handler, kind, "
                    "accepted, pid, at) VALUES (%s, %s, %s, %s, %s, %s, %s, UTC_TIMESTAMP(6))",
                    (
                        ctx.task_id,
                        ctx.attempt_id,
                        ctx.generation,
                        ctx.handler,
                        kind,
                        int(accepted),
                        self.pid,
                    ),
                )
            conn.commit()
        except BaseException:
            with contextlib.suppress(pymysql.err.Error):
                conn.rollback()
            raise
        return accepted
