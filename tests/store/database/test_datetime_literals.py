"""The store's PyMySQL connections write datetimes with a faster literal than PyMySQL's own
(``orbit_store.db._datetime_literal``): it must be the same text, and a value must come
back from MariaDB exactly as it was written (no lost microseconds, no shifted zone)."""

from __future__ import annotations

import datetime as dt

import pytest
import sqlalchemy as sa
from pymysql.converters import escape_datetime

from orbit_store.db import _datetime_literal

VALUES = [
    dt.datetime(2026, 12, 3, 8, 40, 1, 123456),
    dt.datetime(2026, 12, 3, 8, 40, 1),  # no microseconds: PyMySQL leaves the fraction out
    dt.datetime(2026, 1, 2, 3, 4, 5, 6),
    dt.datetime(1, 1, 1),
    dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
    dt.datetime(2026, 12, 3, 8, 40, 1, 5, tzinfo=dt.UTC),
]


@pytest.mark.parametrize("value", VALUES, ids=str)
def test_a_datetime_literal_is_the_text_pymysql_writes(value: dt.datetime) -> None:
    assert _datetime_literal(value) == escape_datetime(value)


@pytest.mark.mariadb_only
def test_a_datetime_written_through_a_store_connection_reads_back_unchanged(
    engine: sa.Engine,
) -> None:
    with engine.connect() as conn:
        encoders = conn.connection.dbapi_connection.encoders  # type: ignore[union-attr]
        assert encoders[dt.datetime] is _datetime_literal, "the store's connections use it"
        for value in VALUES[:3]:
            back = conn.execute(
                sa.text("SELECT CAST(:v AS DATETIME(6))"), {"v": value}
            ).scalar_one()
            assert back == value
