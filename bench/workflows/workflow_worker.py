"""The no-op worker bench/workflows/workflows.py runs as
`orbit worker bench.workflows.workflow_worker:worker`."""

from __future__ import annotations

import os
from typing import Any

from orbit_sdk import Worker

worker = Worker(
    namespace=os.environ["ORBIT_NAMESPACE"],
    queues=["default"],
    concurrency=int(os.environ["BENCH_CONCURRENCY"]),
    lease_wait_seconds=5,
    drain_timeout=10,
)


@worker.handler("bench.step")
def step(ctx: Any, params: Any) -> Any:
    return {"step": params["step"]}
