"""Alembic environment for Orbit. Run through ``orbit admin migrate`` (or
orbit_store.upgrade.migrate)."""

from __future__ import annotations

from typing import Any

from alembic import context

from orbit_store.schema import metadata
from orbit_store.upgrade.compatibility import record_window

config = context.config


def _record_window(*, ctx: Any, step: Any, heads: Any, run_args: Any) -> None:
    """After every step: which code revisions may run on the schema now (compatibility.py)."""
    revision = next(iter(heads), None)
    record_window(ctx.connection, context.script, revision)


def _configure(connection: object) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        compare_type=True,
        # SQLite cannot ALTER most things in place; batch mode copies the table instead.
        render_as_batch=connection.dialect.name == "sqlite",  # type: ignore[attr-defined]
        on_version_apply=_record_window,
    )


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is None:
        from orbit_store.db import create_store_engine

        engine = create_store_engine(config.get_main_option("sqlalchemy.url"))
        with engine.connect() as conn:
            _configure(conn)
            with context.begin_transaction():
                context.run_migrations()
        engine.dispose()
        return
    _configure(connection)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    raise SystemExit("Orbit migrations run online only: use `orbit admin migrate`.")
run_migrations_online()
