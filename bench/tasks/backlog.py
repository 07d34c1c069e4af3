"""Claim latency against the size and shape of the WAITING backlog.

For each backlog size (10k and 1M WAITING rows by default) and each mix, a fresh namespace is
bulk-loaded with INSERT … SELECT (rows shaped like ``submit_task`` writes, on their wait path):

- ``ready``: every row is READY;
- ``blocked``: 90% of the rows are blocked (a saturated concurrency key, a closed gate) or due
  in the future, all of them with a *better* priority than the 10% that can run — the shape that
  stalled claims before (head-of-line blocking).

Then one worker session claims one task per transaction, ``--claims`` times (after a warm-up),
through ``claim_tasks`` + ``run_transaction`` exactly as the server does, and the script prints
p50/p99 of the claim transaction and the rows MariaDB read per claim (Handler_read_*), and the
ratio 1M/10k for each mix (near 1: the claim's cost does not grow with the backlog).

Usage: ``.venv/bin/python bench/tasks/backlog.py [--sizes 10000 1000000] [--claims 300]``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import statistics
import time
import uuid

import sqlalchemy as sa
from sqlalchemy.engine import make_url

from orbit_store.clock import db_now
from orbit_store.db import create_store_engine, run_transaction
from orbit_store.pulse.claim.claim import claim_tasks
from orbit_store.pulse.limits.gates import create_gate, set_gate
from orbit_store.pulse.submit.accept import SubmitRequest, submit_task
from orbit_store.pulse.workers.sessions import register_session
from orbit_store.upgrade import migrate

DEFAULT_SERVER = "mysql+pymysql://root@127.0.0.1:3306/"
QUEUE = "default"
WARM_UP = 30
HANDLER_READS = "Handler_read%"

#: Every NOT NULL column of tasks, as submit_task fills it from the default queue policy.
INSERT = """
INSERT INTO tasks (id, namespace, queue, handler, params, state, wait_path, state_version,
  quota_counted, priority, available_at, created_at, updated_at, max_attempts, attempts_used,
  backoff_initial_ms, backoff_max_ms, backoff_multiplier, lease_seconds, safety, concurrency_key,
  concurrency_limit, cancel_requested, gate_id)
SELECT CONCAT(:prefix, LPAD(n, 12, '0')), :ns, 'default', 'bench.noop', '{}', 'WAITING', :path, 1,
  0, :priority, :available_at, :now, :now, 3, 0, 1000, 300000, 2.0, 3600, 'safe', :key, 1, 0, :gate
