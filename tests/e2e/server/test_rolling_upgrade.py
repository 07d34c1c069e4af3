"""A rolling upgrade across a migration: the next release's migration runs while servers of the
current release keep serving (the schema's compatibility window,
orbit_store/upgrade/compatibility.py).

The "next release" is this code plus migration files written here, applied through the real
migration environment (migrations/env.py records the window after every step). The servers are
real `orbit server` processes of the current code.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from typer.testing import CliRunner

from orbit.cli.main import app
from orbit_store.db import create_store_engine
from orbit_store.upgrade import migrate
from orbit_store.upgrade.compatibility import Verdict, min_code_revision

from ..conftest import ORBIT, Server, free_port, is_ready, start_server, stop_server, wait_until

HEAD = migrate.head_revision()
assert HEAD is not None

MIGRATION = '''"""{doc}"""

import sqlalchemy as sa
from alembic import op

revision = "{revision}"
down_revision = "{down}"
branch_labels = None
depends_on = None
expand_only = {expand_only}


def upgrade() -> None:
    {upgrade}


def downgrade() -> None:
    {downgrade}
'''

# The next release adds a nullable column (expand) …
EXPAND = MIGRATION.format(
    doc="next release: tasks get an optional note",
    revision="9001",
    down=HEAD,
    expand_only=True,
    upgrade='op.add_column("tasks", sa.Column("next_note", sa.String(64), nullable=True))',
    downgrade='op.drop_column("tasks", "next_note")',
)
# … and the release after it drops a column the current code reads (contract).
CONTRACT = MIGRATION.format(
    doc="release after next: tasks lose their handler column",
    revision="9002",
    down="9001",
    expand_only=False,
    upgrade='op.drop_column("tasks", "handler")',
    downgrade='op.add_column("tasks", sa.Column("handler", sa.String(255), nullable=True))',
)


def with_next_releases(config: Config, versions: Path) -> Config:
    """The real migration environment with the next releases' files beside ours."""
    ours = resources.files("orbit_migrations") / "versions"
    config.set_main_option("path_separator", "os")
    config.set_main_option("version_locations", os.pathsep.join([str(ours), str(versions)]))
    return config


def upgrade_to(engine: sa.Engine, versions: Path, target: str) -> None:
    with engine.begin() as conn:
        command.upgrade(with_next_releases(migrate.alembic_config(conn), versions), target)


@pytest.fixture
def next_releases(tmp_path: Path) -> Path:
    versions = tmp_path / "next_versions"
    versions.mkdir()
    (versions / "9001_next_note.py").write_text(EXPAND)
    (versions / "9002_drop_handler.py").write_text(CONTRACT)
    return versions


@pytest.fixture
def database(migrated_database: Callable[[], str]) -> Iterator[tuple[str, sa.Engine]]:
    """A database of the test's own at this code's head: a copy of the migrated template
    (tests/migrated_databases.py), which the upgrades below then migrate for real."""
    url = migrated_database()
    engine = create_store_engine(url)
    yield url, engine
    engine.dispose()


@pytest.fixture
def current_server(database: tuple[str, sa.Engine], tmp_path: Path) -> Iterator[Server]:
    started = start_server(database[0], tmp_path / "current.log")
    yield started
    stop_server(started)


def submit_works(server: Server, engine: sa.Engine) -> bool:
    """The server still does real work on the schema: it accepts a task."""
    from orbit_store.access.credentials import create_token
    from orbit_store.db import run_transaction

    issued = run_transaction(
        engine, lambda conn: create_token(conn, namespace="upg", name="t", roles=["submit"])
    )
    response = httpx.post(
        f"{server.url}/v1/namespaces/upg/tasks",
        json={"handler": "h"},
        headers={"Authorization": f"Bearer {issued.token}"},
        timeout=10,
    )
    return response.status_code == 201


def test_current_servers_stay_ready_through_an_expand_only_migration_and_leave_on_a_contract(
    database: tuple[str, sa.Engine], current_server: Server, next_releases: Path
) -> None:
    _url, engine = database
    assert is_ready(current_server)

    upgrade_to(engine, next_releases, "9001")  # the next release's pre-upgrade migration Job

    readyz = httpx.get(f"{current_server.url}/readyz", timeout=5)
    assert readyz.status_code == 200, readyz.text
    assert readyz.json() == {"status": "ready", "schema": "9001", "code": HEAD}
    assert submit_works(current_server, engine), "old servers keep serving on the new schema"

    upgrade_to(engine, next_releases, "9002")  # a later release contracts the schema

    def refused() -> httpx.Response | None:
        answer = httpx.get(f"{current_server.url}/readyz", timeout=5)
        return answer if answer.status_code == 503 else None

    detail = wait_until(refused, timeout=30).json()["detail"]
    assert "9002" in detail and "needs code at revision 9002" in detail
    assert "upgrade Orbit" in detail


