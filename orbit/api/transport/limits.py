"""Limits for what clients send: a submission's ``params``, a completion's ``result`` and
``error``, a workflow's ``input``, a signal's ``payload``, a schedule's ``task.params``
(orbit_store/payload.py says what counts).

They must be JSON the database can store (``orbit_sdk.json_values``: finite numbers, arrays
and objects nested at most ``MAX_JSON_DEPTH`` deep, Unicode text), refused with a 422 problem
naming the field (:class:`NotStorable`). And they have one size limit, ``max_payload_bytes``
(``orbit server --max-payload-bytes``), checked twice so that a large request never costs the
server its memory:

1. **Before parsing**: the request body may be at most ``max_payload_bytes`` plus
   ``ENVELOPE_BYTES`` for the rest of the request. ``body_limit.BodyLimit`` refuses a larger
   ``Content-Length`` before reading anything and stops a body without one as soon as that many
   bytes arrived; nothing larger is ever parsed. (Starlette's own ``max_body_size`` does the same
   but answers every 413 in plain text, replacing our problem document.)
2. **After parsing**: the payload fields, measured as compact UTF-8 JSON, may be at most
   ``max_payload_bytes`` together; the 413 problem names the field.
"""

from __future__ import annotations

from typing import Any

from orbit_sdk.json_values import Unstorable, check_storable
from orbit_store.payload import ADVICE, oversize

#: Room for everything else in a request body (handler, key, tokens, heartbeat batches).
ENVELOPE_BYTES = 256 * 1024


class PayloadTooLarge(Exception):
    """Answered as a 413 ``payload-too-large`` problem naming ``field`` (api/problems.py)."""

    def __init__(self, detail: str, *, field: str, size_bytes: int, limit_bytes: int) -> None:
        super().__init__(detail)
        self.detail, self.field = detail, field
        self.size_bytes, self.limit_bytes = size_bytes, limit_bytes


class NotStorable(Exception):
    """Answered as a 422 ``validation`` problem naming ``field`` (api/problems.py): the value
    cannot be stored as JSON (``detail`` says where in it and why)."""

    def __init__(self, unstorable: Unstorable, *, field: str) -> None:
        super().__init__(str(unstorable))
        self.detail, self.field = str(unstorable), field
        self.path, self.reason = unstorable.path, unstorable.reason


def check_json(**fields: Any) -> None:
    """422 naming the first of ``fields`` (by name) that the database cannot store as JSON.
    Every JSON value a client sends passes here (``check_payload``, ``schemas.base.Strict``)."""
    for name, value in fields.items():
        try:
            check_storable(value, name)
        except Unstorable as exc:
            raise NotStorable(exc, field=name) from None


def body_limit(max_payload_bytes: int) -> int:
    return max_payload_bytes + ENVELOPE_BYTES


def check_payload(max_payload_bytes: int, **fields: Any) -> None:
    """422 naming a field the database cannot store as JSON (:func:`check_json`); 413
    ``payload-too-large`` naming the largest field when the fields together exceed the limit:
    every route that takes a payload calls this one check. Fields that are ``None`` are not sent
    and count nothing."""
    check_json(**fields)
    found = oversize(max_payload_bytes, **fields)
    if found is not None:
        raise PayloadTooLarge(
            found.detail,
            field=found.field,
            size_bytes=found.size_bytes,
            limit_bytes=found.limit_bytes,
        )


def body_too_large_detail(max_payload_bytes: int) -> str:
    return (
        f"the request body is larger than {body_limit(max_payload_bytes)} bytes "
        f"({max_payload_bytes} for params or a result, plus {ENVELOPE_BYTES} for the rest): "
        f"{ADVICE}"
    )
