"""Server replicas' liveness: when each `orbit server` process began serving and when it was
last seen serving. The reaper reads it to tell a worker that stopped renewing from an outage of
every replica, which must not be charged to the workers (``orbit_store.pulse.state.outages``)."""

from __future__ import annotations

import sqlalchemy as sa

from .base import metadata
from .types import KEY_LENGTH, UtcDateTime

server_replicas = sa.Table(
    "server_replicas",
    metadata,
    # A random id per process start: a restarted replica is a new row, so its gap shows.
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("host", sa.String(KEY_LENGTH), nullable=False),
    sa.Column("pid", sa.Integer(), nullable=False),
    # Database time when the replica began serving (its engine loops start after this).
    sa.Column("started_at", UtcDateTime, nullable=False),
    # Database time of its latest liveness beat; it served without a gap up to here.
    sa.Column("last_seen_at", UtcDateTime, nullable=False),
    sa.Index("ix_server_replicas_last_seen", "last_seen_at"),
)
