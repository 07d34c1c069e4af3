"""Queue → its `queues` row in MySQL (orbit.reconcile.queue); status shows the live backlog.

Deletion follows spec.deletionPolicy: while tasks are unfinished the finalizer stays and Ready
says HasUnfinishedTasks (Block waits for you, Drain for the backlog, Cancel cancels it)."""

from __future__ import annotations

from typing import Any

import kopf

from .adapter import delete_resource, raise_for, reconcile_resource
from .context import context_of
from .settings import CONFIG, GROUP, VERSION

KIND, PLURAL = "Queue", "queues"


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL)
def reconcile_queue(
    body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, memo: kopf.Memo, **_: Any
) -> None:
    ctx = context_of(memo)
    raise_for(reconcile_resource(ctx, KIND, body, patch.status, logger), ctx)


@kopf.timer(
    GROUP, VERSION, PLURAL, interval=CONFIG.resync_seconds, initial_delay=CONFIG.resync_seconds
)
def resync_queue(
    body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, memo: kopf.Memo, **_: Any
) -> None:
    """Repair drift (a row edited or deleted by hand) and refresh the counts."""
    if not body.metadata.get("deletionTimestamp"):
        reconcile_resource(context_of(memo), KIND, body, patch.status, logger)


@kopf.on.delete(GROUP, VERSION, PLURAL)
def delete_queue(
    body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, memo: kopf.Memo, **_: Any
) -> None:
    ctx = context_of(memo)
    raise_for(delete_resource(ctx, KIND, body, patch.status, logger), ctx)
