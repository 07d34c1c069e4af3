"""Execution gates through their one entry point, ``orbit_store.pulse.limits.gates`` (invariant 12):
closing a gate takes its WAITING tasks off the claim path and opening it puts them back, in
the same transaction, at a cost in proportion to that gate's tasks only."""

from __future__ import annotations

import functools
import multiprocessing
from typing import Any

import pytest
import sqlalchemy as sa

from orbit_store.clock import db_now
from orbit_store.db import create_store_engine, run_transaction
from orbit_store.errors import Conflict, NotFound, StaleControlVersion
from orbit_store.pulse.limits.gates import create_gate, set_gate
from orbit_store.pulse.model import CompletionStatus, RenewStatus

from ...conftest import rows_read
from ...drivers.pulse_driver import PulseDriver


def test_a_new_gate_is_open_at_control_version_1(pulse: PulseDriver) -> None:
    gate = pulse.gate("instance-1")
    state = pulse.set_gate(gate, allowed=True)
    assert (state.allowed, state.control_version, state.changed) == (True, 1, False)


def test_creating_a_gate_twice_for_one_owner_returns_the_same_gate(pulse: PulseDriver) -> None:
    assert pulse.gate("instance-1") == pulse.gate("instance-1")


def test_each_flip_bumps_the_control_version(pulse: PulseDriver) -> None:
    gate = pulse.gate()
    assert pulse.set_gate(gate, allowed=False).control_version == 2
    assert pulse.set_gate(gate, allowed=True, expected_control_version=2).control_version == 3


def test_a_stale_control_version_is_a_typed_conflict(pulse: PulseDriver) -> None:
    gate = pulse.gate()
    pulse.set_gate(gate, allowed=False)
    with pytest.raises(StaleControlVersion) as raised:
        pulse.set_gate(gate, allowed=True, expected_control_version=1)
    assert isinstance(raised.value, Conflict) and raised.value.actual == 2
    assert pulse.claim() == []


def test_a_gate_of_another_namespace_is_not_found(pulse: PulseDriver) -> None:
    gate = PulseDriver(pulse.base_engine).gate()
    with pytest.raises(NotFound):
        pulse.set_gate(gate, allowed=False)


def test_closing_takes_waiting_tasks_off_the_claim_path_and_opening_puts_them_back(
    pulse: PulseDriver,
) -> None:
    gate = pulse.gate()
    tasks = pulse.submit_many(3, gate_id=gate)
    pulse.set_gate(gate, allowed=False)
    assert {pulse.task(t).wait_path for t in tasks} == {"BLOCKED_GATE"}
    assert pulse.claim() == []
    pulse.set_gate(gate, allowed=True)
    assert {g.task_id for g in pulse.claim()} == set(tasks)


def test_closing_a_gate_gives_its_tasks_permits_to_other_tasks_of_the_key(
    pulse: PulseDriver,
) -> None:
    gate = pulse.gate()
    paused = pulse.submit(gate_id=gate, concurrency_key="k")
    other = pulse.submit(concurrency_key="k")
    pulse.set_gate(gate, allowed=False)
    assert pulse.claim_one().task_id == other.task_id
    pulse.set_gate(gate, allowed=True)
    assert pulse.task(paused.task_id).wait_path == "BLOCKED_KEY"


def test_a_scheduled_task_of_a_closed_gate_stays_blocked_when_it_falls_due(
    pulse: PulseDriver,
) -> None:
    gate = pulse.gate()
    task = pulse.submit(gate_id=gate, delay_seconds=5)
    pulse.set_gate(gate, allowed=False)
    pulse.advance(6)
    assert pulse.claim() == []
    assert pulse.task(task.task_id).wait_path == "BLOCKED_GATE"
    pulse.set_gate(gate, allowed=True)
    assert pulse.claim_one().task_id == task.task_id


@pytest.mark.mariadb_only
def test_a_gate_flip_costs_its_own_tasks_not_the_namespaces(engine: sa.Engine) -> None:
    def cost(others: int) -> int:
        pulse = PulseDriver(engine)
        gate = pulse.gate()
        pulse.submit_many(5, gate_id=gate)
        pulse.submit_many(others)
        other_gate = pulse.gate()
        pulse.submit_many(others, gate_id=other_gate)
        flip = functools.partial(set_gate, namespace=pulse.namespace, gate_id=gate, allowed=False)
        return rows_read(engine, flip)

    small, large = cost(10), cost(400)
    assert large <= small + 2, (small, large)


def test_create_gate_takes_the_owner_and_time(pulse: PulseDriver) -> None:
    gate = pulse.tx(
        lambda c: create_gate(
            c,
            namespace=pulse.namespace,
            owner_kind="workflow_instance",
            owner_id="wi-1",
            now=db_now(c),
        )
    )
    assert pulse.set_gate(gate, allowed=False).changed


def test_closing_a_gate_does_not_interrupt_its_running_attempts(pulse: PulseDriver) -> None:
    gate = pulse.gate()
    task = pulse.submit(gate_id=gate)
    grant = pulse.claim_one()
    pulse.start(grant)
    pulse.set_gate(gate, allowed=False)
    assert pulse.state(task.task_id) == "RUNNING"
    pulse.advance(25)
    assert pulse.heartbeat(grant)[0].status is RenewStatus.EXTENDED
    pulse.advance(25)  # past the first lease: alive by its renewal
    assert pulse.reap().leases_lapsed == 0
    assert pulse.succeed(grant, {"ok": True}).status is CompletionStatus.APPLIED
    assert pulse.state(task.task_id) == "SUCCEEDED"


def _gates_in_process(url: str, namespace: str, owners: list[str], barrier: Any) -> list[str]:
    engine = create_store_engine(url)
    try:
        ids = []
        for owner in owners:
            barrier.wait(timeout=60)  # a process that failed leaves the others a broken barrier
            ids.append(
                run_transaction(
                    engine,
                    lambda c, o=owner: create_gate(
                        c, namespace=namespace, owner_kind="test", owner_id=o, now=db_now(c)
                    ),
                )
            )
        return ids
    finally:
        engine.dispose()


@pytest.mark.mariadb_only
def test_processes_asking_at_once_for_one_owners_gate_all_get_the_same_gate(
    pulse: PulseDriver, mariadb_url: str
) -> None:
    """create_gate is idempotent under races too: the loser of a concurrent first creation
    gets the winner's gate, never a duplicate-key error (a workflow start retried by two
    servers, or two callers of one owner)."""
    owners = [f"owner-{n}" for n in range(20)]
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(6)
        with ctx.Pool(6) as pool:
            results = pool.starmap(
                _gates_in_process, [(mariadb_url, pulse.namespace, owners, barrier)] * 6
            )
    for per_owner in zip(*results, strict=True):
        assert len(set(per_owner)) == 1, per_owner
