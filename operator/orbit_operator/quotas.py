"""Quota → its `quotas` row in MySQL (orbit.reconcile.quota), for one queue or the namespace.
Deleting the Quota removes the row (the limits stop applying)."""

from __future__ import annotations

from typing import Any

import kopf

from .adapter import delete_resource, raise_for, reconcile_resource
from .context import context_of
from .settings import CONFIG, GROUP, VERSION

KIND, PLURAL = "Quota", "quotas"


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL)
def reconcile_quota(
    body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, memo: kopf.Memo, **_: Any
) -> None:
    ctx = context_of(memo)
    raise_for(reconcile_resource(ctx, KIND, body, patch.status, logger), ctx)


@kopf.timer(
    GROUP, VERSION, PLURAL, interval=CONFIG.resync_seconds, initial_delay=CONFIG.resync_seconds
)
def resync_quota(
    body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, memo: kopf.Memo, **_: Any
) -> None:
    """Repair drift: a row edited or deleted by hand comes back."""
    if not body.metadata.get("deletionTimestamp"):
        reconcile_resource(context_of(memo), KIND, body, patch.status, logger)


@kopf.on.delete(GROUP, VERSION, PLURAL)
def delete_quota(
    body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, memo: kopf.Memo, **_: Any
) -> None:
    ctx = context_of(memo)
    raise_for(delete_resource(ctx, KIND, body, patch.status, logger), ctx)
