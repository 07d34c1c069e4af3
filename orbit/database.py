"""Opening the store from a process: engine, durability warning, schema compatibility check."""

from __future__ import annotations

import logging

import sqlalchemy as sa
from sqlalchemy.engine import make_url

from orbit_store.db import create_store_engine
from orbit_store.errors import SchemaOutOfDate
from orbit_store.recovery.durability import check_durability
from orbit_store.timeouts import IO_TIMEOUT_SECONDS
from orbit_store.upgrade import migrate

log = logging.getLogger("orbit.database")


def redacted(url: str) -> str:
    return make_url(url).render_as_string(hide_password=True)


def open_engine(
    url: str,
    *,
    warn_durability: bool = True,
    pool_size: int | None = None,
    io_timeout: float | None = IO_TIMEOUT_SECONDS,
) -> sa.Engine:
    """Create the engine; on MySQL/MariaDB warn loudly when the durable baseline is not in force.
    ``pool_size``: warm connections kept (as many again may overflow); the store's default when
    None. Ignored for SQLite. ``io_timeout``: seconds a database read or write may take (None:
    unbounded, for migrations)."""
    pool: dict[str, int] = {}
    if pool_size is not None and make_url(url).get_backend_name() != "sqlite":
        pool = {"pool_size": pool_size, "max_overflow": pool_size}
    engine = create_store_engine(url, io_timeout=io_timeout, **pool)
    if warn_durability:
        with engine.connect() as conn:
            report = check_durability(conn)
        for problem in report.problems:
            log.warning("database is not durable: %s", problem, extra={"settings": report.settings})
    return engine


def require_compatible_schema(engine: sa.Engine) -> None:
    """Refuse to run against a database older than this code, or newer and outside its
    compatibility window (orbit_store.upgrade.compatibility); a newer expand-only schema is fine."""
    compatibility = migrate.compatibility(engine)
    if not compatibility.compatible:
        raise SchemaOutOfDate(compatibility.explain())
