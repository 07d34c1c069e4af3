"""Engines and the one transaction helper every store transaction runs through.

MySQL/MariaDB connections use READ COMMITTED (correctness comes from locking reads and
conditional updates, never from REPEATABLE READ snapshots; see MYSQL-FACTS.md) and a UTC session
time zone. SQLite (``orbit dev``) serialises writers with ``BEGIN IMMEDIATE``.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import logging
import math
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.engine import make_url

from .errors import CommitOutcomeUnknown, DataRefused, TransientStoreError
from .timeouts import IO_TIMEOUT_SECONDS, lock_wait_seconds

log = logging.getLogger(__name__)

T = TypeVar("T")

# MySQL error codes worth retrying as a whole transaction.
_DEADLOCK = 1213
_LOCK_WAIT_TIMEOUT = 1205
# Connection errors: 2006 server gone away, 2013 lost connection during query.
_CONNECTION_LOST = {2006, 2013, 2055}
#: A value the database refuses to store: the request's fault, not an outage. 1048 column
#: cannot be null, 1264 out of range, 1265 data truncated, 1292 incorrect (date) value,
#: 1366 incorrect string value, 1406 data too long, 3140 invalid JSON text (MySQL), 3819
#: check constraint (MySQL), 4025 CONSTRAINT failed (MariaDB's JSON check among them),
#: 4038 JSON syntax error (MariaDB).
DATA_ERRORS = frozenset({1048, 1264, 1265, 1292, 1366, 1406, 3140, 3819, 4025, 4038})

#: Each process's MySQL pool: warm connections, and how many more it may open under load. The
#: operations docs quote their sum as the most connections one replica opens
#: (``tests/repo/test_connection_figures.py`` keeps them in step).
POOL_SIZE = 20
POOL_MAX_OVERFLOW = 20

MAX_TRANSACTION_ATTEMPTS = 6
#: Ceiling of the (fully jittered) sleep before retrying a deadlocked transaction.
RETRY_SLEEP_CAP = 0.2


class RetryCounter:
    """Whole-transaction retries by reason (deadlock, lock_wait_timeout, database_locked,
    connection_lost) in this process: exported as orbit_db_transaction_retries_total."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._listeners: list[Callable[[str], None]] = []

    def add(self, reason: str) -> None:
        with self._lock:
            self._counts[reason] += 1
        for listener in self._listeners:
            listener(reason)

    def listen(self, listener: Callable[[str], None]) -> None:
        """Also tell ``listener`` of each retry (the server's multi-process metrics count them
        in files shared by its processes)."""
        self._listeners.append(listener)

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)


TRANSACTION_RETRIES = RetryCounter()
_JITTER = random.Random()


def retry_sleep(attempt: int) -> float:
    """Full jitter (a uniform draw up to an exponential ceiling): transactions that deadlocked
    together do not retry in lockstep and collide again."""
    return _JITTER.uniform(0, min(0.005 * 2**attempt, RETRY_SLEEP_CAP))


def insert_or_lock(conn: sa.Connection, table: sa.Table, values: dict[str, Any]) -> None:
    """Insert the row, or lock the existing row with the same (primary or unique) key
    exclusively. On MySQL a no-op ``ON DUPLICATE KEY UPDATE`` takes the exclusive lock at
    once: two transactions creating the same row never both hold a shared lock and then
    deadlock upgrading it (as INSERT IGNORE followed by SELECT … FOR UPDATE would). SQLite
    serialises writers anyway."""
    if is_sqlite(conn):
        conn.execute(sqlite.insert(table).values(values).on_conflict_do_nothing())
        return
    # ``key = key`` changes nothing, also when the duplicate is on a secondary unique key and
    # ``values`` carry a fresh primary key (``key = VALUES(key)`` would rewrite the row's id).
    first_key = table.primary_key.columns.values()[0]
    upsert = mysql.insert(table).values(values)
    conn.execute(upsert.on_duplicate_key_update({first_key.name: first_key}))


def by_primary_key(statement: Any, table: sa.Table) -> Any:
    """A locking statement that names its rows by primary key (``id IN (…)`` plus other
    conditions) must lock through the primary key only: left to itself the optimizer may
    prefer a secondary index on one of the other conditions and lock other rows' entries on
    the way, out of the lock order."""
    return force_index(statement, table, "PRIMARY")


