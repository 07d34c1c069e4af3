"""A restore fence against work in flight (seed §7, invariant 3), in two processes.

Each test pauses one transaction of this process just after it read the old restore epoch and
just before its write, while another process runs the whole fence; then lets it go. The fence's
epoch commits at once (it locks nothing the paused transaction holds), its per-namespace pass
waits for the paused transaction's session lock, and then cuts what that transaction made: the
grant made under the old epoch is refused from then on, and its task is settled by the lease
rules.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
import sqlalchemy as sa

from orbit_store.db import create_store_engine, run_transaction
from orbit_store.pulse.claim.claim import claim_tasks
from orbit_store.pulse.leases.start import start_attempt
from orbit_store.pulse.model import CompletionStatus, StartRefusal
from orbit_store.recovery.restore_fence import restore_fence

from ..drivers.pulse_driver import PulseDriver
from ..pulse.workers.test_session_races import race

pytestmark = pytest.mark.mariadb_only


def _fence(url: str, started: Any) -> None:
    """The whole `orbit admin restore-fence` on one pooled connection (named to the test)."""
    engine = create_store_engine(url, pool_size=1, max_overflow=0)
    started.put(
        run_transaction(engine, lambda c: c.exec_driver_sql("SELECT CONNECTION_ID()").scalar())
    )
    restore_fence(engine, reason="restored while work was in flight", actor="oncall")
    engine.dispose()


def _attempt_row(pulse: PulseDriver, task_id: str) -> Any:
    [attempt] = pulse.attempts(task_id)
    return attempt


def test_a_start_in_flight_when_the_fence_commits_is_cut_after_it(
    isolated_pulse: PulseDriver,
) -> None:
    pulse = isolated_pulse
    task = pulse.submit()
    grant = pulse.claim_one()
    paused = create_store_engine(pulse.engine.url.render_as_string(hide_password=False))
    start = functools.partial(
        run_transaction,
        paused,
        functools.partial(
            start_attempt, namespace=pulse.namespace, attempt_id=grant.attempt_id, token=grant.token
        ),
    )
    started = race(paused, "UPDATE task_attempts", start, _fence)
    paused.dispose()

    assert getattr(started, "started", None) is True  # it read the old epoch: ordered first
    assert _attempt_row(pulse, task.task_id).outcome == "LAPSED"  # then the fence cut it
    assert pulse.state(task.task_id) == "WAITING"  # safe: it runs again after the reopen
    assert pulse.succeed(grant).status is CompletionStatus.FENCED


def test_a_claim_in_flight_when_the_fence_commits_grants_nothing_usable(
    isolated_pulse: PulseDriver,
) -> None:
    pulse = isolated_pulse
    task = pulse.submit()
    session = pulse.session()
    paused = create_store_engine(pulse.engine.url.render_as_string(hide_password=False))
    claim = functools.partial(
        run_transaction,
        paused,
        functools.partial(
            claim_tasks,
            namespace=pulse.namespace,
            queues_=["default"],
            limit=1,
            worker_session_id=session.id,
        ),
    )
    grants = race(paused, "INSERT INTO task_attempts", claim, _fence)
    paused.dispose()

    assert isinstance(grants, list) and len(grants) == 1  # it read the old epoch: ordered first
    [grant] = grants
    assert pulse.start(grant).refusal is StartRefusal.RESTORE_FENCED
    assert _attempt_row(pulse, task.task_id).outcome == "LAPSED"
    assert pulse.state(task.task_id) == "WAITING"
    with pulse.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT dispatch_open FROM dispatch_fence")).scalar() == 0
