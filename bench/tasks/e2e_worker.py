"""The no-op worker bench/tasks/e2e.py runs as `orbit worker bench.tasks.e2e_worker:worker`
subprocesses: the SDK's default settings; the bench passes ``--concurrency``."""

from __future__ import annotations

import os
from typing import Any

from orbit_sdk import Worker

worker = Worker(namespace=os.environ["ORBIT_NAMESPACE"], name=os.environ.get("BENCH_WORKER_NAME"))


@worker.handler("bench.noop")
def noop(ctx: Any, params: Any) -> Any:
    return None
