"""Credential → a token hash in MySQL (orbit.reconcile.credential); the token stays in the Secret.

The operator watches Secrets: changing the referenced Secret rotates the token, deleting it
revokes the token (Ready=False, SecretNotFound) until it is back. An index of which Credentials
reference which Secret keeps that cheap.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from .adapter import delete_resource, raise_for, reconcile_resource
from .context import Context, context_of
from .kube import secret_data
from .settings import CONFIG, GROUP, VERSION

KIND, PLURAL = "Credential", "credentials"
API_VERSION = f"{GROUP}/{VERSION}"

# Not the Secret's own logger: that one would post Events on the user's Secret.
log = logging.getLogger("orbit.operator.credentials")


def _reconcile(
    ctx: Context, body: kopf.Body | dict[str, Any], out: Any, logger: kopf.Logger
) -> Any:
    return reconcile_resource(ctx, KIND, body, out, logger, secrets=ctx.kube.read_secret)


@kopf.index(GROUP, VERSION, PLURAL)
def credentials_by_secret(
    namespace: str | None, name: str | None, spec: kopf.Spec, **_: Any
) -> dict[tuple[str | None, str], str | None] | None:
    """(namespace, Secret name) → names of the Credentials that read it."""
    secret = (spec.get("secretRef") or {}).get("name")
    return {(namespace, secret): name} if secret else None


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
    """Repair drift, and catch a Secret change the watch missed."""
    if not body.metadata.get("deletionTimestamp"):
        _reconcile(context_of(memo), body, patch.status, logger)


@kopf.on.delete(GROUP, VERSION, PLURAL)
def delete_credential(
    body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, memo: kopf.Memo, **_: Any
) -> None:
    ctx = context_of(memo)
    raise_for(delete_resource(ctx, KIND, body, patch.status, logger), ctx)


@kopf.on.event("", "v1", "secrets")
def secret_changed(
    type: str,
    body: kopf.Body,
    memo: kopf.Memo,
    **kwargs: Any,
) -> None:
    """A Secret some Credential reads was created, changed or deleted: reconcile those
    Credentials now with its new data (their status is patched here, outside their handlers)."""
    index: kopf.Index[tuple[str | None, str], str | None] = kwargs["credentials_by_secret"]
    meta = body.get("metadata") or {}
    key = (meta.get("namespace"), str(meta.get("name")))
    if not type or key not in index:
        return  # type None: the initial listing, which the resume handlers cover
    namespace, secret = key
    ctx = context_of(memo)
    data = None if type == "DELETED" else secret_data(body)
    for name in set(index[key]):
        if name is None:
            continue
        credential = ctx.kube.get(API_VERSION, PLURAL, namespace, name)
        if credential is None or credential["metadata"].get("deletionTimestamp"):
            continue
        status: dict[str, Any] = {}
        reconcile_resource(
            ctx,
            KIND,
            credential,
            status,
            log,
            secrets=lambda _ns, _name: data,
        )
        ctx.kube.patch_status(API_VERSION, PLURAL, str(namespace), name, status)
        log.info("Secret %s/%s %s: Credential %s reconciled", namespace, secret, type.lower(), name)
