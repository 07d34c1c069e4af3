"""Schema migrations: upgrade to head, check whether a database is current, downgrade (tests).

Tables are created only through these Alembic migrations (``migrations/`` in the source tree,
installed as the ``orbit_migrations`` package).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from orbit_store.upgrade.compatibility import SchemaCompatibility, check


@dataclass(frozen=True)
class MigrationReport:
    """What ``upgrade`` did: the revision before, after, and each revision applied in order."""

    before: str | None
    after: str | None
    applied: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.before != self.after


def alembic_config(connection: sa.Connection | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(resources.files("orbit_migrations")))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


@functools.cache
def code_revisions() -> ScriptDirectory:
    """This code's migrations, loaded once per process: they cannot change while it runs, and
    loading them executes every revision file — ~25 ms of CPU that ``/readyz`` paid on every
    probe."""
    return ScriptDirectory.from_config(alembic_config())


def head_revision() -> str | None:
    return code_revisions().get_current_head()


def current_revision(engine: sa.Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def compatibility(engine: sa.Engine) -> SchemaCompatibility:
    """May this code run on the database's schema (its compatibility window)?"""
    return check(engine, code_revisions())


def is_current(engine: sa.Engine) -> bool:
    """True when the database is at the head revision this code was written for."""
    return current_revision(engine) == head_revision()


@contextmanager
def _migrating(engine: sa.Engine) -> Iterator[sa.Connection]:
    """One transaction for the migrations. On SQLite, foreign keys are not enforced meanwhile
    (set outside the transaction, where SQLite allows it): a batch migration copies a table
    that others reference, then drops the original — which enforcement would refuse. The keys
    are checked once the migrations are done, and the transaction fails if one is broken."""
    with engine.connect() as conn:
        sqlite = conn.dialect.name == "sqlite"
        if sqlite:
            conn.connection.driver_connection.execute("PRAGMA foreign_keys = OFF")  # type: ignore[union-attr]
        try:
            with conn.begin():
                yield conn
                if sqlite and conn.exec_driver_sql("PRAGMA foreign_key_check").first():
                    raise RuntimeError("a migration left a broken foreign key; rolled back")
        finally:
            if sqlite:
                conn.connection.driver_connection.execute("PRAGMA foreign_keys = ON")  # type: ignore[union-attr]


def upgrade(engine: sa.Engine, target: str = "head") -> MigrationReport:
    """Upgrade to ``target`` (idempotent: an up-to-date database is left untouched)."""
    before = current_revision(engine)
    script = code_revisions()
    with _migrating(engine) as conn:
        command.upgrade(alembic_config(conn), target)
    after = current_revision(engine)
    applied = []
    if before != after and after is not None:
        applied = [rev.revision for rev in script.iterate_revisions(after, before)]
        applied.reverse()
    return MigrationReport(before=before, after=after, applied=applied)


def downgrade(engine: sa.Engine, target: str = "base") -> MigrationReport:
    before = current_revision(engine)
    with _migrating(engine) as conn:
        command.downgrade(alembic_config(conn), target)
    return MigrationReport(before=before, after=current_revision(engine))
