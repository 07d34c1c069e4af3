"""Migrated databases for the tests, made by copying one migrated template database.

Running every migration is a long series of DDL statements per database, and the suite makes
many databases (a restore fence or a reaper pass affects a whole database, so those tests take
one of their own). Each process migrates one template once; a new database is then the
template's tables, created from its own ``SHOW CREATE TABLE`` (keys, foreign keys and options as
migrated), and its rows (the rows the migrations seed). ``tests/schema/test_database_clones.py``
holds a copy equal to a migrated database; ``tests/schema/test_migrations.py`` still runs the
migrations themselves.

SQLite databases (``orbit dev``) are copied the same way: one migrated file per process, copied
with SQLite's online backup, page for page.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import make_url

from orbit_store.db import create_store_engine
from orbit_store.upgrade import migrate


class TemplateHasMoreThanTables(RuntimeError):
    """The template holds views, triggers or routines, which copying its tables would lose."""


class MigratedTemplate:
    """One migrated database, never written after its migration, and copies of it."""

    def __init__(self, template_url: str) -> None:
        self.url = template_url
        self.name = str(make_url(template_url).database)
        engine = create_store_engine(template_url)
        try:
            migrate.upgrade(engine)
        finally:
            engine.dispose()
        self.tables = self._table_statements()

    def _table_statements(self) -> dict[str, str]:
        engine = sa.create_engine(self.url)
        try:
            with engine.connect() as conn:
                schema = {"schema": self.name}
                others = conn.execute(
                    sa.text(
                        "SELECT (SELECT COUNT(*) FROM information_schema.views"
                        " WHERE table_schema = :schema)"
                        " + (SELECT COUNT(*) FROM information_schema.triggers"
                        " WHERE trigger_schema = :schema)"
                        " + (SELECT COUNT(*) FROM information_schema.routines"
                        " WHERE routine_schema = :schema)"
                    ),
                    schema,
                ).scalar_one()
                if others:
                    raise TemplateHasMoreThanTables(f"{self.name} has {others} such objects")
                names = conn.execute(
                    sa.text(
                        "SELECT table_name FROM information_schema.tables"
                        " WHERE table_schema = :schema AND table_type = 'BASE TABLE'"
                        " ORDER BY table_name"
                    ),
                    schema,
                ).scalars()
                return {
                    name: conn.exec_driver_sql(f"SHOW CREATE TABLE `{name}`").one()[1]
                    for name in names
                }
        finally:
            engine.dispose()

    def copy_into(self, url: str) -> None:
        """Create the template's tables and rows in the empty database ``url``."""
        engine = sa.create_engine(url)
        try:
            with engine.begin() as conn:
                # Tables are created in name order, before the tables their keys refer to.
                conn.exec_driver_sql("SET SESSION foreign_key_checks = 0")
                for statement in self.tables.values():
                    conn.exec_driver_sql(statement)
                for name in self.tables:
                    conn.exec_driver_sql(
                        f"INSERT INTO `{name}` SELECT * FROM `{self.name}`.`{name}`"
                    )
                conn.exec_driver_sql("SET SESSION foreign_key_checks = 1")
        finally:
            engine.dispose()


class MigratedSqliteTemplate:
    """One migrated SQLite file, never written after its migration, and copies of it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        engine = create_store_engine(f"sqlite:///{path}")
        try:
            migrate.upgrade(engine)
        finally:
            engine.dispose()

    def copy_to(self, path: Path) -> str:
        """A new migrated database file at ``path`` (which must not exist); its URL."""
        if path.exists():
            raise FileExistsError(path)
        with closing(sqlite3.connect(self.path)) as source, closing(sqlite3.connect(path)) as copy:
            source.backup(copy)
        return f"sqlite:///{path}"
