"""``advance`` for one instance with its writes held back and written as a set of one
(``set_writes``): the step tasks it creates go through one set-based submission, its steps,
activations, events and instance row through one statement each — what a start does.

What the set path does not hold back (``buffered``), or a step task Pulse refuses, runs
``advance`` as before instead, on a context read afresh: the held attempt wrote nothing but its
submission, which a SAVEPOINT undoes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import cast

import sqlalchemy as sa

from .advance import advance
from .buffered import InstanceWrites, NeedsSinglePath, ReadOnlyConnection
from .context import InstanceContext
from .set_writes import SetRefused, write_set

log = logging.getLogger(__name__)


def advance_held(conn: sa.Connection, fresh: Callable[[], InstanceContext]) -> InstanceContext:
    """Advance and flush the instance ``fresh()`` reads (under its lock, with the events it
    appends); the context as it ends."""
    ctx = fresh()
    inst = ctx.instance
    ctx.writes = InstanceWrites(inst.state_version, inst.event_seq)
    ctx.conn = cast(sa.Connection, ReadOnlyConnection(conn))
    try:
        advance(ctx)
        ctx.flush()
        with conn.begin_nested():
            write_set(conn, inst.namespace, [ctx], {})
    except (NeedsSinglePath, SetRefused) as exc:  # a database error is not caught: it propagates
        log.debug("workflow %s advanced alone: %s: %s", inst.id, type(exc).__name__, exc)
        ctx = fresh()
        advance(ctx)
        ctx.flush()
        return ctx
    ctx.conn, ctx.writes = conn, None
    return ctx
