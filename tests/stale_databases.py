"""Databases the suite creates are named ``orbit_test_<unix seconds>_<random>``, so a later run can
tell one an interrupted run left behind (old) from one another run is using now (recent).

Names from before this scheme (``orbit_test_<random>``) carry no time: their tables' creation
time stands for their age, and one without tables is left alone (it cannot be dated).
"""

from __future__ import annotations

import os
import re
import time
import uuid

import sqlalchemy as sa
from sqlalchemy.engine import make_url

DEFAULT_SERVER_URL = "mysql+pymysql://root@127.0.0.1:3306/"
PREFIX = "orbit_test_"
#: Older than this, a database is an interrupted run's: no run of the suite (the chaos harness's
#: long form included) lasts nearly as long.
STALE_AFTER_SECONDS = 6 * 3600

_TIMED = re.compile(r"^orbit_test_(\d{10})_[0-9a-f]{8}$")
_UNTIMED = re.compile(r"^orbit_test_[0-9a-f]{12}$")


def server_url() -> sa.URL:
    """The test server (ORBIT_TEST_DATABASE_URL, or MariaDB on loopback), without a database."""
    return make_url(os.environ.get("ORBIT_TEST_DATABASE_URL", DEFAULT_SERVER_URL))


def new_database_name(created: float | None = None) -> str:
    stamp = int(time.time() if created is None else created)
    return f"{PREFIX}{stamp:010d}_{uuid.uuid4().hex[:8]}"


def is_stale(name: str, newest_table: float | None, now: float) -> bool:
    """``newest_table``: when the database's newest table was created (epoch seconds), if any."""
    timed = _TIMED.match(name)
    if timed:
        return now - int(timed.group(1)) > STALE_AFTER_SECONDS
    if _UNTIMED.match(name) and newest_table is not None:
        return now - newest_table > STALE_AFTER_SECONDS
    return False


def drop_stale_databases(admin: sa.Engine, now: float | None = None) -> list[str]:
    """Drop this suite's stale databases on ``admin``'s server; the names dropped."""
    now = time.time() if now is None else now
    with admin.connect() as conn:
        names = [
            row[0]
            for row in conn.execute(
                sa.text(
                    "SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE :p"
                ),
                {"p": PREFIX.replace("_", r"\_") + "%"},
            )
        ]
        # Table times are in the server's time zone; UNIX_TIMESTAMP reads them in that zone too.
        newest = dict(
            conn.execute(
                sa.text(
                    "SELECT table_schema, UNIX_TIMESTAMP(MAX(create_time)) "
                    "FROM information_schema.tables WHERE table_schema LIKE :p "
                    "GROUP BY table_schema"
                ),
                {"p": PREFIX.replace("_", r"\_") + "%"},
            ).all()
        )
    dropped = []
    for name in names:
        created = newest.get(name)
        if not is_stale(name, None if created is None else float(created), now):
            continue
        try:  # one that cannot be dropped (gone meanwhile, no privilege) never stops the rest
            with admin.begin() as conn:
                conn.exec_driver_sql(f"DROP DATABASE IF EXISTS `{name}`")
        except sa.exc.DBAPIError:
            continue
        dropped.append(name)
    return dropped
