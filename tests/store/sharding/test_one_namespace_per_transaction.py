"""Every transaction touches one namespace (ORBIT.md §3, the seed's routing
unit): the reaper finds work across namespaces with a read, then decides each item in a
transaction of its own namespace; a token hash is unique per namespace only."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import event

from orbit_store.access.credentials import authenticate, create_token, put_credential_token
from orbit_store.db import create_store_engine, run_transaction
from orbit_store.errors import Conflict
from orbit_store.pulse import service

from ..drivers.pulse_driver import PulseDriver


@pytest.fixture
def fresh_engine(migrated_database: Callable[[], str]) -> Iterator[sa.Engine]:
    """A database of its own: the reaper below runs over every namespace in it."""
    engine = create_store_engine(migrated_database())
    yield engine
    engine.dispose()


class TransactionLog:
    """The parameters each transaction of an engine sent, transaction by transaction."""

    def __init__(self, engine: sa.Engine) -> None:
        self.transactions: list[set[str]] = []
        event.listen(engine, "begin", self._begin)
        event.listen(engine, "before_cursor_execute", self._statement)

    def _begin(self, conn: sa.Connection) -> None:
        conn.info["orbit_params"] = set()
        self.transactions.append(conn.info["orbit_params"])

    def _statement(self, conn: Any, cursor: Any, statement: str, params: Any, *args: Any) -> None:
        values = params.values() if isinstance(params, dict) else params or ()
        if "orbit_params" in conn.info:
            conn.info["orbit_params"].update(str(v) for v in values)


def _one_namespace_of_each_kind(pulse: PulseDriver) -> set[str]:
    """An expiring session, a lease that lapses, a task past its deadline; returns their ids."""
    session = pulse.session("short-lived", ttl_seconds=5)
    pulse.submit()
    grant = pulse.claim_one(session_id=pulse.session("keeper", ttl_seconds=600).id)
    overdue = pulse.submit(deadline_at=pulse.now(seconds=10))
    return {session.id, grant.task_id, grant.attempt_id, overdue.task_id, pulse.namespace}


def test_a_reaper_pass_works_one_namespace_per_transaction(fresh_engine: sa.Engine) -> None:
    first, second = PulseDriver(fresh_engine), PulseDriver(fresh_engine)
    ids = {first.namespace: _one_namespace_of_each_kind(first)}
    ids[second.namespace] = _one_namespace_of_each_kind(second)
    skewed = first.engine.execution_options(orbit_clock_skew_seconds=60)
    log = TransactionLog(fresh_engine)
    report = service.reap(skewed)
    assert (report.sessions_expired, report.leases_lapsed, report.deadlines_failed) == (2, 2, 2)
    touched = [{ns for ns, owned in ids.items() if params & owned} for params in log.transactions]
    assert all(len(t) <= 1 for t in touched), touched
    assert sum(len(t) == 1 for t in touched) >= 6, "each decision is a transaction"


def test_the_same_token_in_two_namespaces_is_accepted_in_each(pulse: PulseDriver) -> None:
    """Defect 7: the second namespace's credential used to fail on a global unique key, which
    also told its admin that the token existed elsewhere."""
    token = "orb_shared_token_0123456789abcdef"
    other = PulseDriver(pulse.base_engine)
    for driver in (pulse, other):
        driver.tx(
            functools.partial(
                create_token, namespace=driver.namespace, name="ci", roles=["submit"], token=token
            )
        )
    with pulse.engine.connect() as conn:
        assert authenticate(conn, token, pulse.namespace).namespace == pulse.namespace  # type: ignore[union-attr]
        assert authenticate(conn, token, other.namespace).namespace == other.namespace  # type: ignore[union-attr]
        assert authenticate(conn, token) is None, "ambiguous without a namespace"


def test_two_credentials_of_one_namespace_may_not_share_a_token(pulse: PulseDriver) -> None:
    token = "orb_shared_token_0123456789abcdef"
    put = functools.partial(
        put_credential_token,
        namespace=pulse.namespace,
        roles=["work"],
        token=token,
        source="manifest",
    )
    run_transaction(pulse.engine, functools.partial(put, name="first"))
    with pytest.raises(Conflict, match=r"'first' .* already uses this token"):
        run_transaction(pulse.engine, functools.partial(put, name="second"))


def test_a_session_naming_another_namespaces_pod_reads_only_its_own_namespace(
    pulse: PulseDriver,
) -> None:
    """Cluster mode: a worker of ``pulse``'s namespace names a pod registered in another
    namespace. It is refused exactly like an unknown pod, and the lookup itself is confined to
    the session's namespace (it never locks the other namespace's row)."""
    from orbit_store.pulse.workers.pods import PodInfo, register_pod
    from orbit_store.pulse.workers.sessions import register_session

    other = PulseDriver(pulse.base_engine)
    pod = PodInfo("uid-" + other.namespace, other.namespace, "w-0", "pool", None, "Running")
    other.tx(lambda c: register_pod(c, pod))
    statements: list[tuple[str, Any]] = []

    def seen(conn: Any, cursor: Any, statement: str, params: Any, *args: Any) -> None:
        if "worker_pods" in statement:
            statements.append((statement, params))

    def register(uid: str) -> Any:
        return functools.partial(
            register_session,
            namespace=pulse.namespace,
            worker_name="w",
            queues=["default"],
            ttl_seconds=60,
            pod_uid=uid,
            require_registered_pod=True,
        )

    event.listen(pulse.base_engine, "before_cursor_execute", seen)
    try:
        with pytest.raises(Conflict) as theirs:
            pulse.tx(register(pod.uid))
    finally:
        event.remove(pulse.base_engine, "before_cursor_execute", seen)
    with pytest.raises(Conflict) as unknown:
        pulse.tx(register("uid-nobody"))
    assert str(theirs.value).replace(pod.uid, "X") == str(unknown.value).replace("uid-nobody", "X")
    ((_, params),) = statements
    values = params.values() if isinstance(params, dict) else params
    assert pulse.namespace in [str(v) for v in values], "the lookup names the session's namespace"
