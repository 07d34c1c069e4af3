"""Database time. Leases and deadlines are decided by the database clock, never the app's (seed §3).

Tests may shift the clock a connection sees with the execution option
``orbit_clock_skew_seconds`` (``engine.execution_options(orbit_clock_skew_seconds=60)``); the
shift is added to the database's own ``UTC_TIMESTAMP(6)``, so every process sharing that option
still agrees on one time source.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import FunctionElement

CLOCK_SKEW_OPTION = "orbit_clock_skew_seconds"


class utc_now(FunctionElement[dt.datetime]):
    """The database's current UTC time with microseconds."""

    type = sa.DateTime()
    inherit_cache = True


@compiles(utc_now, "mysql")
@compiles(utc_now, "mariadb")
def _utc_now_mysql(element: Any, compiler: Any, **kw: Any) -> str:
    return "UTC_TIMESTAMP(6)"


@compiles(utc_now, "sqlite")
def _utc_now_sqlite(element: Any, compiler: Any, **kw: Any) -> str:
    return "strftime('%Y-%m-%d %H:%M:%f', 'now')"


def db_now(conn: sa.Connection) -> dt.datetime:
    """Read the database's current UTC time (naive, microseconds), plus any test clock skew."""
    return as_db_time(conn, conn.execute(_NOW).scalar_one())


def as_db_time(conn: sa.Connection, value: dt.datetime | str) -> dt.datetime:
    """A ``utc_now()`` value selected alongside other columns (saving a round trip), as the
    transaction's notion of now."""
    if isinstance(value, str):  # SQLite returns text for an untyped expression
        value = dt.datetime.fromisoformat(value)
    skew = conn.get_execution_options().get(CLOCK_SKEW_OPTION, 0)
    return value + dt.timedelta(seconds=skew) if skew else value


#: Built once: most transactions read the time, and a prebuilt statement skips SQLAlchemy's
#: construction and cache key on every call.
_NOW = sa.select(utc_now())
