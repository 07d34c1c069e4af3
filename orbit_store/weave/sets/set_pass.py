"""Running a loop's set transactions (``inbox_set``, ``timer_set``): the due instances grouped
by namespace into sets of at most ``SET_SIZE``, each set one transaction, sets side by side on
threads. An instance whose step task Pulse refuses is taken out and its set run again; a set
that fails as a whole leaves every instance of it alone, so one bad instance never stops the
others — the caller runs what is left alone one per transaction.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import sqlalchemy as sa

from orbit_store.db import run_transaction

from ..set_writes import SET_SIZE, SetOutcome, SetRefused

log = logging.getLogger(__name__)

#: One set's transaction: ``work(conn, namespace=…, instance_ids=…)``.
SetWork = Callable[..., SetOutcome]

#: Sets retried without the instances Pulse refused, at most.
REFUSED_RETRIES = 3


def run_sets(
    engine: sa.Engine,
    work: SetWork,
    by_namespace: dict[str, list[str]],
    *,
    threads: int,
    what: str,
) -> SetOutcome:
    """Run ``work`` on every set of ``by_namespace`` (namespace → instance ids); the reports of
    every set, and the instances left alone."""
    sets = [
        (namespace, ids[first : first + SET_SIZE])
        for namespace, ids in by_namespace.items()
        for first in range(0, len(ids), SET_SIZE)
    ]
    merged, lock = SetOutcome(), threading.Lock()

    def run(item: tuple[str, list[str]]) -> None:
        outcome = _run_set(engine, work, item[0], item[1], what)
        with lock:
            merged.reports += outcome.reports
            merged.alone += outcome.alone
            merged.consumed += outcome.consumed

    if threads <= 1 or len(sets) <= 1:
        for item in sets:
            run(item)
    else:
        with ThreadPoolExecutor(min(threads, len(sets)), "orbit-weave-set") as pool:
            list(pool.map(run, sets))
    return merged


def _run_set(
    engine: sa.Engine, work: SetWork, namespace: str, instance_ids: list[str], what: str
) -> SetOutcome:
    """One set in its own transaction; instances whose step tasks Pulse refused are taken out
    and the set run again."""
    left_out: set[str] = set()
    for _ in range(REFUSED_RETRIES):
        one = functools.partial(
            work,
            namespace=namespace,
            instance_ids=[i for i in instance_ids if i not in left_out],
        )
        try:
            outcome = run_transaction(engine, one)
        except SetRefused as refused:
            left_out |= refused.instance_ids
            continue
        except Exception as exc:
            log.warning("%s set of %d failed, taken alone: %s", what, len(instance_ids), exc)
            return SetOutcome(alone=list(instance_ids))
        outcome.alone += sorted(left_out)
        return outcome
    return SetOutcome(alone=list(instance_ids))
