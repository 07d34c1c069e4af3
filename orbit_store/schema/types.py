"""Column types and small column factories shared by every table.

All instants are UTC, stored as naive ``DATETIME(6)`` on MySQL/MariaDB (microseconds, no implicit
time-zone conversion) and as ISO text on SQLite. Identifiers exposed to users are UUIDv7 strings
(time-ordered, unique beyond one database) so a namespace can move between shards.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

#: UTC instant with microsecond precision.
UtcDateTime = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")

#: JSON document (params, results, specs). MariaDB stores it as LONGTEXT with a JSON_VALID check.
Json = sa.JSON()

ID_LENGTH = 36
NAME_LENGTH = 63  # a Kubernetes namespace / DNS label
KEY_LENGTH = 255


def id_column(name: str = "id", **kwargs: Any) -> sa.Column[str]:
    """A UUIDv7 identifier column (primary key unless told otherwise)."""
    kwargs.setdefault("primary_key", True)
    return sa.Column(name, sa.String(ID_LENGTH), **kwargs)


def ref_column(name: str, *fk: Any, nullable: bool = False, **kwargs: Any) -> sa.Column[str]:
    """A column holding another row's UUIDv7 identifier."""
    return sa.Column(name, sa.String(ID_LENGTH), *fk, nullable=nullable, **kwargs)


def namespace_column() -> sa.Column[str]:
    """The routing unit (seed §4): every row belongs to exactly one namespace."""
    return sa.Column("namespace", sa.String(NAME_LENGTH), nullable=False)


def created_at_column() -> sa.Column[Any]:
    return sa.Column("created_at", UtcDateTime, nullable=False)


def updated_at_column() -> sa.Column[Any]:
    return sa.Column("updated_at", UtcDateTime, nullable=False)


def state_check(column: str, values: tuple[str, ...], name: str) -> sa.CheckConstraint:
    """A CHECK constraint that keeps an enum-like short-string column within ``values``."""
    quoted = ", ".join(f"'{v}'" for v in values)
    return sa.CheckConstraint(f"{column} IN ({quoted})", name=name)
