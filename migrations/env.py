"""Alembic environment for Orbit. Run through ``orbit admin migrate`` (or orbit_store.migrate)."""

from __future__ import annotations

from alembic import context

from orbit_store.schema import metadata

config = context.config


def _configure(connection: object) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        compare_type=True,
        # SQLite cannot ALTER most things in place; batch mode copies the table instead.
        render_as_batch=connection.dialect.name == "sqlite",  # type: ignore[attr-defined]
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
