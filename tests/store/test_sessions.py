"""Worker sessions: renewal keeps the TTL a session registered with; drain stops new leases."""

from __future__ import annotations

import functools

from orbit_store.pulse.sessions import drain_session, renew_session

from .pulse_driver import PulseDriver


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
