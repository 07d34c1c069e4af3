"""Webhook signing (Standard Webhooks, https://www.standardwebhooks.com) and where the signing
secrets come from.

**Secrets** are never stored in the database (a hash would not let us sign). A push subscription
names its secret (``secret_ref``); the server reads it from the file of that name in **its own
namespace's folder** of the webhook-secrets directory, ``DIR/<namespace>/<secret_ref>`` — in
Kubernetes, one Secret per Orbit namespace mounted there (charts/orbit ``webhooks.secrets``), so
rotating the Secret rotates the key without a restart. A subscription can only ever sign with its
namespace's secrets: naming another namespace's secret is exactly like naming one that does not
exist. The file holds a Standard Webhooks secret: ``whsec_`` followed by the base64 of 24 to 64
random bytes.

**Signature**: ``webhook-signature: v1,<base64 HMAC-SHA256(key, "{id}.{timestamp}.{body}")>``
with ``webhook-id`` (the result event's id, the same on every retry: receivers dedupe by it) and
``webhook-timestamp`` (Unix seconds: receivers reject stale or future messages, which stops
replays). Any Standard Webhooks library verifies it; ``docs/concepts/results.md`` shows how.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orbit_store.delivery.model import ResultEvent
from orbit_store.delivery.subscriptions import SECRET_REF

#: An Orbit namespace name (a Kubernetes one): it names a folder, so no dots or slashes.
NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")

SECRET_PREFIX = "whsec_"
MIN_KEY_BYTES, MAX_KEY_BYTES = 24, 64


class SecretUnavailable(Exception):
    """The named signing secret cannot be used; the message says what to do."""


def parse_secret(text: str, ref: str) -> bytes:
    text = text.strip()
    if not text.startswith(SECRET_PREFIX):
        raise SecretUnavailable(f"webhook secret {ref!r} must start with {SECRET_PREFIX!r}")
    try:
        key = base64.b64decode(text[len(SECRET_PREFIX) :], validate=True)
    except binascii.Error as exc:
        raise SecretUnavailable(f"webhook secret {ref!r} is not valid base64 after whsec_") from exc
    if not MIN_KEY_BYTES <= len(key) <= MAX_KEY_BYTES:
        raise SecretUnavailable(
            f"webhook secret {ref!r} must encode {MIN_KEY_BYTES}-{MAX_KEY_BYTES} random bytes"
        )
    return key


@dataclass(frozen=True)
class SecretDirectory:
    """Signing secrets as files, one folder per namespace (read on every use: rotation needs no
    restart)."""

    path: Path | None

    def key(self, namespace: str, ref: str) -> bytes:
        """The key of ``namespace``'s secret ``ref``. A missing folder, a missing file and a
        file of another namespace all give the same message."""
        if self.path is None:
            raise SecretUnavailable(
                "this server has no webhook-secrets directory: start it with "
                "--webhook-secrets-dir (a mounted Secret per namespace) to sign push deliveries"
            )
        if not SECRET_REF.match(ref):
            raise SecretUnavailable(f"secret_ref {ref!r} is not a plain file name")
        if not NAMESPACE.match(namespace):
            raise SecretUnavailable(f"namespace {namespace!r} has no webhook-secrets folder")
        folder = self.path / namespace
        try:
            return parse_secret((folder / ref).read_text(), ref)
        except FileNotFoundError as exc:
            raise SecretUnavailable(
                f"webhook secret {ref!r} not found for namespace {namespace!r}: add key {ref!r} "
                f"to the Secret mounted at {folder} (docs/concepts/results.md#signing-secrets)"
            ) from exc
        except (OSError, UnicodeDecodeError) as exc:
            raise SecretUnavailable(
                f"webhook secret {ref!r} of namespace {namespace!r} cannot be read as text "
                f"({type(exc).__name__}): it must be a file holding whsec_ and base64"
            ) from exc

    def shared_files(self) -> list[str]:
        """Files directly in the directory: the layout before secrets had a folder per namespace.
        They sign nothing any more; the server logs them at start so an operator moves them."""
        if self.path is None or not self.path.is_dir():
            return []
        return sorted(
            p.name for p in self.path.iterdir() if p.is_file() and not p.name.startswith(".")
        )


def event_document(event: ResultEvent) -> dict[str, Any]:
    """The JSON a subscriber receives for one event, by pull or by push."""
    return {
        "id": event.id,
        "type": event.kind,
        "namespace": event.namespace,
        "task_id": event.task_id,
        "task_state": event.task_state,
        "state_version": event.state_version,
        "queue": event.queue,
        "handler": event.handler,
        "payload": event.payload,
        "created_at": event.created_at.isoformat() + "Z",
        "attempt": event.attempt,
    }


def signed_request(key: bytes, event: ResultEvent, timestamp: int) -> tuple[bytes, dict[str, str]]:
    """The body and headers of one push delivery."""
    body = json.dumps(event_document(event), separators=(",", ":"), default=str).encode()
    signed = f"{event.id}.{timestamp}.".encode() + body
    signature = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    headers = {
        "content-type": "application/json",
        "webhook-id": event.id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": f"v1,{signature}",
        "orbit-delivery-attempt": str(event.attempt),
    }
    return body, headers
