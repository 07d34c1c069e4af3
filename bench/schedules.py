"""Scheduler throughput: many active every-minute schedules, fired by real scheduler passes.

Creates N every-minute schedules (``create_schedule``, spread over namespaces) in a database of
its own, then runs R scheduler processes — each the server's own loop body
(``orbit.engines.scheduler.scheduler_pass``, its default batch size and threads) every
``--interval`` seconds (the server's default), like R ``orbit server`` replicas — for M minutes of
wall-clock time. Every instant is due at the same second for all N schedules, the worst case.
Then, in the same run, the same work in plain SQL (``bench/raw_schedules.py``: copies of the same
schedules, ``--raw-processes`` processes) for the same M minutes. Reports for both, from the
occurrence rows and the processes' own accounting:

- fire lateness (``recorded_at - scheduled_at`` of FIRED occurrences): p50, p99, max;
- scheduler CPU per decision (user+system time of the scheduler processes / instants decided) and,
  when it can be read from /proc, the database server's CPU per decision over the same window (all
  of mariadbd's CPU: on a shared server it includes everyone else's queries);
- anything not FIRED (nothing, while the replicas keep up: no quota, Allow, default queue);
- the plan MariaDB chooses for the scheduler's scan over the N schedules (``ix_schedules_due``).

Usage: ``.venv/bin/python bench/schedules.py [--schedules 10000] [--minutes 3] [--replicas 1]``
(``--quick``: 1,000 schedules for 1 minute; ``--no-raw``: Orbit only). The database is dropped
afterwards.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import multiprocessing
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import raw_schedules  # the repository root, added above
from bench.e2e import cpu_seconds, mariadb_pid
from bench.raw_sql import connect
from orbit.engines.scheduler import WORKERS, scheduler_pass
from orbit_store.db import create_store_engine, run_transaction
from orbit_store.schedules.declare import create_schedule
from orbit_store.schedules.fire_batch import BATCH
from orbit_store.schedules.model import ScheduleSpec, TaskTemplate
from orbit_store.schema import schedule_occurrences, schedules
from orbit_store.upgrade import migrate

SERVER_URL = "mysql+pymysql://root@127.0.0.1:3306/"
PER_NAMESPACE = 100
SCAN_EXPLAIN = (
    "EXPLAIN SELECT namespace, id FROM schedules WHERE next_fire_at <= UTC_TIMESTAMP(6) "
    "ORDER BY next_fire_at LIMIT 500"
)


def create_database(server_url: str) -> str:
    name = f"orbit_bench_sched_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(make_url(server_url).set(database=None))
    with admin.begin() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    admin.dispose()
    return make_url(server_url).set(database=name).render_as_string(hide_password=False)


def drop_database(url: str) -> None:
    admin = sa.create_engine(make_url(url).set(database=None))
    with admin.begin() as conn:
        conn.exec_driver_sql(f"DROP DATABASE IF EXISTS `{make_url(url).database}`")
    admin.dispose()


def declare_schedules(engine: sa.Engine, count: int) -> None:
    """``count`` every-minute schedules, ``PER_NAMESPACE`` per namespace (one tx each), starting
    tomorrow: nothing comes due while they are being declared."""
    tomorrow = dt.datetime.now(dt.UTC).replace(tzinfo=None) + dt.timedelta(days=1)
    for first in range(0, count, PER_NAMESPACE):
        namespace = f"bench-{first // PER_NAMESPACE:04d}"

        def work(conn: sa.Connection, first: int = first, namespace: str = namespace) -> None:
            for i in range(first, min(first + PER_NAMESPACE, count)):
                spec = ScheduleSpec(
                    name=f"s{i:05d}",
                    cron="* * * * *",
                    task=TaskTemplate(handler="bench.tick"),
                    start_at=tomorrow,
                )
                create_schedule(conn, namespace, spec, actor="bench")

        run_transaction(engine, work)


def replica(url: str, until: float, out: multiprocessing.Queue, args: argparse.Namespace) -> None:  # type: ignore[type-arg]
    """One Orbit scheduler replica: passes every ``interval`` s until ``until`` (wall clock)."""
    logging.disable(logging.WARNING)  # per-fire INFO lines are not what is measured
    engine = create_store_engine(url)  # the server's own pool
    fires = errors = 0
    cpu = time.process_time()
    interval = args.interval
    while time.time() < until:
        report = scheduler_pass(engine, batch=args.batch, workers=args.workers)
        fires += len(report.steps)
        errors += report.errors
        time.sleep(interval)
    out.put((fires, errors, time.process_time() - cpu))
    engine.dispose()


def raw_replica(
    url: str, until: float, out: multiprocessing.Queue, args: argparse.Namespace
) -> None:  # type: ignore[type-arg]
    """One plain-SQL scheduler process (``bench/raw_schedules.py``)."""
    fires, cpu = raw_schedules.raw_scheduler(url, make_url(url).database, until, args.interval)
    out.put((fires, 0, cpu))


def mariadb_cpu_seconds() -> float | None:
    """user+system CPU of the local mariadbd/mysqld, from /proc (None if not found)."""
    pid = mariadb_pid()
    return None if pid is None else cpu_seconds(pid)


def percentile(values: list[float], q: float) -> float:
    return (
        statistics.quantiles(values, n=100, method="inclusive")[q - 1]
        if len(values) > 1
        else values[0]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--server-url", default=os.environ.get("ORBIT_BENCH_SERVER_URL", SERVER_URL)
    )
    parser.add_argument("--schedules", type=int, default=10_000)
    parser.add_argument("--minutes", type=int, default=3)
    parser.add_argument("--replicas", type=int, default=1, help="Orbit scheduler replicas")
    parser.add_argument("--raw-processes", type=int, default=WORKERS)
    parser.add_argument("--no-raw", action="store_true", help="measure Orbit only")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between passes")
    parser.add_argument("--batch", type=int, default=BATCH, help="schedules per transaction")
    parser.add_argument("--workers", type=int, default=WORKERS, help="batches at once")
    parser.add_argument("--quick", action="store_true", help="1,000 schedules for 1 minute")
    args = parser.parse_args()
    if args.quick:
        args.schedules, args.minutes = 1_000, 1

    url = create_database(args.server_url)
    engine = create_store_engine(url)
    try:
        migrate.upgrade(engine)
        started = time.time()
        declare_schedules(engine, args.schedules)
        print(f"declared {args.schedules} every-minute schedules in {time.time() - started:.1f}s")
        print("the machine is shared: other engineers' work runs beside this measurement")
        begin = next_minute()
        first_instant = dt.datetime.fromtimestamp(begin, dt.UTC).replace(tzinfo=None)
        with engine.begin() as conn:
            conn.execute(schedules.update().values(next_fire_at=first_instant, start_at=None))
        run = measure(replica, url, args, begin, args.replicas)
        report(engine, args, "Orbit", begin, *run, table=schedule_occurrences)
        if not args.no_raw:
            begin = next_minute()
            raw = connect(url, make_url(url).database)
            first_instant = dt.datetime.fromtimestamp(begin, dt.UTC).replace(tzinfo=None)
            raw_schedules.make_tables(raw, first_instant)
            raw.close()
            run = measure(raw_replica, url, args, begin, args.raw_processes)
            raw_table = sa.Table("raw_schedule_occurrences", sa.MetaData(), autoload_with=engine)
            report(engine, args, "raw SQL", begin, *run, table=raw_table)
        with engine.connect() as conn:
            plan = conn.exec_driver_sql(SCAN_EXPLAIN).mappings().one()
        print(f"scan plan: key={plan['key']} type={plan['type']} rows={plan['rows']}")
    finally:
        engine.dispose()
        drop_database(url)


def next_minute() -> float:
    """The next minute boundary at least 15 s away: every schedule's first instant (the worst
    case: all due in the same second)."""
    now = time.time() + 15
    return now - now % 60 + 60


def measure(
    target: object, url: str, args: argparse.Namespace, begin: float, processes: int
) -> tuple[list[tuple[int, int, float]], float | None]:
    """Run ``processes`` of ``target`` over M whole minutes of instants from ``begin``; their
    (fires, errors, CPU) and the database server's CPU meanwhile."""
    until = begin + 60 * args.minutes - 1
    time.sleep(max(begin - 2 - time.time(), 0))
    db_cpu = mariadb_cpu_seconds()
    ctx = multiprocessing.get_context("spawn")
    results: multiprocessing.Queue = ctx.Queue()  # type: ignore[type-arg]
    procs = [
        ctx.Process(target=target, args=(url, until + 30, results, args))  # type: ignore[arg-type]
        for _ in range(processes)
    ]
    for p in procs:
        p.start()
    outcomes = [results.get() for _ in procs]
    for p in procs:
        p.join()
    return outcomes, None if db_cpu is None else (mariadb_cpu_seconds() or 0.0) - db_cpu


