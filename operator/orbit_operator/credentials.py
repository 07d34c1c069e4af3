"""Credential → a token hash in MySQL (orbit.reconcile.credential); the token stays in the Secret.

The operator reads only the Secret a Credential names, by name (RBAC: `get` on secrets, no list
or watch: it never caches the cluster's Secrets). Each reconcile and each resync reads it again,
so changing the Secret rotates the token and deleting it revokes the token (Ready=False,
SecretNotFound) within one resync interval.
"""

from __future__ import annotations

from typing import Any

import kopf

from .adapter import delete_resource, raise_for, reconcile_resource
from .context import Context, context_of
from .settings import CONFIG, GROUP, VERSION

KIND, PLURAL = "Credential", "credentials"
API_VERSION = f"{GROUP}/{VERSION}"


def _reconcile(
    ctx: Context, body: kopf.Body | dict[str, Any], out: Any, logger: kopf.Logger
) -> Any:
    return reconcile_resource(ctx, KIND, body, out, logger, secrets=ctx.kube.read_secret)


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL)
def reconcile_credential(
    body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, memo: kopf.Memo, **_: Any
) -> None:
    ctx = context_of(memo)
    raise_for(_reconcile(ctx, body, patch.status, logger), ctx)


@kopf.timer(
    GROUP, VERSION, PLURAL, interval=CONFIG.resync_seconds, initial_delay=CONFIG.resync_seconds
)
def resync_credential(
    body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, memo: kopf.Memo, **_: Any
) -> None:
    """Repair drift, and follow the Secret: rotated, deleted or created since the last look."""
    if not body.metadata.get("deletionTimestamp"):
        _reconcile(context_of(memo), body, patch.status, logger)


@kopf.on.delete(GROUP, VERSION, PLURAL)
def delete_credential(
    body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, memo: kopf.Memo, **_: Any
) -> None:
    ctx = context_of(memo)
    raise_for(delete_resource(ctx, KIND, body, patch.status, logger), ctx)