def test_a_server_whose_database_goes_back_to_an_older_schema_is_not_ready_until_migrated(
    database: tuple[str, sa.Engine], current_server: Server
) -> None:
    """A backup from before the last migration restored under running servers: /readyz answers
    503 naming the fix, and is ready again once the schema is migrated."""
    _url, engine = database
    assert is_ready(current_server)
    previous = ScriptDirectory.from_config(migrate.alembic_config()).get_revision(HEAD)
    assert previous is not None and isinstance(previous.down_revision, str)
    with engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE alembic_version SET version_num = :v"), {"v": previous.down_revision}
        )

    def refused() -> httpx.Response | None:
        answer = httpx.get(f"{current_server.url}/readyz", timeout=5)
        return answer if answer.status_code == 503 else None

    problem = wait_until(refused, timeout=30).json()
    assert problem["type"].endswith("/unavailable")
    assert f"revision {previous.down_revision}, this code needs {HEAD}" in problem["detail"]
    assert "run `orbit admin migrate`" in problem["detail"]
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = :v"), {"v": HEAD})
    wait_until(lambda: is_ready(current_server), timeout=30)


def start_refused(url: str) -> str:
    """`orbit server` on this database exits 5 (schema not usable) at once; what it said."""
    result = subprocess.run(
        [ORBIT, "server", "--port", str(free_port())],
        env={**os.environ, "ORBIT_DATABASE_URL": url},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 5, result.stdout + result.stderr
    return result.stderr


def test_a_server_refuses_to_start_on_a_schema_newer_than_its_window(
    database: tuple[str, sa.Engine], next_releases: Path
) -> None:
    url, engine = database
    upgrade_to(engine, next_releases, "9002")
    assert "needs code at revision 9002 or later: upgrade Orbit" in start_refused(url)


def test_a_server_accepts_a_newer_expand_only_schema_at_start_up(
    database: tuple[str, sa.Engine], next_releases: Path, tmp_path: Path
) -> None:
    url, engine = database
    upgrade_to(engine, next_releases, "9001")
    started = start_server(url, tmp_path / "new-start.log")
    try:
        wait_until(lambda: is_ready(started), timeout=30)
    finally:
        stop_server(started)


def test_a_server_refuses_to_start_on_a_schema_older_than_its_code(
    database: tuple[str, sa.Engine],
) -> None:
    url, engine = database
    migrate.downgrade(engine, "0002")
    said = start_refused(url)
    assert f"this code needs {HEAD}: run `orbit admin migrate`" in said


def test_migrate_on_a_newer_compatible_schema_changes_nothing_and_says_so(
    database: tuple[str, sa.Engine], next_releases: Path
) -> None:
    """A rollback's migration Job (older chart) must not fail on the newer schema."""
    url, engine = database
    upgrade_to(engine, next_releases, "9001")
    result = CliRunner().invoke(app, ["admin", "migrate", "--database-url", url])
    assert result.exit_code == 0, result.output
    assert "nothing to do" in result.output and "compatible" in result.output
    upgrade_to(engine, next_releases, "9002")
    result = CliRunner().invoke(app, ["admin", "migrate", "--database-url", url])
    assert result.exit_code == 1
    assert "upgrade Orbit" in result.output


def test_every_migration_declares_whether_it_is_expand_only() -> None:
    scripts = ScriptDirectory.from_config(migrate.alembic_config())
    for script in scripts.walk_revisions():
        declared = getattr(script.module, "expand_only", None)
        assert isinstance(declared, bool), (
            f"migration {script.revision} must declare expand_only = True or False "
            "(docs/operations/database.md#the-compatibility-window)"
        )


def test_the_window_follows_the_chain_of_declarations(next_releases: Path) -> None:
    config = with_next_releases(migrate.alembic_config(), next_releases)
    scripts = ScriptDirectory.from_config(config)
    assert min_code_revision(scripts, "0001") == "0001"
    assert min_code_revision(scripts, "9001") == min_code_revision(scripts, HEAD)
    assert min_code_revision(scripts, "9002") == "9002"


def test_compatibility_verdicts(database: tuple[str, sa.Engine], next_releases: Path) -> None:
    _url, engine = database
    assert migrate.compatibility(engine).verdict is Verdict.CURRENT
    upgrade_to(engine, next_releases, "9001")
    assert migrate.compatibility(engine).verdict is Verdict.NEWER_COMPATIBLE
    upgrade_to(engine, next_releases, "9002")
    assert migrate.compatibility(engine).verdict is Verdict.NEWER_INCOMPATIBLE


def test_the_code_s_migrations_are_loaded_once_per_process(
    database: tuple[str, sa.Engine], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A readiness probe judges the schema against this code's migrations, which cannot change
    while it runs: loading them (every revision file executed) happens once, not per probe."""
    loads: list[object] = []
    real = migrate.ScriptDirectory.from_config
    monkeypatch.setattr(
        migrate.ScriptDirectory, "from_config", lambda cfg: loads.append(cfg) or real(cfg)
    )
    migrate.code_revisions.cache_clear()
    for _ in range(3):
        assert migrate.compatibility(database[1]).verdict is Verdict.CURRENT
    assert len(loads) == 1
