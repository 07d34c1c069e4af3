"""Shared fixtures: a fresh, migrated MariaDB database per test session (real server, real
connection), migrated databases of a test's own on each backend (copies of a template), fresh
empty databases for migration tests, and SQLite files for the dev backend.

ORBIT_TEST_DATABASE_URL (a server URL such as ``mysql+pymysql://root@127.0.0.1:3306/``) points the
tests at another MariaDB/MySQL server.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from migrated_databases import MigratedSqliteTemplate, MigratedTemplate
from sqlalchemy.engine import make_url
from stale_databases import drop_stale_databases, new_database_name, server_url

from orbit_store.db import create_store_engine


def _create_database() -> str:
    name = new_database_name()
    admin = sa.create_engine(server_url().set(database=None))
    with admin.begin() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    admin.dispose()
    return server_url().set(database=name).render_as_string(hide_password=False)


def _drop_database(url: str) -> None:
    name = make_url(url).database
    admin = sa.create_engine(server_url().set(database=None))
    with admin.begin() as conn:
        conn.exec_driver_sql(f"DROP DATABASE IF EXISTS `{name}`")
    admin.dispose()


@pytest.fixture(scope="session")
def migrated_template() -> Iterator[MigratedTemplate]:
    """One migrated database per test process, copied by :func:`migrated_database`; no test
    writes to it."""
    url = _create_database()
    try:
        yield MigratedTemplate(url)
    finally:
        _drop_database(url)


@pytest.fixture(scope="session")
def migrated_database(migrated_template: MigratedTemplate) -> Iterator[Callable[[], str]]:
    """Make more migrated databases (dropped at the end of the session): copies of the
    template, equal to a database the migrations made (tests/schema/test_database_clones.py)."""
    made: list[str] = []

    def make() -> str:
        url = _create_database()
        made.append(url)
        migrated_template.copy_into(url)
        return url

    yield make
    for url in made:
        _drop_database(url)


@pytest.fixture(scope="session")
def migrated_sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> MigratedSqliteTemplate:
    """One migrated SQLite file per test process, copied by :func:`any_migrated_url`; no test
    writes to it."""
    return MigratedSqliteTemplate(tmp_path_factory.mktemp("sqlite-template") / "orbit.db")


@pytest.fixture(params=["mariadb", "sqlite"])
def any_migrated_url(
    request: pytest.FixtureRequest,
    migrated_template: MigratedTemplate,
    migrated_sqlite_template: MigratedSqliteTemplate,
    tmp_path: Path,
) -> Iterator[str]:
    """A migrated database of this test's own on each backend Orbit supports (a copy of the
    process's template: tests/schema/test_database_clones.py), dropped afterwards."""
    if request.param == "sqlite":
        yield migrated_sqlite_template.copy_to(tmp_path / "orbit.db")
        return
    url = _create_database()
    try:
        migrated_template.copy_into(url)
        yield url
    finally:
        _drop_database(url)


@pytest.fixture
def empty_mariadb_url() -> Iterator[str]:
    """A new, empty database on the test server, dropped afterwards."""
    url = _create_database()
    try:
        yield url
    finally:
        _drop_database(url)


@pytest.fixture(scope="session")
def mariadb_url(migrated_template: MigratedTemplate) -> Iterator[str]:
    """One migrated database for the whole session; tests isolate themselves by namespace."""
    url = _create_database()
    try:
        migrated_template.copy_into(url)
        yield url
    finally:
        _drop_database(url)


@pytest.fixture(scope="session")
def mariadb_engine(mariadb_url: str) -> Iterator[sa.Engine]:
    engine = create_store_engine(mariadb_url)
    yield engine
    engine.dispose()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'orbit.db'}"


@pytest.fixture(params=["mariadb", "sqlite"])
def any_empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database on each backend Orbit supports."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'orbit.db'}"
        return
    url = _create_database()
    try:
        yield url
    finally:
        _drop_database(url)


class Backups:
    """Real backups: `mariadb-dump --single-transaction` of a whole database, read back with the
    `mariadb` client (its DROP TABLE / CREATE TABLE / INSERT statements), as an operator would."""

    @staticmethod
    def _client_args(url: str) -> list[str]:
        parsed = make_url(url)
        args = [f"--host={parsed.host or '127.0.0.1'}", f"--port={parsed.port or 3306}"]
        args.append(f"--user={parsed.username or 'root'}")
        if parsed.password:
            args.append(f"--password={parsed.password}")
        return [*args, str(parsed.database)]

    def take(self, url: str) -> bytes:
        dump = subprocess.run(
            ["mariadb-dump", "--single-transaction", *self._client_args(url)],
            check=True,
            capture_output=True,
            timeout=120,
        )
        return dump.stdout

    def restore(self, url: str, dump: bytes) -> None:
        subprocess.run(
            ["mariadb", *self._client_args(url)],
            input=dump,
            check=True,
            capture_output=True,
            timeout=120,
        )


@pytest.fixture
def backups() -> Backups:
    """Take and restore real dumps (skipped where the MariaDB client tools are missing)."""
    if shutil.which("mariadb-dump") is None or shutil.which("mariadb") is None:
        pytest.skip("needs the mariadb-dump and mariadb client tools")
    return Backups()


def pytest_configure(config: pytest.Config) -> None:
    """No test reads or writes the user's CLI contexts (orbit/cli/contexts.py): every `orbit`
    the suite runs finds its config under a directory of this run's own."""
    for name in ("ORBIT_CONFIG", "ORBIT_CONTEXT"):
        os.environ.pop(name, None)
    os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="orbit-test-config-")


def pytest_sessionstart(session: pytest.Session) -> None:
    """Drop the databases interrupted runs left behind (tests/stale_databases.py), once per run:
    in the controller, not in each xdist worker."""
    if hasattr(session.config, "workerinput"):
        return
    admin = sa.create_engine(server_url().set(database=None))
    try:
        drop_stale_databases(admin)
    except sa.exc.OperationalError:
        pass  # no test server here: the tests that need one say so themselves
    finally:
        admin.dispose()


def pytest_addoption(parser: pytest.Parser) -> None:
    """The chaos suite's options (tests/chaos): the long form and a replayable seed; the
    namespace-locality check's switch (tests/locality)."""
    parser.addoption(
        "--no-namespace-locality",
        action="store_true",
        default=False,
        help="Do not check that each store transaction touches one namespace (tests/locality).",
    )
    group = parser.getgroup("chaos")
    group.addoption(
        "--chaos-minutes",
        type=float,
        default=None,
        help="Run the chaos harness's long form: inject faults for N minutes.",
    )
    group.addoption(
        "--chaos-seed", type=int, default=None, help="Seed of the fault schedule and the load."
    )
