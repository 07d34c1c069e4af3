"""The worker the console's browser tests run as a real `orbit worker tests.ui.workers:worker`.

``ui.charge`` is an unsafe side effect that hangs on its first run for an order (the test kills
its worker then, so the task goes to NEEDS_REVIEW) and succeeds at once when run again (the
manual retry the test makes from the console)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from orbit_sdk import Worker

worker = Worker(
    namespace=os.environ["ORBIT_NAMESPACE"],
    queues=os.environ.get("ORBIT_UI_QUEUES", "default").split(","),
    concurrency=4,
    lease_wait_seconds=2,
)
RECORDS = Path(os.environ["ORBIT_UI_DIR"])


@worker.handler("ui.echo")
def echo(ctx: Any, params: Any) -> Any:
    return {"echo": params}


@worker.handler("ui.charge", safety="unsafe")
def charge(ctx: Any, params: Any) -> Any:
    marker = RECORDS / f"charge-{params['order']}"
    if not marker.exists():
        marker.write_text(ctx.task_id)
        time.sleep(120)  # the test kills this worker meanwhile
    return {"charged": params["order"]}
