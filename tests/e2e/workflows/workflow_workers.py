"""The worker of the workflow crash test
(`orbit worker tests.e2e.workflows.workflow_workers:worker`): quick, safe handlers for a
five-step workflow with a parallel branch, a wait and a poll."""

from __future__ import annotations

import os
from typing import Any

from orbit_sdk import Worker

worker = Worker(
    namespace=os.environ["ORBIT_NAMESPACE"],
    queues=["default"],
    concurrency=int(os.environ.get("ORBIT_E2E_CONCURRENCY", "16")),
    lease_wait_seconds=2,
)


@worker.handler("crash.prepare")
def prepare(ctx: Any, params: Any) -> Any:
    return {"n": params["n"]}


@worker.handler("crash.left")
def left(ctx: Any, params: Any) -> Any:
    return {"left": params["n"] * 2}


@worker.handler("crash.right")
def right(ctx: Any, params: Any) -> Any:
    return {"right": params["n"] * 3}


@worker.handler("crash.check")
def check(ctx: Any, params: Any) -> Any:
    """A poll round: done from the second round on."""
    return {"done": params["round"] >= 2, "round": params["round"]}
