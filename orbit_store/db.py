"""Engines and the one transaction helper every store transaction runs through.

MySQL/MariaDB connections use READ COMMITTED (correctness comes from locking reads and
conditional updates, never from REPEATABLE READ snapshots; see MYSQL-FACTS.md) and a UTC session
time zone. SQLite (``orbit dev``) serialises writers with ``BEGIN IMMEDIATE``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import make_url

from .errors import CommitOutcomeUnknown, TransientStoreError

log = logging.getLogger(__name__)

T = TypeVar("T")

# MySQL error codes worth retrying as a whole transaction.
_DEADLOCK = 1213
_LOCK_WAIT_TIMEOUT = 1205
# Connection errors: 2006 server gone away, 2013 lost connection during query.
_CONNECTION_LOST = {2006, 2013, 2055}

MAX_TRANSACTION_ATTEMPTS = 6


def is_sqlite(conn_or_engine: sa.Connection | sa.Engine) -> bool:
    return conn_or_engine.dialect.name == "sqlite"


def create_store_engine(url: str, **kwargs: Any) -> sa.Engine:
    """Create an engine configured the way every Orbit transaction expects."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(url, **kwargs)
    if parsed.get_backend_name() in ("mysql", "mariadb"):
        return _mysql_engine(url, **kwargs)
    raise ValueError(
        f"unsupported database URL {parsed.render_as_string(hide_password=True)!r}: "
        "use mysql+pymysql://USER:PASSWORD@HOST:PORT/DB or sqlite:///PATH"
    )


def _mysql_engine(url: str, **kwargs: Any) -> sa.Engine:
    parsed = make_url(url)
    query = dict(parsed.query)
    query.setdefault("charset", "utf8mb4")
    engine = sa.create_engine(
        parsed.set(query=query),
        isolation_level="READ COMMITTED",
        # No pre-ping: it costs a round trip per transaction. A connection found dead is
        # invalidated and the transaction retried instead (run_transaction).
        pool_recycle=1800,
        # Enough warm connections for the server's request threads: opening one costs far
        # more than a transaction (TLS negotiation included).
        pool_size=kwargs.pop("pool_size", 20),
        max_overflow=kwargs.pop("max_overflow", 20),
        **kwargs,
    )

    @event.listens_for(engine, "connect")
    def _session_settings(dbapi_conn: Any, _record: Any) -> None:
        with dbapi_conn.cursor() as cur:
            cur.execute("SET time_zone = '+00:00', innodb_lock_wait_timeout = 10")

    return engine


def _sqlite_engine(url: str, **kwargs: Any) -> sa.Engine:
    kwargs.setdefault("connect_args", {"timeout": 30, "check_same_thread": False})
    engine = sa.create_engine(url, **kwargs)

    @event.listens_for(engine, "connect")
    def _pragma(dbapi_conn: Any, _record: Any) -> None:
        # Let SQLAlchemy, not pysqlite, decide when a transaction begins.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA foreign_keys = ON")
        cur.execute("PRAGMA busy_timeout = 30000")
        if make_url(url).database not in (None, "", ":memory:"):
            cur.execute("PRAGMA journal_mode = WAL")
            cur.execute("PRAGMA synchronous = FULL")
        cur.close()

    @event.listens_for(engine, "begin")
    def _begin_immediate(conn: sa.Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def _mysql_error_code(exc: sa.exc.DBAPIError) -> int | None:
    args = getattr(exc.orig, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


def _is_retryable(exc: sa.exc.DBAPIError) -> bool:
    code = _mysql_error_code(exc)
    if code in (_DEADLOCK, _LOCK_WAIT_TIMEOUT):
        return True
    return "database is locked" in str(exc.orig)


def run_transaction(engine: sa.Engine, work: Callable[[sa.Connection], T]) -> T:
    """Run ``work`` in one short transaction, retrying the whole of it on deadlock/lock-wait.

    ``work`` must be safe to run again from the start (it only talks to the database).
    A connection lost while COMMIT was in flight raises :class:`CommitOutcomeUnknown`: the
    caller resolves it by the operation's stable identity, never by blind re-execution.
    """
    for attempt in range(1, MAX_TRANSACTION_ATTEMPTS + 1):
        conn = engine.connect()
        committing = False
        try:
            with conn.begin():
                result = work(conn)
                committing = True
            return result
        except sa.exc.DBAPIError as exc:
            lost = exc.connection_invalidated or _mysql_error_code(exc) in _CONNECTION_LOST
            if committing and lost:
                raise CommitOutcomeUnknown(str(exc.orig)) from exc
            if lost and attempt < MAX_TRANSACTION_ATTEMPTS:
                # Lost before COMMIT was sent: nothing was committed, so run it again.
                log.info("transaction retry after lost connection", extra={"attempt": attempt})
                continue
            if not _is_retryable(exc) or attempt == MAX_TRANSACTION_ATTEMPTS:
                if _is_retryable(exc):
                    raise TransientStoreError(str(exc.orig)) from exc
                raise
            log.info("transaction retry", extra={"attempt": attempt, "error": str(exc.orig)})
            time.sleep(min(0.005 * 2**attempt, 0.2))
        finally:
            conn.close()
    raise AssertionError("unreachable")
