"""Verifying Orbit's webhook deliveries in a receiver (Standard Webhooks signatures).

    from orbit_sdk.webhooks import InvalidWebhook, verify_webhook

    event = verify_webhook(SECRET, request.headers, request.body)   # raises InvalidWebhook
    if already_processed(event.id):                                  # dedupe by event id
        return 200
    process(event); remember(event.id); return 200

Any Standard Webhooks library (https://www.standardwebhooks.com) verifies the same headers.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from collections.abc import Mapping

from .results import ResultEvent

DEFAULT_TOLERANCE_SECONDS = 300


class InvalidWebhook(Exception):
    """The request is not a genuine, fresh Orbit delivery: answer 4xx and do not process it."""


def _key(secret: str) -> bytes:
    try:
        return base64.b64decode(secret.removeprefix("whsec_"), validate=True)
    except binascii.Error as exc:
        raise ValueError("the secret must be whsec_ followed by base64") from exc


def verify_webhook(
    secret: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    tolerance_seconds: float = DEFAULT_TOLERANCE_SECONDS,
    now: float | None = None,
) -> ResultEvent:
    """Check the signature and timestamp of one delivery and return its event."""
    lower = {k.lower(): v for k, v in headers.items()}
    try:
        msg_id, stamp = lower["webhook-id"], lower["webhook-timestamp"]
        signatures = lower["webhook-signature"].split()
        sent_at = int(stamp)
    except (KeyError, ValueError) as exc:
        raise InvalidWebhook("missing or malformed webhook-* headers") from exc
    if abs((time.time() if now is None else now) - sent_at) > tolerance_seconds:
        raise InvalidWebhook("timestamp outside the tolerance: a replay or a wrong clock")
    signed = f"{msg_id}.{stamp}.".encode() + body
    expected = base64.b64encode(hmac.new(_key(secret), signed, hashlib.sha256).digest()).decode()
    if not any(
        hmac.compare_digest(candidate.removeprefix("v1,"), expected)
        for candidate in signatures
        if candidate.startswith("v1,")
    ):
        raise InvalidWebhook("no valid signature")
    event = ResultEvent.model_validate_json(body)
    if event.id != msg_id:
        raise InvalidWebhook("webhook-id does not match the event id")
    return event
