"""The chaos harness's worker (`orbit worker chaos.handlers:worker`): handlers whose every side
effect is a ledger row, each written right after ``ctx.check()`` (the SDK's local lease
deadline) and through the generation fence."""

from __future__ import annotations

import os
import threading
from typing import Any

from chaos.ledger import Ledger
from orbit_sdk import Cancelled, RetryableError, TaskContext, Worker

LEDGER_URL = os.environ["CHAOS_LEDGER_URL"]
PID = os.getpid()

worker = Worker(
    namespace=os.environ["ORBIT_NAMESPACE"],
    queues=("default", "keyed"),
    concurrency=int(os.environ.get("CHAOS_CONCURRENCY", "4")),
    name=f"chaos-{PID}",
    lease_wait_seconds=2,
    drain_timeout=5,
    report_timeout=float(os.environ.get("CHAOS_REPORT_TIMEOUT", "300")),
)
_local = threading.local()


def ledger() -> Ledger:
    if getattr(_local, "ledger", None) is None:
        _local.ledger = Ledger(LEDGER_URL, PID)
    return _local.ledger  # type: ignore[no-any-return]


def effect(ctx: TaskContext, kind: str) -> None:
    ctx.check()  # past the lease's deadline: LeaseLost, nothing reported
    ledger().write(ctx, kind)


def work(ctx: TaskContext, params: dict[str, Any]) -> dict[str, Any]:
    effect(ctx, "begin")
    for _ in range(params.get("steps", 1)):
        if ctx.wait_for_cancel(params.get("step_seconds", 0.3)):
            if ctx.cancel_requested and not ctx.lease_lost:
                effect(ctx, "cancelled")
                raise Cancelled("stopped on request")
            ctx.check()
    if ledger().failures(ctx.task_id) < params.get("fail_first", 0):
        effect(ctx, "failed")
        raise RetryableError("a transient failure the task's retry policy absorbs")
    effect(ctx, "end")
    return {"generation": ctx.generation}


worker.register("chaos.safe", work, safety="safe")
worker.register("chaos.unsafe", work, safety="unsafe")