def force_index(statement: Any, table: sa.Table, index: str) -> Any:
    """Pin MySQL/MariaDB to ``index`` for a locking statement: the rows it locks, and the order
    it locks them in, must not depend on the optimizer's view of a small table (lock order)."""
    hint = f"FORCE INDEX ({index})"
    for dialect in ("mysql", "mariadb"):
        if isinstance(statement, sa.Select):
            statement = statement.with_hint(table, hint, dialect)
        else:
            statement = statement.with_hint(hint, dialect_name=dialect)
    return statement


def is_sqlite(conn_or_engine: sa.Connection | sa.Engine) -> bool:
    return conn_or_engine.dialect.name == "sqlite"


def create_store_engine(
    url: str, *, io_timeout: float | None = IO_TIMEOUT_SECONDS, **kwargs: Any
) -> sa.Engine:
    """Create an engine configured the way every Orbit transaction expects. ``io_timeout``: the
    seconds a MySQL/MariaDB connect, read or write may take (None: unbounded, for migrations
    whose DDL may run for long); see :data:`IO_TIMEOUT_SECONDS`."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(url, **kwargs)
    if parsed.get_backend_name() in ("mysql", "mariadb"):
        return _mysql_engine(with_driver(url), io_timeout, **kwargs)
    raise ValueError(
        f"unsupported database URL {parsed.render_as_string(hide_password=True)!r}: "
        "use mysql://USER:PASSWORD@HOST:PORT/DB (or mysql+pymysql://…, mysql+mysqldb://… to "
        "name the driver) or sqlite:///PATH"
    )


def with_driver(url: str) -> str:
    """``url`` with its MySQL driver named: a ``mysql://`` or ``mariadb://`` URL that names none
    gets mysqlclient when it is installed — its C parser costs the server less CPU per
    statement — and PyMySQL otherwise. A URL that names one keeps it."""
    parsed = make_url(url)
    if "+" in parsed.drivername:
        return url
    driver = "mysqldb" if importlib.util.find_spec("MySQLdb") is not None else "pymysql"
    return parsed.set(drivername=f"{parsed.drivername}+{driver}").render_as_string(
        hide_password=False
    )


def _mysql_engine(url: str, io_timeout: float | None, **kwargs: Any) -> sa.Engine:
    parsed = make_url(url)
    query = dict(parsed.query)
    query.setdefault("charset", "utf8mb4")
    lock_wait = lock_wait_seconds(io_timeout)
    if io_timeout is not None:
        seconds = max(1, math.ceil(io_timeout))  # mysqlclient takes whole seconds
        timeouts = {"connect_timeout": seconds, "read_timeout": seconds, "write_timeout": seconds}
        kwargs["connect_args"] = {**timeouts, **kwargs.get("connect_args", {})}
    engine = sa.create_engine(
        parsed.set(query=query),
        isolation_level="READ COMMITTED",
        # No pre-ping: it costs a round trip per transaction. A connection found dead is
        # invalidated and the transaction retried instead (run_transaction).
        pool_recycle=1800,
        pool_reset_on_return=None,  # _reset_unless_committed below decides
        # Enough warm connections for the server's request threads: opening one costs far
        # more than a transaction (TLS negotiation included).
        pool_size=kwargs.pop("pool_size", POOL_SIZE),
        max_overflow=kwargs.pop("max_overflow", POOL_MAX_OVERFLOW),
        **kwargs,
    )

    @event.listens_for(engine, "connect")
    def _session_settings(dbapi_conn: Any, _record: Any) -> None:
        with dbapi_conn.cursor() as cur:
            cur.execute(f"SET time_zone = '+00:00', innodb_lock_wait_timeout = {lock_wait}")
        encoders = getattr(dbapi_conn, "encoders", None)  # PyMySQL's, one dict per connection
        if isinstance(encoders, dict) and dt.datetime in encoders:
            encoders[dt.datetime] = _datetime_literal

    _reset_unless_committed(engine)
    return engine


def _datetime_literal(value: dt.datetime, mapping: Any = None) -> str:
    """PyMySQL's literal for a datetime, from C code (``isoformat``) instead of a format string
    read field by field: the same text (microseconds only when there are any; no time zone),
    at less cost. A drain's multi-row INSERTs escape four datetimes per attempt and one per
    event, so this is on the hot path."""
    naive = value if value.tzinfo is None else value.replace(tzinfo=None)  # as PyMySQL: no zone
    return "'" + naive.isoformat(" ") + "'"


def _sqlite_engine(url: str, **kwargs: Any) -> sa.Engine:
    kwargs.setdefault("connect_args", {"timeout": 30, "check_same_thread": False})
    engine = sa.create_engine(url, pool_reset_on_return=None, **kwargs)
    _reset_unless_committed(engine)

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


#: Set on a pooled connection's record by :func:`run_transaction` once its COMMIT succeeded.
_COMMITTED = "orbit_committed"


def _reset_unless_committed(engine: sa.Engine) -> None:
    """Roll back a connection handed back to the pool, unless it has nothing to roll back.

    The pool's own reset-on-return sends ROLLBACK after every transaction, also after one that
    just committed: one more round trip (and statement) per transaction for nothing. A
    connection whose transaction :func:`run_transaction` committed, or that
    :class:`sqlalchemy.Connection` already rolled back, goes back as it is; any other (work
    left uncommitted, e.g. a raw connection) is rolled back here, its locks released, before
    anyone else gets it. A failing rollback makes the pool discard the connection."""

    @event.listens_for(engine, "reset")
    def _reset(dbapi_conn: Any, record: Any, state: Any) -> None:
        committed = record.info.pop(_COMMITTED, False)
        if not (state.terminate_only or state.transaction_was_reset or committed):
            dbapi_conn.rollback()


def _mysql_error_code(exc: sa.exc.DBAPIError) -> int | None:
    args = getattr(exc.orig, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


def is_data_error(exc: BaseException) -> bool:
    """Whether ``exc`` is the database refusing a value (:data:`DATA_ERRORS`), which PyMySQL and
    mysqlclient raise as ``OperationalError`` for some codes (4025) and ``DataError`` for
    others."""
    return isinstance(exc, sa.exc.DBAPIError) and _mysql_error_code(exc) in DATA_ERRORS


def data_refused(exc: sa.exc.DBAPIError | UnicodeEncodeError) -> DataRefused:
    """The typed refusal for a value the database (or its driver) cannot take, in the
    database's own words: they name the column or the constraint."""
    if isinstance(exc, UnicodeEncodeError):
        said = "text that is not valid Unicode (a lone surrogate such as \\ud800)"
    else:
        args: tuple[Any, ...] = tuple(getattr(exc.orig, "args", ()))
        said = str(args[1]) if len(args) > 1 else str(exc.orig)
    return DataRefused(f"the database refused a value of the request: {said}; nothing was written")


