"""Progress rides on the heartbeat (renew_leases): the latest a handler reported is kept on its
attempt, bounded; a stale attempt cannot write it (invariant 3); a value out of bounds is refused
for that item alone and its lease is renewed all the same (one bad item never stops others)."""

from __future__ import annotations

import functools
import math

import pytest

from orbit_store.pulse.leases.heartbeat import renew_leases
from orbit_store.pulse.model import (
    PROGRESS_DETAILS_MAX_BYTES,
    PROGRESS_MESSAGE_MAX,
    Progress,
    RenewRequest,
    RenewStatus,
)
from orbit_store.pulse.views.queries import get_task

from ...drivers.pulse_driver import PulseDriver


def beat(pulse: PulseDriver, *items: RenewRequest) -> list:  # type: ignore[type-arg]
    return pulse.tx(functools.partial(renew_leases, namespace=pulse.namespace, items=list(items)))


def detail_progress(pulse: PulseDriver, task_id: str) -> list[Progress | None]:
    detail = pulse.tx(lambda conn: get_task(conn, pulse.namespace, task_id))
    return [a.progress for a in detail.attempts]


def test_the_latest_progress_is_kept_on_the_attempt_with_the_database_time(
    pulse: PulseDriver,
) -> None:
    task = pulse.submit()
    grant = pulse.claim_one()
    pulse.start(grant)
    first = Progress(fraction=0.25, details={"rows": 250})
    before = pulse.now()
    [renewed] = beat(pulse, RenewRequest(grant.attempt_id, grant.token, first))
    after = pulse.now()
    assert renewed.status is RenewStatus.EXTENDED and renewed.progress_refused is None
    [kept] = detail_progress(pulse, task.task_id)
    assert kept is not None and (kept.fraction, kept.message, kept.details) == (
        0.25,
        None,
        {"rows": 250},
    )
    assert kept.at is not None and before <= kept.at <= after  # database time, as for leases
    beat(pulse, RenewRequest(grant.attempt_id, grant.token, Progress(message="writing")))
    [latest] = detail_progress(pulse, task.task_id)
    assert latest is not None and (latest.fraction, latest.message) == (None, "writing")
    beat(pulse, RenewRequest(grant.attempt_id, grant.token))  # no news: kept as it was
    assert detail_progress(pulse, task.task_id) == [latest]


def test_a_superseded_attempt_cannot_report_progress_inv3(pulse: PulseDriver) -> None:
    task = pulse.submit()
    grant = pulse.claim_one()
    pulse.start(grant)
    [refused] = beat(pulse, RenewRequest(grant.attempt_id, "not-the-token", Progress(0.9)))
    assert refused.status is RenewStatus.LOST
    assert detail_progress(pulse, task.task_id) == [None]


@pytest.mark.parametrize(
    ("progress", "why"),
    [
        (Progress(fraction=1.5), "fraction"),
        (Progress(fraction=math.nan), "fraction"),
        (Progress(message="x" * (PROGRESS_MESSAGE_MAX + 1)), "message"),
        (Progress(details={"blob": "x" * PROGRESS_DETAILS_MAX_BYTES}), "details"),
        (Progress(details={"x": math.inf}), "details"),
        (Progress(details=functools.reduce(lambda d, _: {"d": d}, range(40), {})), "details"),
    ],
)
def test_progress_out_of_bounds_is_refused_for_its_item_alone_and_the_lease_renewed(
    pulse: PulseDriver, progress: Progress, why: str
) -> None:
    pulse.submit()
    pulse.submit()
    bad, good = pulse.claim(limit=2)
    pulse.start(bad)
    pulse.start(good)
    answers = beat(
        pulse,
        RenewRequest(bad.attempt_id, bad.token, progress),
        RenewRequest(good.attempt_id, good.token, Progress(fraction=0.5)),
    )
    assert [a.status for a in answers] == [RenewStatus.EXTENDED, RenewStatus.EXTENDED]
    assert answers[0].progress_refused is not None and why in answers[0].progress_refused
    assert answers[1].progress_refused is None
    assert detail_progress(pulse, bad.task_id) == [None]
    [kept] = detail_progress(pulse, good.task_id)
    assert kept is not None and kept.fraction == 0.5
