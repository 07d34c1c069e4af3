"""The operator killed in the middle of a reconcile (SIGKILL while its MySQL transaction waits on
a row lock), then started again: nothing of the interrupted change was half written, and the new
operator applies the change once — row, status, observedGeneration and one audit row."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from orbit_store.schema import audit_log, queues

from .conftest import Cluster, Kube, Operators, apply, orbit_resource, start_operator, wait_for

pytestmark = pytest.mark.slow


def queue_row(engine: sa.Engine, namespace: str, name: str) -> Any:
    with engine.connect() as conn:
        return conn.execute(
            sa.select(queues).where(queues.c.namespace == namespace, queues.c.name == name)
        ).one()


def lock_waits(engine: sa.Engine, own_id: int) -> int:
    """Transactions of other connections waiting for a row lock."""
    with engine.connect() as conn:
        return int(
            conn.execute(
                sa.text(
                    "SELECT COUNT(*) FROM information_schema.INNODB_TRX "
                    "WHERE trx_state = 'LOCK WAIT' AND trx_mysql_thread_id <> :own"
                ),
                {"own": own_id},
            ).scalar_one()
        )


def applied_generations(engine: sa.Engine, namespace: str) -> list[str]:
    with engine.connect() as conn:
        return list(
            conn.execute(
                sa.select(audit_log.c.reason)
                .where(audit_log.c.namespace == namespace, audit_log.c.actor == "orbit-operator")
                .order_by(audit_log.c.id)
            ).scalars()
        )


def test_an_operator_killed_mid_reconcile_leaves_nothing_half_done(
    cluster: Cluster,
    api: Kube,
    engine: sa.Engine,
    database_url: str,
    operators: Operators,
    tmp_path: Path,
) -> None:
    operators.stop()  # this test runs its own, one after the other
    namespace = f"restart-{uuid.uuid4().hex[:8]}"
    first = start_operator(cluster, database_url, tmp_path / "first.log", resync_seconds=600)
    try:
        apply(cluster, orbit_resource("Queue", namespace, "q", {"priority": 1}))
        api.wait_ready("Queue", namespace, "q")

        with engine.connect() as conn:
            own_id = int(conn.execute(sa.text("SELECT CONNECTION_ID()")).scalar_one())
            conn.execute(
                sa.select(queues.c.id)
                .where(queues.c.namespace == namespace, queues.c.name == "q")
                .with_for_update()
            ).one()
            cluster.kubectl(
                "-n", namespace, "patch", "queue", "q", "--type=merge",
                "-p", '{"spec":{"priority":2}}',
            )  # fmt: skip
            wait_for(
                "the operator's reconcile waits on the row", lambda: lock_waits(engine, own_id)
            )
            first.kill()
            conn.rollback()
    finally:
        first.stop()

    stored = queue_row(engine, namespace, "q")
    assert (stored.priority, stored.spec_generation) == (1, 1)
    assert (api.orbit("Queue", namespace, "q") or {})["status"]["observedGeneration"] == 1

    second = start_operator(cluster, database_url, tmp_path / "second.log", resync_seconds=600)
    try:
        wait_for(
            "generation 2 in effect",
            lambda: (
                (o := api.orbit("Queue", namespace, "q"))
                and o["status"].get("observedGeneration") == 2
            ),
        )
    finally:
        second.stop()
    stored = queue_row(engine, namespace, "q")
    assert (stored.priority, stored.spec_generation) == (2, 2)
    reasons = applied_generations(engine, namespace)
    assert [r for r in reasons if "generation 2" in r] == ["operator applied generation 2"]
    assert [r for r in reasons if "generation 1" in r] == ["operator applied generation 1"]
