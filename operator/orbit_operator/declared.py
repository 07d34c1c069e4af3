"""Handlers for kinds whose reconcile needs nothing but their own body (Queue, Quota, Schedule):
create, update and resume reconcile; a timer repairs drift (and refreshes status from MySQL);
delete runs the kind's deletion rules."""

from __future__ import annotations

from typing import Any

import kopf

from .adapter import delete_resource, raise_for, reconcile_resource
from .context import context_of
from .settings import CONFIG, GROUP, VERSION


def register(kind: str, plural: str) -> None:
    """Register the thin handlers of ``kind`` with Kopf."""

    def reconcile(
        body: kopf.Body,
        patch: kopf.Patch,
        logger: kopf.Logger,
        memo: kopf.Memo,
        retry: int,
        **_: Any,
    ) -> None:
        ctx = context_of(memo)
        raise_for(reconcile_resource(ctx, kind, body, patch.status, logger), ctx, retry)

    def resync(
        body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, memo: kopf.Memo, **_: Any
    ) -> None:
        """Repair drift (a row edited or deleted by hand comes back) and refresh the status."""
        if not body.metadata.get("deletionTimestamp"):
            reconcile_resource(context_of(memo), kind, body, patch.status, logger)

    def delete(
        body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, memo: kopf.Memo, **_: Any
    ) -> None:
        ctx = context_of(memo)
        raise_for(delete_resource(ctx, kind, body, patch.status, logger), ctx)

    name = kind.lower()
    for on in (kopf.on.resume, kopf.on.create, kopf.on.update):
        on(GROUP, VERSION, plural, id=f"reconcile_{name}")(reconcile)
    kopf.timer(
        GROUP,
        VERSION,
        plural,
        id=f"resync_{name}",
        interval=CONFIG.resync_seconds,
        initial_delay=CONFIG.resync_seconds,
    )(resync)
    kopf.on.delete(GROUP, VERSION, plural, id=f"delete_{name}")(delete)
