"""An attempt's progress: the bounds it must keep and the columns it is stored in.

A handler reports progress through its worker's heartbeat; ``heartbeat.renew_leases`` writes it
in the same conditional UPDATE that renews the lease, so only the current attempt presenting
its token can write it (invariant 3) and it costs no statement of its own. What does not fit
the bounds is refused for that item alone: its lease is renewed all the same.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from typing import Any

from orbit_store.pulse.model import (
    PROGRESS_DETAILS_MAX_BYTES,
    PROGRESS_DETAILS_MAX_DEPTH,
    PROGRESS_MESSAGE_MAX,
    Progress,
)


def progress_problem(progress: Progress) -> str | None:
    """Why ``progress`` cannot be stored, or None."""
    fraction = progress.fraction
    if fraction is not None and not (
        isinstance(fraction, int | float) and math.isfinite(fraction) and 0 <= fraction <= 1
    ):
        return f"fraction must be a number from 0 to 1, not {fraction!r}"
    if progress.message is not None and len(progress.message) > PROGRESS_MESSAGE_MAX:
        return f"message is longer than {PROGRESS_MESSAGE_MAX} characters"
    if progress.details is None:
        return None
    if not isinstance(progress.details, dict):
        return "details must be a JSON object"
    if _depth(progress.details) > PROGRESS_DETAILS_MAX_DEPTH:
        return f"details nest deeper than {PROGRESS_DETAILS_MAX_DEPTH} levels"
    try:
        size = len(json.dumps(progress.details, allow_nan=False).encode())
    except (TypeError, ValueError) as exc:
        return f"details are not JSON (numbers must be finite): {exc}"
    if size > PROGRESS_DETAILS_MAX_BYTES:
        return f"details take {size} bytes as JSON, more than {PROGRESS_DETAILS_MAX_BYTES}"
    return None


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


def progress_columns(progress: Progress, now: dt.datetime) -> dict[str, Any]:
    """The task_attempts columns that hold ``progress``, heard at ``now``."""
    return {
        "progress_fraction": progress.fraction,
        "progress_message": progress.message,
        "progress_details": progress.details,
        "progress_at": now,
    }


def progress_of(row: Any) -> Progress | None:
    """An attempt row's progress, or None if it never reported any."""
    if row.progress_at is None:
        return None
    return Progress(
        fraction=row.progress_fraction,
        message=row.progress_message,
        details=row.progress_details,
        at=row.progress_at,
    )
