"""The namespace overview and the worker-session list people read (console, ``GET …/overview``,
``GET …/worker-sessions``): every number counted from the authoritative rows, in one namespace."""

from __future__ import annotations

from orbit_store.overview import THROUGHPUT_MINUTES, namespace_overview
from orbit_store.pulse.model import Outcome, Safety
from orbit_store.pulse.workers.worker_views import list_sessions

from ..drivers.pulse_driver import PulseDriver


def _overview(pulse: PulseDriver):  # type: ignore[no-untyped-def]
    with pulse.engine.connect() as conn:
        return namespace_overview(conn, pulse.namespace)


def test_overview_counts_live_tasks_per_queue_and_what_needs_a_person(
    pulse: PulseDriver,
) -> None:
    pulse.queue("mail", paused=True)
    pulse.submit(queue="mail")
    session = pulse.session()
    for _ in range(3):
        pulse.submit(safety=Safety.UNSAFE)
    unknown = pulse.claim_one()  # RUNNING, then an unknown outcome: NEEDS_REVIEW (inv. 7)
    pulse.start(unknown)
    pulse.complete(unknown, Outcome.UNKNOWN)
    done = pulse.claim_one()
    pulse.start(done)
    pulse.succeed(done)
    lost = pulse.claim_one()  # its worker goes away: the lease lapses (to review: unsafe)
    pulse.start(lost)
    pulse.revoke(session.id)
    pulse.reap()
    PulseDriver(pulse.engine).submit()  # another namespace's task is not counted here

    view = _overview(pulse)

    queues = {q.name: q for q in view.queues}
    assert set(queues) == {"default", "mail"}
    assert queues["mail"].paused and queues["mail"].declared
    assert queues["mail"].tasks == {"WAITING": 1, "LEASED": 0, "RUNNING": 0, "NEEDS_REVIEW": 0}
    assert queues["mail"].oldest_waiting_seconds is not None
    assert not queues["default"].declared and not queues["default"].paused
    assert queues["default"].tasks == {
        "WAITING": 0,
        "LEASED": 0,
        "RUNNING": 0,
        "NEEDS_REVIEW": 2,
    }
    assert queues["default"].oldest_waiting_seconds is None
    assert view.needs_review == 2
    assert view.lapsed_leases_last_hour == 1
    assert view.parked_deliveries == 0
    assert len(view.outcomes_per_minute) == THROUGHPUT_MINUTES
    # One result event per outcome: the success and the two sent to review, all this minute.
    assert sum(view.outcomes_per_minute) == 3


def test_a_task_due_later_is_not_counted_as_waiting_long(pulse: PulseDriver) -> None:
    pulse.submit(delay_seconds=3600)
    (queue,) = _overview(pulse).queues
    assert queue.tasks["WAITING"] == 1
    assert queue.oldest_waiting_seconds is None


def test_worker_sessions_live_first_with_their_attempts_then_ended(pulse: PulseDriver) -> None:
    gone = pulse.session("old-worker")
    pulse.revoke(gone.id, reason="pod deleted")
    pulse.session("worker-1", handlers=["shop.mail"], queues=["default", "mail"])
    pulse.submit("shop.mail")
    pulse.claim_one()

    with pulse.engine.connect() as conn:
        _, sessions = list_sessions(conn, pulse.namespace)

    assert [(s.worker_name, s.state) for s in sessions] == [
        ("worker-1", "ACTIVE"),
        ("old-worker", "REVOKED"),
    ]
    live, ended = sessions
    assert (live.handlers, live.queues, live.live_attempts) == (
        ["shop.mail"],
        ["default", "mail"],
        1,
    )
    assert live.ended_at is None and live.renewed_at <= live.expires_at
    assert ended.ended_at is not None and ended.end_reason == "pod deleted"
    with pulse.engine.connect() as conn:
        assert [s.worker_name for s in list_sessions(conn, pulse.namespace, ended=0)[1]] == [
            "worker-1"
        ]
