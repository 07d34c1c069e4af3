"""Concurrency keys are semaphores whose limit belongs to the key: tasks
sharing a key never hold more permits than the limit in force, whatever each one declared."""

from __future__ import annotations

import sqlalchemy as sa

from orbit_store.pulse.model import Safety
from orbit_store.schema import concurrency_keys

from ...drivers.pulse_driver import PulseDriver


def _key(pulse: PulseDriver, key: str = "k") -> sa.Row:  # type: ignore[type-arg]
    with pulse.engine.connect() as conn:
        return conn.execute(
            sa.select(concurrency_keys).where(
                concurrency_keys.c.namespace == pulse.namespace,
                concurrency_keys.c.concurrency_key == key,
            )
        ).one()


def _run(pulse: PulseDriver, limit: int = 10) -> list:  # type: ignore[type-arg]
    grants = pulse.claim(limit=limit)
    for grant in grants:
        assert pulse.start(grant).started
    return grants


def test_concurrency_limit_is_the_keys_not_a_per_task_snapshot(pulse: PulseDriver) -> None:
    """Defect 8: two tasks hold a key under limit 2; a task declaring limit 1 makes 1 the
    limit of every task of the key — it runs only when no permit is held, not beside one."""
    pulse.submit(concurrency_key="k", concurrency_limit=2)
    pulse.submit(concurrency_key="k", concurrency_limit=2)
    first, second = _run(pulse)
    third = pulse.submit(concurrency_key="k", concurrency_limit=1)
    assert _key(pulse).permit_limit == 1
    pulse.succeed(first)
    assert pulse.claim() == [], "one permit is still held: the limit is 1"
    pulse.succeed(second)
    assert pulse.claim_one().task_id == third.task_id


def test_a_submission_without_a_limit_uses_the_keys(pulse: PulseDriver) -> None:
    pulse.submit(concurrency_key="k", concurrency_limit=3)
    pulse.submit(concurrency_key="k")
    pulse.submit(concurrency_key="k")
    assert _key(pulse).permit_limit == 3
    assert len(pulse.claim(limit=10)) == 3


def test_raising_a_keys_limit_releases_blocked_tasks_at_once(pulse: PulseDriver) -> None:
    for _ in range(4):
        pulse.submit(concurrency_key="k", concurrency_limit=1)
    assert len(pulse.claim(limit=10)) == 1
    pulse.submit(concurrency_key="k", concurrency_limit=3)
    assert len(pulse.claim(limit=10)) == 2
    assert _key(pulse).held == 3


def test_lowering_a_limit_revokes_no_permit_and_grants_none_until_below_it(
    pulse: PulseDriver,
) -> None:
    pulse.submit(concurrency_key="k", concurrency_limit=3)
    pulse.submit(concurrency_key="k")
    pulse.submit(concurrency_key="k")
    held = _run(pulse)
    assert len(held) == 3
    pulse.submit(concurrency_key="k", concurrency_limit=1)
    for grant in held[:2]:
        pulse.succeed(grant)
        assert pulse.claim() == [], "held permits are at or above the new limit"
    pulse.succeed(held[2])
    assert len(pulse.claim()) == 1  # (verify at teardown accepts the temporary excess)


def test_a_lapsed_lease_gives_its_permit_back(pulse: PulseDriver) -> None:
    pulse.submit(concurrency_key="k", safety=Safety.UNSAFE)
    waiting = pulse.submit(concurrency_key="k")
    pulse.start(pulse.claim_one())
    pulse.advance(31)
    pulse.reap()
    assert pulse.claim_one().task_id == waiting.task_id


def test_a_cancelled_ready_task_passes_its_permit_on(pulse: PulseDriver) -> None:
    ready = pulse.submit(concurrency_key="k")
    blocked = pulse.submit(concurrency_key="k")
    pulse.cancel(ready.task_id)
    assert pulse.claim_one().task_id == blocked.task_id
