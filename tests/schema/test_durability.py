"""Start-up reads the durable baseline of seed §7 and says what falls short — checked against a
MariaDB this module starts non-durable (its own datadir and port; the shared server is never
reconfigured) and against the durable shared test server."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from own_mariadb import OwnMariaDB, available, start_own_mariadb

from orbit.database import open_engine
from orbit_store.recovery.durability import check_durability

pytestmark = pytest.mark.mariadb_only


@pytest.fixture(scope="module")
def non_durable_mariadb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OwnMariaDB]:
    """A private server that acknowledges commits before they reach the disk: redo log flushed
    once a second, binary log on and never synced."""
    if not available():
        pytest.skip("mariadb-install-db/mariadbd not installed")
    own = start_own_mariadb(
        tmp_path_factory.mktemp("non-durable-mariadb"),
        "--innodb-flush-log-at-trx-commit=2",
        "--log-bin=binlog",
        "--server-id=1",
        "--sync-binlog=0",
    )
    yield own
    own.stop()


def report_of(url: str) -> tuple[bool, list[str], dict[str, str]]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            report = check_durability(conn)
    finally:
        engine.dispose()
    return report.durable, report.problems, report.settings


def test_a_server_that_flushes_lazily_and_never_syncs_its_binlog_is_not_durable(
    non_durable_mariadb: OwnMariaDB,
) -> None:
    durable, problems, settings = report_of(non_durable_mariadb.url)
    assert not durable
    assert settings == {"innodb_flush_log_at_trx_commit": "2", "log_bin": "ON", "sync_binlog": "0"}
    assert len(problems) == 2
    assert "innodb_flush_log_at_trx_commit=2" in problems[0] and "Set it to 1" in problems[0]
    assert "sync_binlog=0 with the binary log on" in problems[1]


def test_the_same_server_made_durable_passes_with_its_binlog_on(
    non_durable_mariadb: OwnMariaDB,
) -> None:
    engine = sa.create_engine(non_durable_mariadb.url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("SET GLOBAL innodb_flush_log_at_trx_commit = 1"))
            conn.execute(sa.text("SET GLOBAL sync_binlog = 1"))
        durable, problems, settings = report_of(non_durable_mariadb.url)
    finally:
        with engine.begin() as conn:  # back to how the fixture promised it for the other tests
            conn.execute(sa.text("SET GLOBAL innodb_flush_log_at_trx_commit = 2"))
            conn.execute(sa.text("SET GLOBAL sync_binlog = 0"))
        engine.dispose()
    assert durable and problems == []
    assert settings == {"innodb_flush_log_at_trx_commit": "1", "log_bin": "ON", "sync_binlog": "1"}


def test_the_shared_test_server_is_durable(mariadb_engine: sa.Engine) -> None:
    with mariadb_engine.connect() as conn:
        flush = str(conn.execute(sa.text("SELECT @@innodb_flush_log_at_trx_commit")).scalar_one())
        if flush != "1":
            pytest.skip(f"ORBIT_TEST_DATABASE_URL points at a server with flush={flush}")
        report = check_durability(conn)
    assert report.durable and report.problems == []
    assert report.settings["innodb_flush_log_at_trx_commit"] == "1"


def test_open_engine_warns_when_the_server_is_not_durable(
    non_durable_mariadb: OwnMariaDB, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="orbit.database"):
        open_engine(non_durable_mariadb.url).dispose()
    warnings = [r.getMessage() for r in caplog.records if r.name == "orbit.database"]
    assert len(warnings) == 2 and all("database is not durable" in w for w in warnings)
    assert "innodb_flush_log_at_trx_commit=2" in warnings[0]


def test_open_engine_is_quiet_on_a_durable_server(
    mariadb_url: str, mariadb_engine: sa.Engine, caplog: pytest.LogCaptureFixture
) -> None:
    with mariadb_engine.connect() as conn:
        if not check_durability(conn).durable:
            pytest.skip("ORBIT_TEST_DATABASE_URL points at a non-durable server")
    with caplog.at_level(logging.WARNING, logger="orbit.database"):
        open_engine(mariadb_url).dispose()
    assert [r for r in caplog.records if r.name == "orbit.database"] == []