def report(
    engine: sa.Engine,
    args: argparse.Namespace,
    label: str,
    begin: float,
    outcomes: list[tuple[int, int, float]],
    db_cpu: float | None,
    *,
    table: sa.Table,
) -> None:
    first = dt.datetime.fromtimestamp(begin, dt.UTC).replace(tzinfo=None)
    last = first + dt.timedelta(minutes=args.minutes - 1)
    with engine.connect() as conn:
        rows = conn.execute(
            sa.select(
                table.c.status, table.c.scheduled_at, table.c.recorded_at, table.c.instants
            ).where(table.c.scheduled_at >= first, table.c.scheduled_at <= last)
        ).all()
    fired = [r for r in rows if r.status == "FIRED"]
    lateness = sorted((r.recorded_at - r.scheduled_at).total_seconds() for r in fired)
    fires = sum(o[0] for o in outcomes)
    cpu = sum(o[2] for o in outcomes)
    expected = args.schedules * args.minutes
    print(
        f"--- {label}: {len(outcomes)} processes, pass interval {args.interval:g}s, "
        f"batch {args.batch}, {args.workers} batches at once per Orbit replica"
    )
    missed = sum(r.instants for r in rows if r.status != "FIRED")
    print(
        f"instants {first:%H:%M}..{last:%H:%M}Z: {len(fired)} fired of {expected}, "
        f"{missed} missed or skipped, {sum(o[1] for o in outcomes)} loop errors"
    )
    if lateness:
        p50, p99 = percentile(lateness, 50), percentile(lateness, 99)
        print(f"fire lateness: p50 {p50:.2f}s  p99 {p99:.2f}s  max {lateness[-1]:.2f}s")
    print(
        f"scheduler CPU: {cpu:.1f}s for {fires} decisions (fired, skipped or missed) = "
        f"{1000 * cpu / max(fires, 1):.2f} ms each"
    )
    if db_cpu is not None:
        print(f"database CPU: {db_cpu:.1f}s = {1000 * db_cpu / max(fires, 1):.2f} ms per decision")


if __name__ == "__main__":
    main()
