"""Why a WAITING task has not started, in causes a person can act on (the console's "why it
waits"): each path off the claim (scheduled, gate closed, concurrency key) and each check a
claim makes (queue paused, max-running quota full, a live worker for its queue and handler)."""

from __future__ import annotations

from orbit_store.pulse.views.waiting import waiting_causes

from ...drivers.pulse_driver import PulseDriver


def _causes(pulse: PulseDriver, task_id: str) -> list[tuple[str, str]]:
    with pulse.engine.connect() as conn:
        return [(c.kind, c.detail) for c in waiting_causes(conn, pulse.namespace, task_id)]


def test_a_ready_task_with_a_live_worker_waits_for_nothing(pulse: PulseDriver) -> None:
    pulse.session()
    assert _causes(pulse, pulse.submit().task_id) == []


def test_no_live_worker_for_its_queue_and_handler(pulse: PulseDriver) -> None:
    pulse.session(handlers=["shop.other"])
    task = pulse.submit("shop.mail").task_id
    assert _causes(pulse, task) == [
        ("no_live_worker", "no live worker session serves queue 'default' with handler 'shop.mail'")
    ]


def test_scheduled_and_paused_queue_together(pulse: PulseDriver) -> None:
    pulse.session(queues=["mail"])
    pulse.queue("mail", paused=True)
    task = pulse.submit(queue="mail", delay_seconds=3600).task_id
    kinds = [kind for kind, _ in _causes(pulse, task)]
    assert kinds == ["scheduled", "queue_paused"]


def test_concurrency_key_with_no_free_permit(pulse: PulseDriver) -> None:
    pulse.session()
    pulse.submit(concurrency_key="account-7", concurrency_limit=1)
    second = pulse.submit(concurrency_key="account-7", concurrency_limit=1).task_id
    assert _causes(pulse, second) == [
        ("concurrency_limit", "concurrency key 'account-7' has no free permit: 1 of 1 permits held")
    ]


def test_gate_closed_names_its_owner(pulse: PulseDriver) -> None:
    pulse.session()
    gate = pulse.gate("wf-1")
    pulse.set_gate(gate, allowed=False)
    task = pulse.submit(gate_id=gate).task_id
    (cause,) = _causes(pulse, task)
    assert cause[0] == "gate_closed" and "wf-1 is paused" in cause[1]


def test_a_full_max_running_quota(pulse: PulseDriver) -> None:
    pulse.quota("one-at-a-time", queue="default", max_running=1)
    pulse.session()
    pulse.submit()
    pulse.claim_one()
    waiting = pulse.submit().task_id
    assert _causes(pulse, waiting) == [
        (
            "quota_full",
            "quota 'one-at-a-time' allows 1 running tasks in queue 'default' and 1 run",
        )
    ]


def test_a_finished_task_waits_for_nothing(pulse: PulseDriver) -> None:
    pulse.session()
    task = pulse.submit().task_id
    pulse.cancel(task)
    assert _causes(pulse, task) == []