def _retry_reason(exc: sa.exc.DBAPIError) -> str | None:
    code = _mysql_error_code(exc)
    if code == _DEADLOCK:
        return "deadlock"
    if code == _LOCK_WAIT_TIMEOUT:
        return "lock_wait_timeout"
    if "database is locked" in str(exc.orig):
        return "database_locked"
    return None


def run_transaction(engine: sa.Engine, work: Callable[[sa.Connection], T]) -> T:
    """Run ``work`` in one short transaction, retrying the whole of it on deadlock/lock-wait.

    ``work`` must be safe to run again from the start (it only talks to the database).
    A connection lost while COMMIT was in flight raises :class:`CommitOutcomeUnknown`: the
    caller resolves it by the operation's stable identity, never by blind re-execution. A value
    the database refuses raises :class:`DataRefused` (not retried: it would fail again).
    """
    for attempt in range(1, MAX_TRANSACTION_ATTEMPTS + 1):
        conn = engine.connect()
        committing = False
        try:
            with conn.begin():
                result = work(conn)
                committing = True
            conn.info[_COMMITTED] = True  # nothing left to roll back when the pool takes it
            return result
        except UnicodeEncodeError as exc:  # the driver could not encode a value: nothing sent
            raise data_refused(exc) from exc
        except sa.exc.DBAPIError as exc:
            if is_data_error(exc):
                raise data_refused(exc) from exc
            lost = exc.connection_invalidated or _mysql_error_code(exc) in _CONNECTION_LOST
            if committing and lost:
                raise CommitOutcomeUnknown(str(exc.orig)) from exc
            if lost and attempt < MAX_TRANSACTION_ATTEMPTS:
                # Lost before COMMIT was sent: nothing was committed, so run it again.
                TRANSACTION_RETRIES.add("connection_lost")
                log.info("transaction retry after lost connection", extra={"attempt": attempt})
                continue
            reason = _retry_reason(exc)
            if reason is None:
                raise
            if attempt == MAX_TRANSACTION_ATTEMPTS:
                raise TransientStoreError(str(exc.orig)) from exc
            TRANSACTION_RETRIES.add(reason)
            log.info("transaction retry", extra={"attempt": attempt, "reason": reason})
            time.sleep(retry_sleep(attempt))
        finally:
            conn.close()
    raise AssertionError("unreachable")
