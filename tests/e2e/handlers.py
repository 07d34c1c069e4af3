"""The worker the end-to-end tests run as a real `orbit worker tests.e2e.handlers:worker`
subprocess. Handlers record what happened in files under ORBIT_E2E_DIR so tests can see it."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from orbit_sdk import Cancelled, OutcomeUnknown, RetryableError, Worker

worker = Worker(
    namespace=os.environ["ORBIT_NAMESPACE"],
    queues=os.environ.get("ORBIT_E2E_QUEUES", "default").split(","),
    concurrency=int(os.environ.get("ORBIT_E2E_CONCURRENCY", "4")),
    lease_wait_seconds=float(os.environ.get("ORBIT_E2E_LEASE_WAIT", "2")),
    drain_timeout=float(os.environ.get("ORBIT_E2E_DRAIN_TIMEOUT", "30")),
    lease_with_start=os.environ.get("ORBIT_E2E_LEASE_WITH_START", "1") == "1",
)
RECORDS = Path(os.environ.get("ORBIT_E2E_DIR", "/tmp"))


def record(name: str, line: str) -> None:
    with (RECORDS / name).open("a") as f:
        f.write(line + "\n")


@worker.handler("e2e.echo")
def echo(ctx: Any, params: Any) -> Any:
    return {"echo": params, "generation": ctx.generation}


@worker.handler("e2e.flaky")
def flaky(ctx: Any, params: Any) -> Any:
    """Fails retryably until it has been called params['failures'] times."""
    marker = RECORDS / f"flaky-{ctx.task_id}"
    calls = int(marker.read_text()) + 1 if marker.exists() else 1
    marker.write_text(str(calls))
    if calls <= params["failures"]:
        raise RetryableError(f"transient failure {calls}")
    return {"calls": calls}


@worker.handler("e2e.charge", safety="unsafe")
def charge(ctx: Any, params: Any) -> Any:
    """An unsafe side effect that takes a while: the test kills the worker in the middle."""
    record("charge-started", ctx.task_id)
    time.sleep(params.get("seconds", 60))
    record("charge-finished", ctx.task_id)
    return {"charged": True}


@worker.handler("e2e.slow")
def slow(ctx: Any, params: Any) -> Any:
    record("slow-started", ctx.task_id)
    time.sleep(params.get("seconds", 1))
    record("slow-finished", ctx.task_id)
    return {"slept": params.get("seconds", 1)}


@worker.handler("e2e.alone")
def alone(ctx: Any, params: Any) -> Any:
    """Works for a while without looking at cancel requests; its start and end go to one file,
    in order, so a test sees whether two of them ever ran at once."""
    record("alone", f"start {ctx.task_id}")
    time.sleep(params.get("seconds", 1))
    record("alone", f"end {ctx.task_id}")
    return {"slept": params.get("seconds", 1)}


@worker.handler("e2e.cancellable")
def cancellable(ctx: Any, params: Any) -> Any:
    record("cancellable-started", ctx.task_id)
    if ctx.wait_for_cancel(timeout=params.get("seconds", 60)):
        record("cancellable-saw-cancel", ctx.task_id)
        raise Cancelled("stopped on request")
    return {"finished": True}


@worker.handler("e2e.uncertain")
def uncertain(ctx: Any, params: Any) -> Any:
    """Cannot tell whether its side effect happened: the task goes to NEEDS_REVIEW."""
    raise OutcomeUnknown("the payment provider timed out")


@worker.handler("e2e.ledger")
def ledger(ctx: Any, params: Any) -> Any:
    """A side effect per step, each right after ``ctx.check()`` (the local lease deadline):
    the paused-worker test reads when each generation wrote."""
    for step in range(params["steps"]):
        ctx.check()
        record("ledger", f"{ctx.task_id}:{ctx.generation}:{step}:{time.time():.6f}")
        time.sleep(params.get("pause", 0.2))
    return {"steps": params["steps"]}


@worker.handler("e2e.nested")
def nested_result(ctx: Any, params: Any) -> Any:
    """Returns arrays and objects ``params['depth']`` deep (more than Orbit stores, past 20)."""
    value: Any = "leaf"
    for _ in range(params["depth"]):
        value = {"a": value}
    return value


@worker.handler("e2e.nested_unsafe", safety="unsafe")
def nested_result_unsafe(ctx: Any, params: Any) -> Any:
    return nested_result(ctx, params)


@worker.handler("e2e.progress")
def progress(ctx: Any, params: Any) -> Any:
    """Reports each of params['steps'] as progress, then waits for the test's go-ahead file
    (``progress-go-<task id>``) before the next one."""
    steps = params["steps"]
    for index, step in enumerate(steps, start=1):
        ctx.progress(step.get("fraction", step.get("message")), step.get("details"))
        go = RECORDS / f"progress-go-{ctx.task_id}-{index}"
        while not go.exists():
            if ctx.wait_for_cancel(0.05):
                raise Cancelled("stopped")
    return {"steps": len(steps)}
