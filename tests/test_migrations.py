"""The schema is created only by Alembic migrations, and they match the code's metadata exactly."""

from __future__ import annotations

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from typer.testing import CliRunner

from orbit.cli.main import app
from orbit_store import migrate
from orbit_store.db import create_store_engine
from orbit_store.schema import metadata

runner = CliRunner()


def _tables(url: str) -> set[str]:
    engine = create_store_engine(url)
    try:
        return set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_migrate_creates_every_table_and_a_second_run_changes_nothing(any_empty_url: str) -> None:
    first = runner.invoke(app, ["admin", "migrate", "--database-url", any_empty_url])
    assert first.exit_code == 0, first.output
    assert "applied revision" in first.output
    assert _tables(any_empty_url) == set(metadata.tables) | {"alembic_version"}

    second = runner.invoke(app, ["admin", "migrate", "--database-url", any_empty_url])
    assert second.exit_code == 0, second.output
    assert "nothing to do" in second.output


def test_migrate_check_exits_1_when_behind_and_0_when_current(any_empty_url: str) -> None:
    behind = runner.invoke(app, ["admin", "migrate", "--check", "--database-url", any_empty_url])
    assert behind.exit_code == 1
    assert _tables(any_empty_url) == set(), "--check must not create anything"

    assert runner.invoke(app, ["admin", "migrate", "--database-url", any_empty_url]).exit_code == 0
    current = runner.invoke(app, ["admin", "migrate", "--check", "--database-url", any_empty_url])
    assert current.exit_code == 0, current.output


def test_migrated_schema_has_no_drift_from_metadata(any_empty_url: str) -> None:
    engine = create_store_engine(any_empty_url)
    try:
        migrate.upgrade(engine)
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            assert compare_metadata(context, metadata) == []
    finally:
        engine.dispose()


def test_downgrade_to_base_then_upgrade_again(any_empty_url: str) -> None:
    engine = create_store_engine(any_empty_url)
    try:
        migrate.upgrade(engine)
        migrate.downgrade(engine, "base")
        assert set(sa.inspect(engine).get_table_names()) <= {"alembic_version"}
        report = migrate.upgrade(engine)
        assert report.after == migrate.head_revision()
        assert set(metadata.tables) <= set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_there_is_exactly_one_alembic_head() -> None:
    heads = ScriptDirectory.from_config(migrate.alembic_config()).get_heads()
    assert len(heads) == 1, f"merge the migration heads: {heads}"
