"""Workflow starts in groups (``start_group``, seed §5, invariants 6, 9 and 10): concurrent
starts of one namespace in one transaction for a constant number of statements, each answered
as alone — a refused start fails alone, a start key is started once, within a group and
across groups."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import sqlalchemy as sa

from orbit_store.errors import IdempotencyConflict, InvalidInput, NotFound, QuotaExceeded
from orbit_store.pulse.limits.quota_declarations import QuotaSpec, put_quota
from orbit_store.weave.model import StartResult
from orbit_store.weave.start import StartRequest
from orbit_store.weave.start_group import Answer, start_group

from ..drivers.sent_statements import sent_statements
from ..drivers.weave_driver import WeaveDriver, task_step

TWO_STEPS = {"steps": [task_step("first"), task_step("second", dependsOn=["first"])]}
ROUTED = {"steps": [task_step("first", queue="${input.queue}")]}
#: A wait and a task at once: the wait needs the single path, in the group's transaction.
WAIT_AND_ROUTED = {
    "steps": [
        {"name": "approval", "wait": {"signal": "go"}},
        task_step("first", queue="${input.queue}"),
    ]
}
TYPED = {
    "inputSchema": {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}},
    "steps": [task_step("first")],
}


def _request(
    weave: WeaveDriver, definition: str, input: Any = None, key: str | None = None
) -> StartRequest:
    return StartRequest(
        namespace=weave.namespace,
        definition=definition,
        start_key=key or str(uuid.uuid4()),
        input={} if input is None else input,
        started_by="tester",
    )


def _started(answer: Answer) -> StartResult:
    assert not isinstance(answer, Exception), answer
    return answer[0]


@pytest.mark.mariadb_only
def test_a_group_costs_the_same_statements_for_2_8_and_64_starts(weave: WeaveDriver) -> None:
    weave.publish("two", TWO_STEPS)
    start_group(weave.engine, weave.namespace, [_request(weave, "two") for _ in range(2)])
    counts = {}
    for size in (2, 8, 64):
        requests = [_request(weave, "two") for _ in range(size)]
        with sent_statements(weave.base_engine) as sent:
            answers = start_group(weave.engine, weave.namespace, requests)
        started = [_started(a) for a in answers]
        assert [s.replayed for s in started] == [False] * size
        assert len({s.instance_id for s in started}) == size
        for result in started:
            assert weave.step_states(result.instance_id) == {"first": "ACTIVE", "second": "PENDING"}
            assert weave.history(result.instance_id)[0] == "instance.started"
        counts[size] = len(sent)
    assert counts[2] == counts[8] == counts[64], counts


def test_a_poisoned_start_fails_alone_and_its_group_starts(weave: WeaveDriver) -> None:
    """An unknown definition, an input its schema refuses, a first task over its quota: each
    is its own answer, as alone; the others of the group start."""
    weave.publish("two", TWO_STEPS)
    weave.publish("typed", TYPED)
    weave.publish("routed", ROUTED)
    weave.queue("full")
    weave.tx(lambda c: put_quota(c, weave.namespace, QuotaSpec("q", queue="full", max_waiting=0)))
    good = [_request(weave, "two") for _ in range(3)]
    poisoned = [
        _request(weave, "nowhere"),
        _request(weave, "typed", {"n": "not a number"}),
        _request(weave, "routed", {"queue": "full"}),
    ]
    answers = start_group(weave.engine, weave.namespace, [good[0], *poisoned, *good[1:]])
    assert isinstance(answers[1], NotFound)
    assert isinstance(answers[2], InvalidInput)
    lone = _request(weave, "routed", {"queue": "full"})
    (alone,) = start_group(weave.engine, weave.namespace, [lone])
    assert type(answers[3]) is type(alone)
    if not isinstance(answers[3], Exception):
        assert not isinstance(alone, Exception)
        assert answers[3][0].state == alone[0].state
    for answer in (answers[0], *answers[4:]):
        assert weave.step_states(_started(answer).instance_id)["first"] == "ACTIVE"


def _full_quota(weave: WeaveDriver) -> None:
    weave.queue("full")
    weave.tx(lambda c: put_quota(c, weave.namespace, QuotaSpec("q", queue="full", max_waiting=0)))


def _start_counting(
    weave: WeaveDriver, requests: list[StartRequest]
) -> tuple[list[Answer], int, list[str]]:
    """The group's answers, the transactions that committed and the statements sent."""
    commits: list[object] = []

    def committed(conn: Any) -> None:
        commits.append(conn)

    sa.event.listen(weave.base_engine, "commit", committed)
    try:
        with sent_statements(weave.base_engine) as sent:
            answers = start_group(weave.engine, weave.namespace, requests)
    finally:
        sa.event.remove(weave.base_engine, "commit", committed)
    return answers, len(commits), sent


