"""The no-op worker bench/e2e.py runs as `orbit worker bench.e2e_worker:worker` subprocesses."""

from __future__ import annotations

import os
from typing import Any

from orbit_sdk import Worker

worker = Worker(
    namespace=os.environ["ORBIT_NAMESPACE"],
    queues=["default"],
    concurrency=int(os.environ["BENCH_CONCURRENCY"]),
    name=os.environ.get("BENCH_WORKER_NAME"),
    lease_wait_seconds=5,
    drain_timeout=10,
    lease_with_start=os.environ.get("BENCH_LEASE_WITH_START", "1") == "1",
    lease_linger=float(os.environ.get("BENCH_LEASE_LINGER", "0.01")),
)


@worker.handler("bench.noop")
def noop(ctx: Any, params: Any) -> Any:
    return None