FROM numbers WHERE n < :count
"""


def numbers(conn: sa.Connection, upto: int) -> None:
    """A scratch table of 0..upto-1, built by doubling (INSERT … SELECT)."""
    conn.exec_driver_sql("CREATE TABLE IF NOT EXISTS numbers (n INT PRIMARY KEY)")
    have = conn.exec_driver_sql("SELECT COUNT(*) FROM numbers").scalar_one()
    if have == 0:
        conn.exec_driver_sql("INSERT INTO numbers VALUES (0)")
        have = 1
    while have < upto:
        conn.execute(
            sa.text("INSERT INTO numbers SELECT n + :have FROM numbers WHERE n + :have < :upto"),
            {"have": have, "upto": upto},
        )
        have = min(have * 2, upto)


def load(engine: sa.Engine, size: int, mix: str) -> str:
    """A namespace with ``size`` WAITING tasks of ``mix``; returns its name."""
    ns = f"bl-{mix}-{size}-{uuid.uuid4().hex[:6]}"
    seed = SubmitRequest(namespace=ns, queue=QUEUE, handler="bench.noop", concurrency_key="hot")
    with engine.begin() as conn:  # the namespace, the saturated key (one permit held), a gate
        submit_task(conn, seed)
        now = db_now(conn)
        gate = create_gate(conn, namespace=ns, owner_kind="bench", owner_id=ns, now=now)
    with engine.begin() as conn:
        set_gate(conn, namespace=ns, gate_id=gate, allowed=False)
    shares = {"ready": [("READY", size)]}.get(
        mix,
        [
            ("READY", size // 10),
            ("BLOCKED_KEY", size * 3 // 10),
            ("BLOCKED_GATE", size * 3 // 10),
            ("SCHEDULED", size - size // 10 - 2 * (size * 3 // 10)),
        ],
    )
    for n, (path, count) in enumerate(shares):
        with engine.begin() as conn:
            conn.execute(
                sa.text(INSERT),
                {
                    "prefix": f"{uuid.uuid4().hex[:8]}-{n}-b-",
                    "ns": ns,
                    "path": path,
                    "priority": 5 if path == "READY" else 0,  # the blocked ones come first
                    "available_at": now + dt.timedelta(days=1 if path == "SCHEDULED" else 0),
                    "now": now,
                    "key": "hot" if path == "BLOCKED_KEY" else None,
                    "gate": gate if path == "BLOCKED_GATE" else None,
                    "count": count,
                },
            )
    return ns


def reads(conn: sa.Connection) -> int:
    rows = conn.execute(sa.text("SHOW SESSION STATUS LIKE :n"), {"n": HANDLER_READS})
    return sum(int(v) for k, v in rows if k != "Handler_read_retry")


def measure(engine: sa.Engine, ns: str, claims: int) -> tuple[float, float, float]:
    """p50 and p99 (ms) of one-task claim transactions, and the rows read per claim."""
    session = run_transaction(
        engine,
        functools.partial(register_session, namespace=ns, worker_name="bench", queues=[QUEUE]),
    )
    claim = functools.partial(
        claim_tasks, namespace=ns, queues_=None, limit=1, worker_session_id=session.id
    )
    took, rows = [], []
    with engine.connect() as conn:
        for n in range(WARM_UP + claims):
            before = reads(conn)
            conn.commit()
            began = time.perf_counter()
            with conn.begin():
                granted = claim(conn)
            elapsed = time.perf_counter() - began
            assert granted, "the backlog ran out of READY tasks"
            if n >= WARM_UP:
                took.append(elapsed * 1000)
                rows.append(reads(conn) - before)
            conn.commit()
    took.sort()
    return statistics.median(took), took[int(len(took) * 0.99) - 1], statistics.mean(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", default=DEFAULT_SERVER, help="MariaDB/MySQL server URL")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 1_000_000])
    parser.add_argument("--claims", type=int, default=300, help="measured claims per cell")
    args = parser.parse_args()
    if WARM_UP + args.claims > min(args.sizes) // 10:
        parser.error(f"--claims: at most {min(args.sizes) // 10 - WARM_UP} (the 10% READY rows)")
    database = f"orbit_backlog_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(make_url(args.server))
    with admin.begin() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE `{database}`")
    engine = create_store_engine(
        make_url(args.server).set(database=database).render_as_string(False)
    )
    try:
        migrate.upgrade(engine)
        with engine.begin() as conn:
            numbers(conn, max(args.sizes))
        results: dict[tuple[str, int], tuple[float, float, float]] = {}
        head = ("mix", "WAITING rows", "load s", "p50 ms", "p99 ms", "rows/claim")
        print(f"{head[0]:<8} " + " ".join(f"{h:>{max(len(h), 7)}}" for h in head[1:]))
        for mix in ("ready", "blocked"):
            for size in args.sizes:
                began = time.perf_counter()
                ns = load(engine, size, mix)
                loaded = time.perf_counter() - began
                results[(mix, size)] = measure(engine, ns, args.claims)
                p50, p99, rows = results[(mix, size)]
                print(f"{mix:<8} {size:>12,} {loaded:>7.1f} {p50:>7.2f} {p99:>7.2f} {rows:>10.1f}")
        small, large = min(args.sizes), max(args.sizes)
        for mix in ("ready", "blocked"):
            p50_ratio = results[(mix, large)][0] / results[(mix, small)][0]
            p99_ratio = results[(mix, large)][1] / results[(mix, small)][1]
            print(
                f"{mix}: {large:,}/{small:,} p50 ratio {p50_ratio:.2f}, p99 ratio {p99_ratio:.2f}"
            )
    finally:
        engine.dispose()
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS `{database}`")
        admin.dispose()


if __name__ == "__main__":
    main()