def test_a_start_its_quota_refuses_leaves_the_group_which_commits_once(
    weave: WeaveDriver,
) -> None:
    """Pulse refusing one first task takes only that start out: the seven others start in one
    transaction (one multi-row INSERT of instances that commits), the refused one alone gets
    the quota's refusal, as ``service.start`` raises it."""
    weave.publish("two", TWO_STEPS)
    weave.publish("routed", ROUTED)
    _full_quota(weave)
    requests = [_request(weave, "two") for _ in range(8)]
    requests[2] = _request(weave, "routed", {"queue": "full"})
    answers, commits, sent = _start_counting(weave, requests)
    assert isinstance(answers[2], QuotaExceeded), answers[2]
    started = [_started(a) for p, a in enumerate(answers) if p != 2]
    assert len({s.instance_id for s in started}) == 7
    for result in started:
        assert weave.step_states(result.instance_id)["first"] == "ACTIVE"
    assert commits == 1, "the seven commit together; the refused one writes nothing"
    inserts = [s for s in sent if s.lstrip().upper().startswith("INSERT INTO WORKFLOW_INSTANCES")]
    assert len(inserts) == 3, "the refused group, the group of seven, the refused one alone"


def test_a_start_advanced_alone_in_the_group_and_refused_leaves_it_too(
    weave: WeaveDriver,
) -> None:
    """A start whose wait needs the single path, in the group's transaction, and whose task
    the quota refuses there: it leaves the group as a refused set item does."""
    weave.publish("two", TWO_STEPS)
    weave.publish("mixed", WAIT_AND_ROUTED)
    _full_quota(weave)
    requests = [_request(weave, "two") for _ in range(4)]
    requests[1] = _request(weave, "mixed", {"queue": "full"})
    answers, commits, _ = _start_counting(weave, requests)
    assert isinstance(answers[1], QuotaExceeded), answers[1]
    for answer in (answers[0], *answers[2:]):
        assert weave.step_states(_started(answer).instance_id)["first"] == "ACTIVE"
    assert commits == 1, "the three commit together"


def test_a_start_key_is_started_once_within_a_group(weave: WeaveDriver) -> None:
    weave.publish("two", TWO_STEPS)
    first = _request(weave, "two", {"n": 1}, key="k")
    again = _request(weave, "two", {"n": 1}, key="k")
    other = _request(weave, "two", {"n": 2}, key="k")
    answers = start_group(weave.engine, weave.namespace, [first, again, other])
    started, replayed = _started(answers[0]), _started(answers[1])
    assert (started.replayed, replayed.replayed) == (False, True)
    assert replayed.instance_id == started.instance_id
    assert isinstance(answers[2], IdempotencyConflict)
    assert len(weave.tasks_of(started.instance_id)) == 1


def test_a_start_key_is_started_once_across_groups(weave: WeaveDriver) -> None:
    weave.publish("two", TWO_STEPS)
    keys = [f"k{i}" for i in range(3)]
    first = start_group(
        weave.engine, weave.namespace, [_request(weave, "two", {"n": 1}, key=k) for k in keys]
    )
    second = start_group(
        weave.engine,
        weave.namespace,
        [
            _request(weave, "two", {"n": 1}, key="k0"),
            _request(weave, "two", {"n": 2}, key="k1"),
            _request(weave, "two", {"n": 1}, key="k2"),
            _request(weave, "two", {"n": 1}, key="k3"),
        ],
    )
    assert _started(second[0]) == StartResult(_started(first[0]).instance_id, "RUNNING", True)
    assert isinstance(second[1], IdempotencyConflict)
    assert _started(second[2]).instance_id == _started(first[2]).instance_id
    assert _started(second[2]).replayed
    assert not _started(second[3]).replayed
    for answer in first:
        assert len(weave.tasks_of(_started(answer).instance_id)) == 1
