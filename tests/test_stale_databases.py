"""The suite's own housekeeping: databases an interrupted run left behind are dropped at the start
of the next run, by prefix and age, and never one another run is still using."""

from __future__ import annotations

import time
import uuid

import sqlalchemy as sa
from stale_databases import (
    STALE_AFTER_SECONDS,
    drop_stale_databases,
    is_stale,
    new_database_name,
    server_url,
)


def _databases(admin: sa.Engine) -> set[str]:
    with admin.connect() as conn:
        rows = conn.execute(sa.text("SHOW DATABASES LIKE :p"), {"p": "orbit\\_test\\_%"})
        return {row[0] for row in rows}


def test_an_interrupted_runs_databases_are_dropped_and_live_ones_kept() -> None:
    admin = sa.create_engine(server_url().set(database=None))
    now = time.time()
    left_behind = new_database_name(created=now - STALE_AFTER_SECONDS - 60)
    in_use = new_database_name(created=now - 5)
    # An older run's naming (no creation time): its age is its tables' creation time, and one
    # created just now is another run's live database.
    old_style_live = f"orbit_test_{uuid.uuid4().hex[:12]}"
    try:
        with admin.begin() as conn:
            for name in (left_behind, in_use, old_style_live):
                conn.exec_driver_sql(f"CREATE DATABASE `{name}`")
            conn.exec_driver_sql(f"CREATE TABLE `{old_style_live}`.t (id INT)")
        dropped = drop_stale_databases(admin, now=now)
        remaining = _databases(admin)
        assert left_behind in dropped and left_behind not in remaining
        assert in_use in remaining and in_use not in dropped
        assert old_style_live in remaining and old_style_live not in dropped
    finally:
        with admin.begin() as conn:
            for name in (left_behind, in_use, old_style_live):
                conn.exec_driver_sql(f"DROP DATABASE IF EXISTS `{name}`")
        admin.dispose()


def test_a_name_says_when_it_was_made_and_other_names_are_never_stale_by_name() -> None:
    now = time.time()
    assert is_stale(new_database_name(created=now - STALE_AFTER_SECONDS - 1), None, now)
    assert not is_stale(new_database_name(created=now), None, now)
    # a database of another project that happens to share the prefix's first letters
    assert not is_stale("orbit_testing", None, now)
    # old-style name: its tables decide; with no table its age is unknown, so it stays
    assert not is_stale("orbit_test_0123456789ab", None, now)
    assert is_stale("orbit_test_0123456789ab", now - STALE_AFTER_SECONDS - 1, now)
