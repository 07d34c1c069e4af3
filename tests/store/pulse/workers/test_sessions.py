"""Worker sessions: renewal keeps the TTL a session registered with; drain stops new leases."""

from __future__ import annotations

import functools

import pytest

from orbit_store.errors import Conflict
from orbit_store.pulse.model import LeaseGrant, RenewStatus, Safety
from orbit_store.pulse.workers.sessions import close_session, drain_session, renew_session

from ...drivers.pulse_driver import PulseDriver


def test_renewal_extends_a_session_by_its_own_ttl(pulse: PulseDriver) -> None:
    session = pulse.session(ttl_seconds=300)
    pulse.advance(200)
    renewed = pulse.tx(
        functools.partial(renew_session, namespace=pulse.namespace, session_id=session.id)
    )
    assert 299 <= (renewed.expires_at - pulse.now()).total_seconds() <= 300
    pulse.advance(250)  # 450 s after registering: alive only because of the renewal
    assert pulse.reap().sessions_expired == 0


def test_drain_answers_with_the_draining_state(pulse: PulseDriver) -> None:
    session = pulse.session()
    drained = pulse.tx(
        functools.partial(drain_session, namespace=pulse.namespace, session_id=session.id)
    )
    assert drained.state == "DRAINING"


def test_cluster_mode_accepts_sessions_only_from_registered_live_pods(pulse: PulseDriver) -> None:
    import pytest

    from orbit_store.errors import Conflict
    from orbit_store.pulse.workers.pods import PodInfo, forget_pod, register_pod
    from orbit_store.pulse.workers.sessions import register_session

    def open_session(pod_uid: str | None) -> object:
        return pulse.tx(
            functools.partial(
                register_session,
                namespace=pulse.namespace,
                worker_name="w",
                queues=["default"],
                pod_uid=pod_uid,
                require_registered_pod=True,
            )
        )

    with pytest.raises(Conflict, match="not a registered worker pod"):
        open_session("unknown-uid")
    pod = PodInfo(
        uid=f"uid-{pulse.namespace}",
        namespace=pulse.namespace,
        pod_name="w-1",
        pool="shop-workers",
        node="node-a",
        phase="Running",
    )
    pulse.tx(lambda c: register_pod(c, pod))
    open_session(pod.uid)
    assert pulse.tx(lambda c: forget_pod(c, pod.uid, "pod deleted")) == 1
    with pytest.raises(Conflict):
        open_session(pod.uid)


def _running(pulse: PulseDriver, session_id: str) -> dict[str, LeaseGrant]:
    """A safe and an unsafe task, both RUNNING under the given session; by safety."""
    pulse.submit(safety=Safety.SAFE)
    pulse.submit(safety=Safety.UNSAFE)
    grants = pulse.claim(limit=2, session_id=session_id)
    for grant in grants:
        pulse.start(grant)
    return {pulse.task(g.task_id).safety: g for g in grants}


def test_re_registering_a_worker_name_ends_its_older_session_and_lapses_its_leases_now(
    pulse: PulseDriver,
) -> None:
    older = pulse.session("worker-1")
    held = _running(pulse, older.id)
    newer = pulse.session("worker-1")
    assert (newer.generation, older.generation) == (2, 1)
    with pytest.raises(Conflict, match="CLOSED"):
        pulse.tx(functools.partial(renew_session, namespace=pulse.namespace, session_id=older.id))
    assert [r.status for r in pulse.heartbeat(*held.values())] == [RenewStatus.LOST] * 2
    assert pulse.reap().leases_lapsed == 2, "at once: the clock has not moved"
    assert pulse.state(held["safe"].task_id) == "WAITING"
    assert pulse.state(held["unsafe"].task_id) == "NEEDS_REVIEW"
    pulse.advance(60)  # past the retry backoff: the newer session runs the safe task again
    assert pulse.claim_one(session_id=newer.id).task_id == held["safe"].task_id


def test_closing_a_session_lapses_the_leases_it_still_holds_at_once(pulse: PulseDriver) -> None:
    session = pulse.session("worker-1")
    held = _running(pulse, session.id)
    pulse.tx(functools.partial(close_session, namespace=pulse.namespace, session_id=session.id))
    assert pulse.reap().leases_lapsed == 2, "at once: the clock has not moved"
    assert pulse.state(held["safe"].task_id) == "WAITING"
    assert pulse.state(held["unsafe"].task_id) == "NEEDS_REVIEW"


def test_renewing_an_ended_session_is_a_conflict_that_renews_nothing(pulse: PulseDriver) -> None:
    session = pulse.session("worker-1")
    pulse.tx(functools.partial(close_session, namespace=pulse.namespace, session_id=session.id))
    with pytest.raises(Conflict, match="register a new one"):
        pulse.tx(functools.partial(renew_session, namespace=pulse.namespace, session_id=session.id))


def test_a_late_copy_of_a_registration_returns_its_session_and_ends_nothing(
    pulse: PulseDriver,
) -> None:
    """A registration the client resent (its first try timed out) may reach the database after
    the resend opened the session the worker now uses. The copy carries the same key: it
    answers that session instead of replacing it, whose leases would lapse under a worker that
    is still running them (found by the chaos run: a safe task re-run after it finished)."""
    session = pulse.session(registration_key="reg-1")
    pulse.submit()
    grant = pulse.claim_one(session_id=session.id)
    late = pulse.session(registration_key="reg-1")
    assert late == session
    assert pulse.attempts(grant.task_id)[0].state == "LEASED", "its lease was not cut"


def test_a_new_registration_key_still_replaces_the_older_session(pulse: PulseDriver) -> None:
    first = pulse.session(registration_key="reg-1")
    second = pulse.session(registration_key="reg-2")
    assert second.id != first.id and second.generation == first.generation + 1


def test_a_registration_key_of_another_worker_s_session_is_refused(pulse: PulseDriver) -> None:
    pulse.session("worker-1", registration_key="reg-1")
    with pytest.raises(Conflict, match="registration_key"):
        pulse.session("worker-2", registration_key="reg-1")
