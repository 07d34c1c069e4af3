"""Size limits for what clients send: a submission's ``params``, a completion's ``result`` and
``error``. One setting, ``max_payload_bytes`` (``orbit server --max-payload-bytes``), checked
twice so that a large request never costs the server its memory:

1. **Before parsing**: the request body may be at most ``max_payload_bytes`` plus
   ``ENVELOPE_BYTES`` for the rest of the request. ``body_limit.BodyLimit`` refuses a larger
   ``Content-Length`` before reading anything and stops a body without one as soon as that many
   bytes arrived; nothing larger is ever parsed. (Starlette's own ``max_body_size`` does the same
   but answers every 413 in plain text, replacing our problem document.)
2. **After parsing**: the payload fields, measured as compact UTF-8 JSON, may be at most
   ``max_payload_bytes`` together; the 413 problem names the field.
"""

from __future__ import annotations

import json
from typing import Any

DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024
#: Room for everything else in a request body (handler, key, tokens, heartbeat batches).
ENVELOPE_BYTES = 256 * 1024

ADVICE = "store large data elsewhere (e.g. object storage) and pass a reference"


class PayloadTooLarge(Exception):
    """Answered as a 413 ``payload-too-large`` problem naming ``field`` (api/problems.py)."""

    def __init__(self, detail: str, *, field: str, size_bytes: int, limit_bytes: int) -> None:
        super().__init__(detail)
        self.detail, self.field = detail, field
        self.size_bytes, self.limit_bytes = size_bytes, limit_bytes


def body_limit(max_payload_bytes: int) -> int:
    return max_payload_bytes + ENVELOPE_BYTES


def json_size(value: Any) -> int:
    """Bytes of ``value`` as compact JSON, the way the store keeps it."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def check_payload(max_payload_bytes: int, **fields: Any) -> None:
    """413 ``payload-too-large`` naming the largest field when the fields together exceed the
    limit. Fields that are ``None`` are not sent and count nothing."""
    sizes = {name: json_size(value) for name, value in fields.items() if value is not None}
    total = sum(sizes.values())
    if total <= max_payload_bytes:
        return
    field = max(sizes, key=lambda name: sizes[name])
    names = " and ".join(sorted(sizes))
    raise PayloadTooLarge(
        f"{names} take {total} bytes as JSON; the limit is {max_payload_bytes} bytes: {ADVICE}",
        field=field,
        size_bytes=total,
        limit_bytes=max_payload_bytes,
    )


def body_too_large_detail(max_payload_bytes: int) -> str:
    return (
        f"the request body is larger than {body_limit(max_payload_bytes)} bytes "
        f"({max_payload_bytes} for params or a result, plus {ENVELOPE_BYTES} for the rest): "
        f"{ADVICE}"
    )
