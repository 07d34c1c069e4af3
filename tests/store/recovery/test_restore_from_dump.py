"""A real backup and restore (`mariadb-dump`, then `mariadb` reading the dump back) taken in the
middle of a run, then `restore-fence` (seed §7, invariant 3): a worker holding a lease from before
the restore can neither start, renew nor complete anything, nothing is leased until the reopen,
and the fencing token keeps increasing although the restore repeats generation numbers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest
import sqlalchemy as sa

from orbit_store import fencing
from orbit_store.db import create_store_engine
from orbit_store.errors import DispatchClosed
from orbit_store.pulse.model import CompletionStatus, RenewStatus, Safety, StartRefusal
from orbit_store.recovery.restore_fence import restore_fence
from orbit_store.recovery.verify import verify

from ..drivers.pulse_driver import PulseDriver

if TYPE_CHECKING:
    from conftest import Backups  # tests/conftest.py


@pytest.fixture
def database(migrated_database: Callable[[], str]) -> Iterator[tuple[str, sa.Engine]]:
    url = migrated_database()
    engine = create_store_engine(url)
    yield url, engine
    engine.dispose()


def test_a_worker_holding_a_lease_from_before_a_restore_can_do_nothing_after_the_fence_inv3(
    database: tuple[str, sa.Engine], backups: Backups
) -> None:
    url, engine = database
    pulse = PulseDriver(engine)
    pulse.queue("charges")
    pulse.queue("mail")
    charge = pulse.submit(queue="charges", handler="charge", safety=Safety.UNSAFE)
    mail = pulse.submit(queue="mail", handler="mail")
    pulse.session("worker-a", queues=["charges", "mail"])
    charging = pulse.claim_one(queues=["charges"])
    assert pulse.start(charging).started

    dump = backups.take(url)  # the backup: the charge is RUNNING, the mail WAITING

    # The run goes on after the backup: the charge succeeds, the worker leases the mail.
    [renewed] = pulse.heartbeat(charging)
    assert renewed.status is RenewStatus.EXTENDED
    assert pulse.succeed(charging, {"charge_id": "ch_1"}).status is CompletionStatus.APPLIED
    mailing = pulse.claim_one(queues=["mail"])
    assert pulse.start(mailing).started

    backups.restore(url, dump)  # the database is back to the backup: the charge looks RUNNING again
    assert pulse.state(charge.task_id) == "RUNNING"
    assert pulse.state(mail.task_id) == "WAITING"

    report = restore_fence(engine, reason="restored the 02:00 backup", actor="oncall")

    # The worker still holds both leases; neither does anything now.
    assert pulse.start(charging).refusal is StartRefusal.RESTORE_FENCED
    assert pulse.heartbeat(charging)[0].status is RenewStatus.LOST
    assert pulse.succeed(charging, {"charge_id": "ch_1"}).status is CompletionStatus.FENCED
    assert pulse.start(mailing).refusal is StartRefusal.NOT_FOUND  # unknown to the backup
    assert pulse.heartbeat(mailing)[0].status is RenewStatus.LOST
    assert pulse.succeed(mailing).status is CompletionStatus.NOT_FOUND
    # The charge's side effects are unknown to the restored records: review, never a re-run.
    assert pulse.state(charge.task_id) == "NEEDS_REVIEW"
    [charge_attempt] = pulse.attempts(charge.task_id)
    assert charge_attempt.late_result == {"charge_id": "ch_1"}  # evidence for the review

    with pytest.raises(DispatchClosed):
        pulse.claim(queues=["mail"], session_id=pulse.session("worker-b").id)

    pulse.tx(lambda c: fencing.reopen_dispatch(c, reason="ledger reconciled", actor="oncall"))
    again = pulse.claim_one(queues=["mail"], session_id=pulse.session("worker-c").id)
    # The restore repeated the generation; the fencing token still increased.
    assert again.generation == mailing.generation
    assert (again.epoch, again.generation) > (mailing.epoch, mailing.generation)
    assert pulse.start(again).started
    assert pulse.succeed(again).status is CompletionStatus.APPLIED
    assert pulse.state(mail.task_id) == "SUCCEEDED"

    actions = {(row.namespace, row.action) for row in pulse.audit(report.fence.id)}
    assert actions == {
        (fencing.SYSTEM_NAMESPACE, "restore.fence"),
        (pulse.namespace, "restore.fence"),
        (fencing.SYSTEM_NAMESPACE, "restore.reopen"),
    }
    with engine.connect() as conn:
        assert verify(conn).clean


def test_a_restored_database_fenced_later_outgrows_the_fences_lost_with_the_backup(
    database: tuple[str, sa.Engine], backups: Backups
) -> None:
    url, engine = database
    dump = backups.take(url)  # epoch 0
    lost = restore_fence(engine, reason="a fence after the backup", actor="oncall").fence
    backups.restore(url, dump)
    assert PulseDriver(engine).tx(fencing.current_epoch) == 0  # the backup forgot that fence
    fence = restore_fence(engine, reason="restored the backup", actor="oncall").fence
    assert fence.epoch > lost.epoch
