"""How long Orbit's database connections wait (no SQLAlchemy here: the CLI reads these to show
its defaults without loading the store).

Every MySQL/MariaDB connect, read and write is bounded by :data:`IO_TIMEOUT_SECONDS`: a
half-open connection (a failover, a proxy that stopped forwarding) fails its transaction, which
runs again on a new connection, instead of holding it — and every request waiting behind it —
for as long as the kernel keeps the socket. The bound sits between the two waits it must not
cut short or outlast (docs/operations/database.md):

- longer than a lock wait (``innodb_lock_wait_timeout``, :func:`lock_wait_seconds`), which a
  statement may legitimately spend: it must end as a lock-wait error (retried), not as a lost
  connection;
- shorter than a lease (30 s by default), so a stuck call ends while the leases it serves
  still hold.
"""

from __future__ import annotations

#: Seconds one database read or write (and a connect) may take before the connection is taken
#: as lost. ``orbit server --database-timeout`` changes it; migrations run without it.
IO_TIMEOUT_SECONDS = 20.0
#: ``innodb_lock_wait_timeout`` of Orbit's connections, when the I/O timeout allows it.
LOCK_WAIT_SECONDS = 10


def lock_wait_seconds(io_timeout: float | None) -> int:
    """The lock wait of a connection with ``io_timeout``: :data:`LOCK_WAIT_SECONDS`, or half the
    I/O timeout when that is shorter (at least a second)."""
    if io_timeout is None:
        return LOCK_WAIT_SECONDS
    return max(1, min(LOCK_WAIT_SECONDS, int(io_timeout // 2)))
