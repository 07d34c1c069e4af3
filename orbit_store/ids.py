"""Time-ordered identifiers (UUIDv7, RFC 9562) for every row exposed through the API.

They sort by creation time (friendly to InnoDB's clustered index and to cursor pagination) and
are unique beyond one database, so a namespace can later move to another shard.
"""

from __future__ import annotations

import os
import secrets
import time


def new_id() -> str:
    """Return a new UUIDv7 as its canonical 36-character string."""
    unix_ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")  # 80 random bits; 74 of them are kept
    value = (unix_ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76  # version 7
    value |= ((rand >> 68) & 0xFFF) << 64  # rand_a: 12 bits
    value |= 0b10 << 62  # RFC 9562 variant
    value |= rand & ((1 << 62) - 1)  # rand_b: 62 bits
    # The canonical 8-4-4-4-12 form, formatted directly: ``str(uuid.UUID(int=...))`` costs
    # as much again, and a drained task takes several ids (attempt, events, result event).
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def new_secret() -> str:
    """An unguessable bearer secret (lease tokens, API tokens): 256 bits, URL-safe."""
    return secrets.token_urlsafe(32)


def id_floor(at_unix_ms: int) -> str:
    """The smallest id a row created at ``at_unix_ms`` can have: ids compare as strings in time
    order, so ``id >= id_floor(t)`` selects rows created from ``t`` on through the primary key."""
    h = f"{(at_unix_ms & ((1 << 48) - 1)) << 80:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
