"""Store tests run on MariaDB, and again on SQLite (``orbit dev``) where the semantics allow;
tests that need MariaDB's locking are marked ``mariadb_only``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from locality.plugin import locality_watch, namespace_locality  # noqa: F401 (fixtures)
from migrated_databases import MigratedSqliteTemplate

from orbit_store.db import create_store_engine
from orbit_store.recovery.verify import verify
from orbit_store.upgrade import migrate

from .drivers.delivery_driver import DeliveryDriver
from .drivers.pulse_driver import PulseDriver
from .drivers.schedule_driver import ScheduleDriver
from .drivers.weave_driver import WeaveDriver


@pytest.fixture(scope="session")
def sqlite_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[sa.Engine]:
    path: Path = tmp_path_factory.mktemp("sqlite") / "orbit.db"
    engine = create_store_engine(f"sqlite:///{path}")
    migrate.upgrade(engine)
    yield engine
    engine.dispose()


@pytest.fixture(params=["mariadb", "sqlite"])
def engine(request: pytest.FixtureRequest) -> sa.Engine:
    if request.param == "sqlite" and request.node.get_closest_marker("mariadb_only"):
        pytest.skip("needs MariaDB semantics")
    name = "mariadb_engine" if request.param == "mariadb" else "sqlite_engine"
    return request.getfixturevalue(name)  # type: ignore[no-any-return]


@pytest.fixture
def pulse(engine: sa.Engine) -> Iterator[PulseDriver]:
    """A driver on a fresh namespace; afterwards the namespace must pass `verify` (all checks)."""
    driver = PulseDriver(engine)
    yield driver
    with engine.connect() as conn:
        report = verify(conn, driver.namespace)
    assert report.clean, {k: v for k, v in report.as_dict()["checks"].items() if v["violations"]}


@pytest.fixture(params=["mariadb", "sqlite"])
def isolated_engine(
    request: pytest.FixtureRequest,
    migrated_database: Callable[[], str],
    migrated_sqlite_template: MigratedSqliteTemplate,
    tmp_path: Path,
) -> Iterator[sa.Engine]:
    """A database of this test's own (for what affects a whole database: a restore fence)."""
    if request.param == "sqlite" and request.node.get_closest_marker("mariadb_only"):
        pytest.skip("needs MariaDB semantics")
    if request.param == "mariadb":
        engine = create_store_engine(migrated_database())
    else:
        engine = create_store_engine(migrated_sqlite_template.copy_to(tmp_path / "own.db"))
    yield engine
    engine.dispose()


@pytest.fixture
def isolated_pulse(isolated_engine: sa.Engine) -> Iterator[PulseDriver]:
    """A Pulse driver on a database of its own; afterwards the database must pass `verify`."""
    driver = PulseDriver(isolated_engine)
    yield driver
    with isolated_engine.connect() as conn:
        report = verify(conn)
    assert report.clean, {k: v for k, v in report.as_dict()["checks"].items() if v["violations"]}


@pytest.fixture
def delivery(pulse: PulseDriver) -> DeliveryDriver:
    """Result delivery on the same namespace and clock as ``pulse``."""
    return DeliveryDriver(pulse)


@pytest.fixture
def schedules(pulse: PulseDriver) -> ScheduleDriver:
    """Schedules in the pulse driver's namespace, with a clock the test moves."""
    return ScheduleDriver(pulse)


@pytest.fixture
def weave(engine: sa.Engine) -> Iterator[WeaveDriver]:
    """A Weave driver on a fresh namespace; afterwards the namespace must pass `verify`."""
    driver = WeaveDriver(engine)
    yield driver
    with engine.connect() as conn:
        report = verify(conn, driver.namespace)
    assert report.clean, {k: v for k, v in report.as_dict()["checks"].items() if v["violations"]}


HANDLER_READS = (
    "Handler_read_first",
    "Handler_read_key",
    "Handler_read_last",
    "Handler_read_next",
    "Handler_read_prev",
    "Handler_read_rnd",
    "Handler_read_rnd_next",
)


def _handler_reads(conn: sa.Connection) -> int:
    rows = conn.execute(sa.text("SHOW SESSION STATUS LIKE :name"), {"name": "Handler_read%"})
    return sum(int(value) for name, value in rows if name in HANDLER_READS)


def rows_read(engine: sa.Engine, work: Callable[[sa.Connection], object]) -> int:
    """How many index/table rows MariaDB read while ``work`` ran in one transaction (its
    session's Handler_read_* counters): a measure of cost that does not depend on timing."""
    with engine.connect() as conn:
        before = _handler_reads(conn)
        conn.commit()
        with conn.begin():
            work(conn)
        reads = _handler_reads(conn) - before
        conn.commit()
        return reads
