"""The handlers of the order-fulfilment workflow (examples/manifests/workflowdefinition-order.yaml):
`orbit worker examples.workflows.worker:worker`, or
`orbit dev --worker examples.workflows.worker:worker` to run it in-process.
Each step of the workflow is an ordinary Orbit task; the poll step calls `orders.track` once per
round until the parcel is delivered (here: from the third round on)."""

from __future__ import annotations

from typing import Any

from orbit_sdk import Worker

# No namespace: the worker serves its token's own (the server says which).
worker = Worker(queues=["default"], concurrency=8)


@worker.handler("orders.reserve")
def reserve(ctx: Any, params: Any) -> Any:
    return {"order": params["order"], "items": ["book", "lamp"]}


@worker.handler("orders.charge", safety="unsafe")
def charge(ctx: Any, params: Any) -> Any:
    """Pass ctx.generation to the payment provider so a stale attempt is refused there."""
    return {"charged": params.get("amount", 0), "fencing_generation": ctx.generation}


@worker.handler("orders.pack")
def pack(ctx: Any, params: Any) -> Any:
    return {"box": f"BOX-{params['order']}", "items": params["items"]}


@worker.handler("orders.track")
def track(ctx: Any, params: Any) -> Any:
    """One poll round: ask the carrier where the parcel is."""
    delivered = params.get("round", 1) >= 3
    status = "delivered" if delivered else "in transit"
    return {"status": status, "tracking": f"TRK-{params['box']}"}
