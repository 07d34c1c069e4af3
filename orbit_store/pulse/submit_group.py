"""Group commit of single submissions: concurrent ``POST …/tasks`` requests of one
namespace accepted in one transaction, each answered as :func:`service.submit` would answer it.

Invariants 1 and 6 hold per request exactly as for a submission alone: when the group's
transaction commits, every request answered as new has its task, key and event durable; a key
that names an earlier identical request is a replay, a different request under a used key a
typed conflict; a refused request (quota, undeclared queue, invalid) writes nothing and its
neighbours are accepted. Two requests of one group under the same key are answered as two
concurrent submissions are: one creates the task, the other replays it (or conflicts).

The group goes through ``bulk.submit_tasks`` (the queue scope read once, multi-row
INSERTs), optimistically: its keys are not looked up first — most requests are new — so a used
key fails the group's key INSERT and every request is then submitted alone (below). Its
requests are taken in queue order, so the quota rows of a group are locked queue by queue, as
in every other group (no lock cycle between two groups). A request with a concurrency key or a
gate is never grouped (``groupable``): its permit row or gate would be locked after an earlier
request's quota rows, against the documented order (gate → key → quota rows).

When the group's transaction cannot tell each request's fate — another transaction took one of
its keys meanwhile (IntegrityError: nothing committed), the database refused a value of one
request (``DataRefused``: nothing committed), or its commit outcome is unknown — every request
is submitted again alone, so a refused one gets its own answer and its neighbours commit. A
request with a key is resolved by it (found: replayed; absent: accepted now), never accepted
twice; one without a key whose group's commit is unknown is answered ``CommitOutcomeUnknown``,
as it would have been alone.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import sqlalchemy as sa

from orbit_store.db import run_transaction
from orbit_store.errors import CommitOutcomeUnknown, DataRefused
from orbit_store.pulse.model import SubmitResult
from orbit_store.pulse.service import submit
from orbit_store.pulse.submit import bulk
from orbit_store.pulse.submit.accept import SubmitRequest

#: Each request's answer: its result, or the error ``submit`` would have raised for it alone.
Answer = SubmitResult | Exception


def groupable(request: SubmitRequest) -> bool:
    """False for what must be submitted alone: a concurrency key or a gate, whose locks would
    follow earlier requests' quota rows (see the module docstring)."""
    return request.concurrency_key is None and request.gate_id is None


def submit_group(
    engine: sa.Engine, namespace: str, requests: Sequence[SubmitRequest]
) -> list[Answer]:
    """Accept ``requests`` (one namespace, groupable, at most ``bulk.SUB_BATCH``) in one
    transaction; one answer per request, in order. A group of one is a plain ``submit``."""
    if len(requests) == 1:
        return [_alone(engine, requests[0])]
    if not all(groupable(r) and r.namespace == namespace for r in requests):
        raise ValueError("a group holds groupable requests of one namespace")
    order = sorted(range(len(requests)), key=lambda i: requests[i].queue)  # stable: arrival
    work = functools.partial(
        bulk.submit_tasks,
        namespace=namespace,
        requests=[requests[i] for i in order],
        look_up_keys=False,
    )
    try:
        items = run_transaction(engine, work)
    except (sa.exc.IntegrityError, DataRefused):
        return [_alone(engine, request) for request in requests]
    except CommitOutcomeUnknown as unknown:
        return [_resolve(engine, request, unknown) for request in requests]
    by_position = dict(zip(order, items, strict=True))
    return [_answer(by_position[position]) for position in range(len(requests))]


def _answer(item: bulk.BatchItemResult) -> Answer:
    if item.result is not None:
        return item.result
    assert item.error is not None  # a batch item has one or the other
    return item.error


def _alone(engine: sa.Engine, request: SubmitRequest) -> Answer:
    try:
        return submit(engine, request)
    except Exception as exc:  # answered to its own request, as the route would have raised it
        return exc


def _resolve(engine: sa.Engine, request: SubmitRequest, unknown: CommitOutcomeUnknown) -> Answer:
    """After the group's unknown commit: a keyed request is looked up by its key (and accepted
    now if the group did not commit); an unkeyed one cannot be told apart from a new one."""
    if request.idempotency_key is None:
        return unknown
    return _alone(engine, request)
