"""Server replicas' liveness in MySQL, so that every replica agrees when Orbit was serving.

Each `orbit server` inserts a row when it begins serving and beats ``last_seen_at`` every
``BEAT_SECONDS`` (database time). Merged, the rows give the stretches of time in which at least
one replica served; a stretch ends when no replica was seen for ``SILENCE_SECONDS``. The reaper
asks for the :class:`ServingWindow` — when the current stretch began and when the one before it
ended — to tell a worker that stopped renewing (its lease lapses) from an outage of every
replica, which no worker could renew through (``orbit_store.pulse.state.outages``).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import sqlalchemy as sa

from orbit_store.clock import db_now
from orbit_store.schema import server_replicas

#: How often a replica records that it is serving.
BEAT_SECONDS = 0.5
#: Silence after which a replica no longer counts as serving: four missed beats. Erring short
#: is cheap (a dead worker's lease is lapsed ``lease_seconds`` later than it could have been);
#: erring long is not: a database outage shorter than this records no gap, yet a lease renewed
#: a heartbeat (a third of the lease) before it began runs out inside it once it lasts two
#: thirds of the lease — 2 s for a 3 s lease, which a MariaDB crash recovery on a loaded
#: machine reaches. Such a lease would lapse although nobody could have renewed it.
SILENCE_SECONDS = 2.0
#: Rows of replicas gone this long are deleted when a replica starts (each start adds a row).
KEEP_DAYS = 7


@dataclass(frozen=True)
class ServingWindow:
    """The current stretch of service. ``resumed_at``: when it began (a replica started
    serving after no replica had been seen for ``SILENCE_SECONDS``). ``gap_began_at``: when the
    previous stretch ended (its last beat), or None when no earlier stretch is recorded."""

    resumed_at: dt.datetime
    gap_began_at: dt.datetime | None


def record_start(conn: sa.Connection, *, replica_id: str, host: str, pid: int) -> dt.datetime:
    """Record that this replica begins serving now (database time); returns that time. Also
    forgets replicas gone for ``KEEP_DAYS``: rows are only added here, so this bounds the table
    without a delete on every beat."""
    now = db_now(conn)
    conn.execute(
        server_replicas.delete().where(
            server_replicas.c.last_seen_at < now - dt.timedelta(days=KEEP_DAYS)
        )
    )
    conn.execute(
        server_replicas.insert().values(
            id=replica_id, host=host[:255], pid=pid, started_at=now, last_seen_at=now
        )
    )
    return now


def beat(conn: sa.Connection, *, replica_id: str) -> bool:
    """This replica is still serving. False when it had been silent for ``SILENCE_SECONDS``
    (a stall, or the database was down): its stretch ended, and the caller records a new start
    (a new row) so that the gap shows."""
    now = db_now(conn)
    updated = conn.execute(
        server_replicas.update()
        .where(
            server_replicas.c.id == replica_id,
            server_replicas.c.last_seen_at >= now - dt.timedelta(seconds=SILENCE_SECONDS),
        )
        .values(last_seen_at=now)
    )
    return bool(updated.rowcount == 1)


def serving_window(conn: sa.Connection, now: dt.datetime | None = None) -> ServingWindow | None:
    """The current stretch of service, or None when no replica is serving now (e.g. the store
    is used by a test or a CLI command without a server): then nothing is an outage."""
    now = db_now(conn) if now is None else now
    rows = conn.execute(
        sa.select(server_replicas.c.started_at, server_replicas.c.last_seen_at).order_by(
            server_replicas.c.started_at
        )
    ).all()
    silence = dt.timedelta(seconds=SILENCE_SECONDS)
    stretches: list[tuple[dt.datetime, dt.datetime]] = []  # (began, last seen)
    for started_at, last_seen_at in rows:
        if stretches and started_at <= stretches[-1][1] + silence:
            began, seen = stretches[-1]
            stretches[-1] = (began, max(seen, last_seen_at))
        else:
            stretches.append((started_at, last_seen_at))
    if not stretches or stretches[-1][1] + silence < now:
        return None
    previous = stretches[-2][1] if len(stretches) > 1 else None
    return ServingWindow(resumed_at=stretches[-1][0], gap_began_at=previous)
