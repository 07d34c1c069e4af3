"""``advance`` for one instance with its writes held back and written as a set of one
(``set_writes``): the step tasks it creates go through one set-based submission, its steps,
activations, events and instance row through one statement each — what a start does.

What the set path does not hold back (``buffered``), or a step task Pulse refuses, runs
``advance`` as before instead, on a context read afresh: the held attempt wrote nothing but its
submission, which a SAVEPOINT undoes.
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa

from .advance import advance
from .buffered import NeedsSinglePath
from .context import InstanceContext
from .set_writes import SetRefused, decide_held, release, write_set


def advance_held(conn: sa.Connection, fresh: Callable[[], InstanceContext]) -> InstanceContext:
    """Advance and flush the instance ``fresh()`` reads (under its lock, with the events it
    appends); the context as it ends."""

    def advance_and_write(ctx: InstanceContext) -> None:
        advance(ctx)
        ctx.flush()
        with conn.begin_nested():
            write_set(conn, ctx.namespace, [ctx], {})

    ctx = fresh()
    # A database error is not among those that fall back: it propagates.
    if decide_held(ctx, conn, advance_and_write, falls_back=(NeedsSinglePath, SetRefused)):
        release([ctx], conn)
        return ctx
    ctx = fresh()
    advance(ctx)
    ctx.flush()
    return ctx
