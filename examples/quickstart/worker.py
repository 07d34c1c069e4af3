"""The quick-start worker: `orbit dev --worker examples.quickstart.worker:worker` runs it
in-process; `orbit worker examples.quickstart.worker:worker` runs it on its own."""

from __future__ import annotations

from typing import Any

from orbit_sdk import RetryableError, Worker

# No namespace: the worker serves its token's own (ORBIT_TOKEN; the server says which).
worker = Worker(queues=["default"], concurrency=4)


@worker.handler("shop.echo")
def echo(ctx: Any, params: Any) -> Any:
    """Returns its parameters; the result is stored with the task."""
    ctx.log.info("echoing", extra={"params": params})
    return params


@worker.handler("shop.charge", safety="unsafe")
def charge(ctx: Any, params: Any) -> Any:
    """A side effect that must not run twice: if the worker dies mid-run the task goes to
    NEEDS_REVIEW instead of being retried. Pass ctx.generation to the payment provider so a
    stale attempt can be refused there (fencing)."""
    if params.get("amount", 0) <= 0:
        raise ValueError("amount must be positive")  # a business failure: FAILED, no retry
    if params.get("simulate_outage"):
        raise RetryableError("payment provider unavailable")  # retried with backoff
    return {"charged": params["amount"], "fencing_generation": ctx.generation}
