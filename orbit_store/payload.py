"""How large a payload Orbit accepts: one limit, ``max_payload_bytes``, for everything a client
hands over to be stored and handed on — a task's params, a result and error, a workflow's input,
a signal's payload, a schedule's task template, and the params of a task a workflow step makes.

Sizes are measured as compact UTF-8 JSON, the way the store keeps them. The HTTP API answers
an oversized field with a 413 ``payload-too-large`` problem naming it
(orbit/api/transport/limits.py); a workflow step whose rendered params are too large fails with that
reason instead.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024

ADVICE = "store large data elsewhere (e.g. object storage) and pass a reference"


def json_size(value: Any) -> int:
    """Bytes of ``value`` as compact JSON, the way the store keeps it."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


@dataclass(frozen=True)
class Oversize:
    """Fields that together exceed the limit: the largest one, and what to tell the user."""

    field: str
    size_bytes: int
    limit_bytes: int
    detail: str


def oversize(max_payload_bytes: int, **fields: Any) -> Oversize | None:
    """None when the fields together fit in the limit; fields that are ``None`` count nothing."""
    sizes = {name: json_size(value) for name, value in fields.items() if value is not None}
    total = sum(sizes.values())
    if total <= max_payload_bytes:
        return None
    names = " and ".join(sorted(sizes))
    return Oversize(
        field=max(sizes, key=lambda name: sizes[name]),
        size_bytes=total,
        limit_bytes=max_payload_bytes,
        detail=f"{names} take {total} bytes as JSON; the limit is {max_payload_bytes} bytes: "
        f"{ADVICE}",
    )
