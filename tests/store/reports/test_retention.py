"""Seed §7: the retention inventory counts, per data group, what is older than a UTC cutoff and
how much of it is protected (live work, keys inside the dedupe window, unconsumed signals and
inbox events, unacknowledged deliveries, audit) — exactly, on a seeded dataset — and deletes
nothing."""

from __future__ import annotations

import datetime as dt
import json

import sqlalchemy as sa
from typer.testing import CliRunner, Result

from orbit.cli.main import app
from orbit_store.ids import new_id
from orbit_store.schema import (
    execution_gates,
    metadata,
    workflow_definition_versions,
    workflow_definitions,
    workflow_inbox,
    workflow_instances,
    workflow_signals,
)

from ..drivers.delivery_driver import DeliveryDriver
from ..drivers.pulse_driver import PulseDriver

DAY = 86_400
runner = CliRunner()


def _workflow_messages(pulse: PulseDriver, at: dt.datetime) -> None:
    """Two signals and two inbox events received at ``at``: one consumed, one not, each."""
    ns = pulse.namespace
    gate, definition, version, instance = (new_id() for _ in range(4))
    stamp = {"namespace": ns, "created_at": at, "updated_at": at}
    with pulse.engine.begin() as conn:
        conn.execute(
            execution_gates.insert().values(
                id=gate,
                owner_kind="workflow_instance",
                owner_id=instance,
                allowed=True,
                control_version=1,
                **stamp,
            )
        )
        conn.execute(
            workflow_definitions.insert().values(
                id=definition,
                name=f"wf-{definition[-8:]}",
                latest_version=1,
                source="api",
                **stamp,
            )
        )
        conn.execute(
            workflow_definition_versions.insert().values(
                id=version,
                definition_id=definition,
                namespace=ns,
                version=1,
                digest="d" * 64,
                spec={},
                published_at=at,
            )
        )
        conn.execute(
            workflow_instances.insert().values(
                id=instance,
                definition_id=definition,
                definition_version_id=version,
                definition_name=f"wf-{definition[-8:]}",
                version=1,
                event_seq=0,
                start_key=instance,
                start_digest="s" * 64,
                state="RUNNING",
                state_version=1,
                paused=False,
                control_version=1,
                gate_id=gate,
                input={},
                **stamp,
            )
        )
        for n, consumed in enumerate((at, None)):
            conn.execute(
                workflow_signals.insert().values(
                    id=new_id(),
                    instance_id=instance,
                    namespace=ns,
                    signal_id=f"s{n}",
                    name="approve",
                    digest="p" * 64,
                    state="CONSUMED" if consumed else "PENDING",
                    consumed_by_activation_id=new_id() if consumed else None,
                    received_at=at,
                    consumed_at=consumed,
                )
            )
            conn.execute(
                workflow_inbox.insert().values(
                    id=new_id(),
                    namespace=ns,
                    source_event_id=f"{instance}-{n}",
                    consumer="weave",
                    instance_id=instance,
                    kind="task.succeeded",
                    payload={},
                    state="CONSUMED" if consumed else "PENDING",
                    received_at=at,
                    consumed_at=consumed,
                    attempts=0,
                    next_attempt_at=at,
                )
            )


def inventory(pulse: PulseDriver, *args: str) -> Result:
    url = pulse.engine.url.render_as_string(hide_password=False)
    return runner.invoke(app, ["admin", "retention", "inventory", "--database-url", url, *args])


def _row_counts(engine: sa.Engine) -> dict[str, int]:
    with engine.connect() as conn:
        return {
            name: conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()
            for name, table in metadata.tables.items()
        }


def test_inventory_matches_a_seeded_dataset_exactly_and_deletes_nothing(
    pulse: PulseDriver, delivery: DeliveryDriver
) -> None:
    pulse.advance(-10 * DAY)  # ten days ago
    delivery.subscribe()
    cancelled = pulse.submit(idempotency_key="a").task_id
    pulse.cancel(cancelled)  # outcome: result event with a PENDING delivery
    pulse.submit(idempotency_key="b", params={"b": 1})  # still WAITING
    pulse.submit(idempotency_key="c", params={"c": 1})
    grant = pulse.claim_one()
    pulse.start(grant)
    pulse.succeed(grant)  # outcome: result event, delivery acknowledged below
    batch = delivery.pull()
    delivery.ack([e.id for e in batch.events if e.task_id == grant.task_id])
    _workflow_messages(pulse, pulse.now())
    pulse.advance(4 * DAY)  # six days ago: its key is still inside the 7-day dedupe window
    pulse.cancel(pulse.submit(idempotency_key="e", params={"e": 1}).task_id)
    pulse.advance(6 * DAY)  # now: nothing of this era is older than the cutoff
    pulse.cancel(pulse.submit(idempotency_key="f", params={"f": 1}).task_id)
    _workflow_messages(pulse, pulse.now())
    cutoff = (pulse.now(-5 * DAY)).isoformat() + "Z"
    before = _row_counts(pulse.engine)

    result = inventory(pulse, "--before", cutoff, "--namespace", pulse.namespace, "-o", "json")

    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    counts = {g["table"]: (g["older_than_cutoff"], g["protected"]) for g in report["groups"]}
    assert counts == {
        "tasks": (4, 1),  # cancelled, waiting, succeeded, cancelled six days ago; waiting is live
        "task_events": (9, 1),  # 2 + 1 + 4 + 2; the waiting task's one event is protected
        "task_attempts": (1, 0),
        "submission_keys": (4, 1),  # a, b, c expired; e still inside its window
        "workflow_signals": (2, 1),
        "workflow_inbox": (2, 1),
        "result_events": (3, 2),  # the acknowledged one is not protected
        "event_deliveries": (3, 2),
        "audit_log": (3, 3),  # subscription.create + two cancels; audit is append-only
    }
    assert report["deleted"] == 0 and "nothing was deleted" in report["note"]
    assert _row_counts(pulse.engine) == before


def test_the_table_output_says_nothing_was_deleted(pulse: PulseDriver) -> None:
    result = inventory(pulse, "--before", "2026-01-01T00:00:00Z", "-n", pulse.namespace)
    assert result.exit_code == 0, result.output
    assert "Inventory only: nothing was deleted." in result.output


def test_a_cutoff_without_a_time_zone_is_refused_with_the_fix(pulse: PulseDriver) -> None:
    result = inventory(pulse, "--before", "2026-01-01T10:00:00")
    assert result.exit_code == 2
    assert "type instead: 2026-01-01T10:00:00Z" in result.output


def test_a_date_alone_is_midnight_utc(pulse: PulseDriver) -> None:
    result = inventory(pulse, "--before", "2026-01-01", "-n", pulse.namespace)
    assert result.exit_code == 0, result.output
    assert "Rows created before 2026-01-01T00:00:00Z" in result.output
