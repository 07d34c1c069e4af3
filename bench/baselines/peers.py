"""pgqueuer and procrastinate on durable PostgreSQL, measured the way ``bench/tasks/e2e.py``
measures Orbit: N no-op jobs submitted (one by one, or in one bulk call), then drained by 2 worker
processes; ``e2e = N / (submit time + drain time)``. ``bench/tasks/e2e.py --peers`` runs these
cells in the same run as Orbit's, alternating; run alone for the peers only.

PostgreSQL is used as configured (``synchronous_commit`` and ``fsync`` are printed: "durable"
means both on); pgqueuer installs its tables with its default durability (logged). Each cell
starts from an empty schema of its own, made and dropped here.

Usage: ``.venv/bin/python bench/baselines/peers.py [--tasks 5000] [--peers pgqueuer procrastinate]``
(needs ``pip install pgqueuer asyncpg procrastinate 'psycopg[binary]'``; not project
dependencies).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import time
from typing import Any

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"
SCHEMA = "orbit_bench_peers"
WORKERS = 2
#: pgqueuer's dequeue batch (its default) and procrastinate's per-process concurrency.
PGQ_BATCH = 10
PROCRASTINATE_CONCURRENCY = 10


async def _pg(dsn: str) -> Any:
    import asyncpg

    conn = await asyncpg.connect(dsn)
    await conn.execute(f"SET search_path TO {SCHEMA}")
    return conn


async def _reset_schema(dsn: str) -> dict[str, str]:
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
        await conn.execute(f"CREATE SCHEMA {SCHEMA}")
        names = ("synchronous_commit", "fsync", "server_version")
        return {name: await conn.fetchval(f"SHOW {name}") for name in names}
    finally:
        await conn.close()


def settings(dsn: str) -> dict[str, str]:
    """PostgreSQL's durability settings (and version), with the bench's schema made afresh."""
    return asyncio.run(_reset_schema(dsn))


# --- pgqueuer ---------------------------------------------------------------------------------
def _pgq_dsn(dsn: str) -> str:
    return dsn


async def _pgq_install(dsn: str) -> None:
    from pgqueuer import AsyncpgDriver, Queries

    await _reset_schema(dsn)
    conn = await _pg(dsn)
    try:
        await Queries(AsyncpgDriver(conn)).install()
    finally:
        await conn.close()


async def _pgq_submit(dsn: str, n: int, bulk: bool) -> float:
    from pgqueuer import AsyncpgDriver, Queries

    conn = await _pg(dsn)
    try:
        queries = Queries(AsyncpgDriver(conn))
        began = time.perf_counter()
        if bulk:
            payloads: list[bytes | None] = [str(i).encode() for i in range(n)]
            await queries.enqueue(["noop"] * n, payloads, [0] * n)
        else:
            for i in range(n):
                await queries.enqueue("noop", str(i).encode())
        return time.perf_counter() - began
    finally:
        await conn.close()


async def _pgq_work(dsn: str, start_at: float) -> float:
    from pgqueuer import AsyncpgDriver, Queries, QueueManager
    from pgqueuer.types import QueueExecutionMode

    conn = await _pg(dsn)
    try:
        qm = QueueManager(Queries(AsyncpgDriver(conn)))

        @qm.entrypoint("noop")
        async def noop(job: Any) -> None:
            return None

        await asyncio.sleep(max(start_at - time.time(), 0))
        await qm.run(batch_size=PGQ_BATCH, mode=QueueExecutionMode.drain)
        return time.time()
    finally:
        await conn.close()


def pgq_worker(dsn: str, start_at: float) -> float:
    return asyncio.run(_pgq_work(dsn, start_at))


# --- procrastinate ----------------------------------------------------------------------------
def _procrastinate_app(dsn: str) -> Any:
    import procrastinate

    connector = procrastinate.PsycopgConnector(
        conninfo=dsn, kwargs={"options": f"-c search_path={SCHEMA}"}, min_size=1, max_size=4
    )
    app = procrastinate.App(connector=connector)

    @app.task(name="noop")
    async def noop(i: int) -> None:
        return None

    return app


async def _procrastinate_install(dsn: str) -> None:
    await _reset_schema(dsn)
    app = _procrastinate_app(dsn)
    async with app.open_async():
        await app.schema_manager.apply_schema_async()


async def _procrastinate_submit(dsn: str, n: int, bulk: bool) -> float:
    app = _procrastinate_app(dsn)
    async with app.open_async():
        task = app.tasks["noop"]
        began = time.perf_counter()
        if bulk:
            await task.batch_defer_async(*({"i": i} for i in range(n)))
        else:
            for i in range(n):
                await task.defer_async(i=i)
        return time.perf_counter() - began


async def _procrastinate_work(dsn: str, start_at: float) -> float:
    app = _procrastinate_app(dsn)
    async with app.open_async():
        await asyncio.sleep(max(start_at - time.time(), 0))
        await app.run_worker_async(
            concurrency=PROCRASTINATE_CONCURRENCY, wait=False, install_signal_handlers=False
        )
        return time.time()


def procrastinate_worker(dsn: str, start_at: float) -> float:
    return asyncio.run(_procrastinate_work(dsn, start_at))


PEERS = {
    "pgqueuer": (_pgq_install, _pgq_submit, pgq_worker),
    "procrastinate": (_procrastinate_install, _procrastinate_submit, procrastinate_worker),
}


def peer_cell(pool: Any, dsn: str, peer: str, n: int, bulk: bool) -> dict[str, float]:
    """One cell: install afresh, submit ``n`` (one by one from one process, or one bulk call),
    drain with ``WORKERS`` processes started together; rates per second."""
    install, submit, worker = PEERS[peer]
    asyncio.run(install(dsn))
    submit_s = asyncio.run(submit(dsn, n, bulk))
    start_at = time.time() + 1.0
    ends = pool.starmap(worker, [(dsn, start_at)] * WORKERS, chunksize=1)
    drain_s = max(ends) - start_at
    return {"submit": n / submit_s, "drain": n / drain_s, "e2e": n / (submit_s + drain_s)}


def describe(peer: str, bulk: bool, cell: dict[str, float]) -> str:
    how = "bulk" if bulk else "one by one"
    return (
        f"  {peer:13} submit {how:10}: submit {cell['submit']:7,.0f}/s, drain "
        f"{cell['drain']:6,.0f}/s, e2e {cell['e2e']:6,.0f}/s; load {os.getloadavg()[0]:.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument("--tasks", type=int, default=5000)
    parser.add_argument("--peers", nargs="+", default=sorted(PEERS), choices=sorted(PEERS))
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    print(f"PostgreSQL: {settings(args.dsn)}; {os.cpu_count()} CPUs; load {os.getloadavg()}")
    with multiprocessing.get_context("spawn").Pool(WORKERS) as pool:
        for _ in range(args.rounds):
            for peer in args.peers:
                for bulk in (False, True):
                    print(describe(peer, bulk, peer_cell(pool, args.dsn, peer, args.tasks, bulk)))
    asyncio.run(_reset_schema(args.dsn))


if __name__ == "__main__":
    main()
