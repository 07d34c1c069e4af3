"""One-by-one ``Client.submit`` calls from 8 threads sharing one ``Client``, by ``submit_linger``
(the SDK's coalescing of concurrent submissions; ``off`` = ``None``, each submission its own
request): submissions per second, the client's and the server's CPU per submission, and how many
submissions a request carried — against a real `orbit server` with its defaults. Values are
alternated round by round, so a machine whose speed drifts hits each alike; medians printed.

Usage: ``.venv/bin/python bench/tasks/submit_linger.py [--tasks 2000] [--lingers off 0 0.001 0.005]
[--rounds 3]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import e2e

from orbit_sdk import Client

DEFAULT_URL = "mysql://root@127.0.0.1:3306/orbit_bench_linger"


def one(bench: e2e.Orbit, server: object, base: str, linger: str, n: int) -> dict[str, float]:
    namespace, token = bench.tenant("linger")
    value = None if linger == "off" else float(linger)
    server_cpu = e2e.cpu_seconds(server.pid)  # type: ignore[attr-defined]
    with Client(base, token=token, timeout=60, submit_linger=value) as client:
        cpu, began = time.process_time(), time.perf_counter()
        with ThreadPoolExecutor(e2e.THREADS) as threads:
            work = lambda i: client.submit(namespace, handler=e2e.HANDLER, params={"i": i})  # noqa: E731
            list(threads.map(work, range(n)))
        wall, cpu = time.perf_counter() - began, time.process_time() - cpu
    server_cpu = e2e.cpu_seconds(server.pid) - server_cpu  # type: ignore[attr-defined]
    per_request = bench.query(
        "SELECT COUNT(*) / COUNT(DISTINCT created_at) FROM tasks WHERE namespace = %s", namespace
    )[0][0]
    return {
        "rate": n / wall,
        "client": 1000 * cpu / n,
        "server": 1000 * server_cpu / n,
        "together": float(per_request),
        "load": e2e.load(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=DEFAULT_URL)
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--lingers", nargs="+", default=["off", "0", "0.001", "0.005"])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    name = args.database_url.rsplit("/", 1)[1]
    e2e.server_sql(args.database_url, f"DROP DATABASE IF EXISTS `{name}`")
    e2e.server_sql(args.database_url, f"CREATE DATABASE `{name}`")
    bench_args = argparse.Namespace(database_url=args.database_url, slots_per_worker=8)
    bench = e2e.Orbit(bench_args, Path(tempfile.mkdtemp(prefix="orbit-bench-linger-")))
    try:
        bench.cli("admin", "migrate")
        server, base = bench.server("server.log")
        runs: dict[str, list[dict[str, float]]] = {}
        for _ in range(args.rounds):
            for linger in args.lingers:
                run = one(bench, server, base, linger, args.tasks)
                runs.setdefault(linger, []).append(run)
                print(
                    f"  submit_linger={linger:6} {run['rate']:6,.0f} submits/s, client CPU "
                    f"{run['client']:.3f} ms, server CPU {run['server']:.3f} ms per submit, "
                    f"~{run['together']:.1f} per commit (load {run['load']:.1f})",
                    flush=True,
                )
        print("medians:")
        for linger, cells in runs.items():
            med = {k: statistics.median(c[k] for c in cells) for k in cells[0]}
            print(
                f"  submit_linger={linger:6} {med['rate']:6,.0f} submits/s, client CPU "
                f"{med['client']:.3f} ms, server CPU {med['server']:.3f} ms per submit, "
                f"~{med['together']:.1f} per commit (load {med['load']:.1f})"
            )
    finally:
        bench.stop(bench.procs)
        bench.db.close()
        e2e.server_sql(args.database_url, f"DROP DATABASE IF EXISTS `{name}`")


if __name__ == "__main__":
    main()
