"""The operator's use of MySQL: one engine, and store transactions whose failures to reach the
database become one typed error the handlers turn into ``Ready=Unknown, DatabaseUnavailable``."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

import sqlalchemy as sa

from orbit.database import redacted, require_compatible_schema
from orbit_store.db import create_store_engine, run_transaction
from orbit_store.errors import CommitOutcomeUnknown, SchemaOutOfDate, TransientStoreError
from orbit_store.recovery.durability import check_durability

log = logging.getLogger("orbit.operator")

T = TypeVar("T")


class DatabaseUnavailable(Exception):
    """MySQL could not be reached or answered with a server-side error; retry later."""


def describe(exc: BaseException) -> str:
    if isinstance(exc, sa.exc.DBAPIError):
        return str(exc.orig).strip()[:500]
    return str(exc)[:500]


def run(engine: sa.Engine, work: Callable[[sa.Connection], T]) -> T:
    """Run one store transaction; an unreachable or failing database raises
    :class:`DatabaseUnavailable`. Integrity errors are bugs, not outages, and pass through."""
    try:
        return run_transaction(engine, work)
    except sa.exc.IntegrityError:
        raise
    except (sa.exc.DBAPIError, TransientStoreError, CommitOutcomeUnknown) as exc:
        raise DatabaseUnavailable(f"database unavailable: {describe(exc)}") from exc


def connect(url: str) -> sa.Engine:
    """The engine for ``url``. The schema must be within this code's compatibility window
    (SchemaOutOfDate otherwise); a
    database that cannot be reached now is only logged: handlers report it until it is back."""
    engine = create_store_engine(url)
    try:
        require_compatible_schema(engine)
        with engine.connect() as conn:
            report = check_durability(conn)
        for problem in report.problems:
            log.warning("database is not durable: %s", problem)
    except SchemaOutOfDate:
        engine.dispose()
        raise
    except sa.exc.DBAPIError as exc:
        log.warning(
            "database %s unavailable at startup: %s; resources report DatabaseUnavailable "
            "until it is back",
            redacted(url),
            describe(exc),
        )
    return engine
