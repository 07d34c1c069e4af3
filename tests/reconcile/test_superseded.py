"""An older generation never overwrites a newer one (invariant 8: what is in effect and its audit
trail follow the resource's generations). The operator's resync timer can run with the body it
had before an edit; on a real API server this was seen to write generation 1 back over 2."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from orbit.reconcile.audited import reconcile_audited
from orbit.reconcile.kinds import KINDS
from orbit.reconcile.resource import Resource, Superseded
from orbit_store.schema import audit_log, queues


def no_secrets(_namespace: str, _name: str) -> None:
    return None


def queue(generation: int, paused: bool, source: str = "operator") -> Resource:
    spec = {
        "paused": paused,
        "priority": 0,
        "retry": {
            "maxAttempts": 3,
            "backoff": {"initialSeconds": 1, "maxSeconds": 300, "multiplier": 2.0},
        },
        "leaseSeconds": 30,
        "safetyDefault": "safe",
        "deletionPolicy": "Block",
    }
    return Resource("Queue", "shop", "payments", spec, generation=generation, source=source)


def reconcile(store: sa.Engine, resource: Resource) -> None:
    with store.begin() as conn:
        reconcile_audited(conn, KINDS["Queue"], resource, no_secrets, actor="orbit-operator")


def test_an_older_generation_is_refused_and_leaves_the_newer_in_effect(store: sa.Engine) -> None:
    reconcile(store, queue(1, paused=False))
    reconcile(store, queue(2, paused=True))

    with pytest.raises(Superseded, match="generation 2 is in effect"):
        reconcile(store, queue(1, paused=False))

    with store.connect() as conn:
        row = conn.execute(sa.select(queues.c.paused, queues.c.spec_generation)).one()
        audited = conn.execute(sa.select(audit_log.c.resource_version)).scalars().all()
    assert (row.paused, row.spec_generation) == (True, 2)
    assert sorted(audited) == [1, 2]


def test_the_same_generation_again_is_a_plain_resync(store: sa.Engine) -> None:
    reconcile(store, queue(2, paused=True))
    reconcile(store, queue(2, paused=True))  # no error, nothing changed


def test_another_source_is_not_compared_by_generation(store: sa.Engine) -> None:
    """`orbit apply` numbers nothing like Kubernetes does: its generation says nothing about
    the operator's."""
    reconcile(store, queue(5, paused=True))
    reconcile(store, queue(1, paused=False, source="manifest"))
    with store.connect() as conn:
        assert conn.execute(sa.select(queues.c.paused)).scalar_one() is False
