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


def test_cluster_mode_accepts_sessions_only_from_registered_live_pods(pulse: PulseDriver) -> None:
    import pytest

    from orbit_store.errors import Conflict
    from orbit_store.pulse.pods import PodInfo, forget_pod, register_pod
    from orbit_store.pulse.sessions import register_session

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
