"""The suite's migrated databases are copies of one migrated template
(tests/migrated_databases.py): a copy must be the database the migrations make — every table as
``SHOW CREATE TABLE`` prints it (SQLite: as ``sqlite_master`` holds it), every seeded row, whose
times are the template's — and what a test writes to its copy must stay there."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
from migrated_databases import (
    MigratedSqliteTemplate,
    MigratedTemplate,
    TemplateHasMoreThanTables,
)

from orbit_store.db import create_store_engine
from orbit_store.upgrade import migrate


def _untimed(value: object) -> object:
    # A seeded row's time is when the template was migrated, seconds before a copy is made.
    return "<a time>" if isinstance(value, dt.datetime) else value


def snapshot(url: str) -> dict[str, tuple[str, list[tuple[object, ...]]]]:
    """Each table's definition (without its next AUTO_INCREMENT value) and its rows, in order."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            names = [row[0] for row in conn.exec_driver_sql("SHOW FULL TABLES")]
            found = {}
            for name in names:
                definition = conn.exec_driver_sql(f"SHOW CREATE TABLE `{name}`").one()[1]
                definition = re.sub(r" AUTO_INCREMENT=\d+", "", definition)
                rows = [
                    tuple(map(_untimed, r)) for r in conn.exec_driver_sql(f"SELECT * FROM `{name}`")
                ]
                found[name] = (definition, sorted(rows, key=repr))
            return found
    finally:
        engine.dispose()


def test_a_copy_is_the_database_the_migrations_make(
    migrated_database: Callable[[], str], empty_mariadb_url: str
) -> None:
    engine = create_store_engine(empty_mariadb_url)
    try:
        migrate.upgrade(engine)
    finally:
        engine.dispose()
    migrated = snapshot(empty_mariadb_url)

    copied = snapshot(migrated_database())

    assert sorted(copied) == sorted(migrated)
    for name, (definition, rows) in migrated.items():
        assert copied[name][0] == definition, name
        assert copied[name][1] == rows, name
    assert any(rows for _, rows in migrated.values()), "the migrations seed some rows"
    assert any("FOREIGN KEY" in definition for definition, _ in migrated.values())


def test_what_a_test_writes_to_its_copy_stays_in_it(
    migrated_template: MigratedTemplate, migrated_database: Callable[[], str]
) -> None:
    mine, other = migrated_database(), migrated_database()
    engine = sa.create_engine(mine)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("DELETE FROM alembic_version")
    finally:
        engine.dispose()

    assert snapshot(mine)["alembic_version"][1] == []
    assert snapshot(other)["alembic_version"][1] == [(migrate.head_revision(),)]
    assert snapshot(migrated_template.url)["alembic_version"][1] == [(migrate.head_revision(),)]


def test_a_template_with_a_view_is_refused_rather_than_copied_without_it(
    empty_mariadb_url: str,
) -> None:
    engine = sa.create_engine(empty_mariadb_url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("CREATE VIEW answers AS SELECT 42 AS answer")
    finally:
        engine.dispose()

    with pytest.raises(TemplateHasMoreThanTables):
        MigratedTemplate(empty_mariadb_url)


#: How SQLite stores a time: text, as "2026-12-05 10:30:00.123456".
SQLITE_TIME = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)?")


def _sqlite_untimed(value: object) -> object:
    if isinstance(value, str) and SQLITE_TIME.fullmatch(value):
        return "<a time>"
    return value


def _sqlite_definition(sql: str | None) -> str:
    # A migration that rebuilds a SQLite table lists its constraints in an order that changes
    # from one run of the migrations to the next: compare the lines, not their order.
    lines = (line.strip().rstrip(",") for line in str(sql).splitlines())
    return "\n".join(sorted(lines))


def sqlite_snapshot(url: str) -> dict[str, tuple[str, list[tuple[object, ...]]]]:
    """Each schema object's SQL (its lines in order) and, for a table, its rows, in order."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            found = {}
            objects = conn.exec_driver_sql("SELECT type, name, sql FROM sqlite_master").all()
            for kind, name, sql in objects:
                rows = []
                if kind == "table":
                    rows = [
                        tuple(map(_sqlite_untimed, r))
                        for r in conn.exec_driver_sql(f'SELECT * FROM "{name}"')
                    ]
                found[f"{kind} {name}"] = (_sqlite_definition(sql), sorted(rows, key=repr))
            return found
    finally:
        engine.dispose()


def test_a_sqlite_copy_is_the_database_the_migrations_make(
    migrated_sqlite_template: MigratedSqliteTemplate, tmp_path: Path
) -> None:
    engine = create_store_engine(f"sqlite:///{tmp_path / 'migrated.db'}")
    try:
        migrate.upgrade(engine)
    finally:
        engine.dispose()
    migrated = sqlite_snapshot(f"sqlite:///{tmp_path / 'migrated.db'}")

    copy_url = migrated_sqlite_template.copy_to(tmp_path / "copy.db")

    assert sqlite_snapshot(copy_url) == migrated
    assert any(rows for _, rows in migrated.values()), "the migrations seed some rows"
    with pytest.raises(FileExistsError):
        migrated_sqlite_template.copy_to(tmp_path / "copy.db")


def test_what_a_test_writes_to_its_sqlite_copy_stays_in_it(
    migrated_sqlite_template: MigratedSqliteTemplate, tmp_path: Path
) -> None:
    mine = migrated_sqlite_template.copy_to(tmp_path / "mine.db")
    other = migrated_sqlite_template.copy_to(tmp_path / "other.db")
    engine = create_store_engine(mine)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("DELETE FROM alembic_version")
    finally:
        engine.dispose()

    head = [(migrate.head_revision(),)]
    assert sqlite_snapshot(mine)["table alembic_version"][1] == []
    assert sqlite_snapshot(other)["table alembic_version"][1] == head
    template = f"sqlite:///{migrated_sqlite_template.path}"
    assert sqlite_snapshot(template)["table alembic_version"][1] == head
