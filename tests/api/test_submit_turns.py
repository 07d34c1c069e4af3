"""The pod's submission turns (orbit/api/submit_turns.py): ``--submit-transactions N`` bounds the
submission transactions of all of a pod's HTTP processes together, so a process's submissions
wait while another process's transaction runs and go together in the next one.

Other processes are real processes (forked), holding turns through the same lock files."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from orbit.api.submit_turns import SubmitTurns

from .conftest import Api
from .test_submit_groups import _group_sizes, _until

FORK = multiprocessing.get_context("fork")


def _hold(directory: str, count: int, held: Any, release: Any, spans: Any) -> None:
    """In another process: take a turn, say so, hold it until told, record when it ended."""
    with SubmitTurns(directory, count).turn():
        began = time.monotonic()
        held.set()
        release.wait(10)
        spans.put((began, time.monotonic()))


class Holder:
    """Another process of the pod holding one turn until ``release``."""

    def __init__(self, directory: Path, count: int) -> None:
        self.held, self.free, self.spans = FORK.Event(), FORK.Event(), FORK.Queue()
        args = (str(directory), count, self.held, self.free, self.spans)
        self.process = FORK.Process(target=_hold, args=args)
        self.process.start()
        assert self.held.wait(10), "the other process did not get its turn"

    def release(self) -> tuple[float, float]:
        """Let the turn go: when it was held, and when it was let go."""
        self.free.set()
        span: tuple[float, float] = self.spans.get(timeout=10)
        self.process.join(10)
        return span


@pytest.fixture
def holders(tmp_path: Path) -> Iterator[list[Holder]]:
    made: list[Holder] = []
    yield made
    for holder in made:
        holder.free.set()
        holder.process.join(10)
        if holder.process.is_alive():
            holder.process.kill()


def test_a_turn_waits_while_another_process_holds_the_only_one(
    tmp_path: Path, holders: list[Holder]
) -> None:
    holders.append(Holder(tmp_path, 1))
    turns = SubmitTurns(tmp_path, 1)

    async def take_after_release() -> float:
        loop = asyncio.get_running_loop()
        taking = loop.run_in_executor(None, _take_once, turns)
        await asyncio.sleep(0.2)
        assert not taking.done(), "took a turn another process holds"
        _, released = holders[0].release()
        taken = await taking
        assert taken >= released
        return taken

    asyncio.run(take_after_release())


def _take_once(turns: SubmitTurns) -> float:
    with turns.turn():
        return time.monotonic()


def test_with_two_turns_two_processes_hold_one_each(tmp_path: Path, holders: list[Holder]) -> None:
    holders.append(Holder(tmp_path, 2))
    began = time.monotonic()
    taken = _take_once(SubmitTurns(tmp_path, 2))
    assert holders[0].process.is_alive()  # still holding its turn when this one took the other
    held_since, _ = holders[0].release()
    assert held_since <= began <= taken


def _hold_until_killed(directory: str, held: Any) -> None:
    with SubmitTurns(directory, 1).turn():
        held.set()
        time.sleep(60)


def test_a_turn_of_a_killed_process_is_free_at_once(tmp_path: Path) -> None:
    held = FORK.Event()
    process = FORK.Process(target=_hold_until_killed, args=(str(tmp_path), held))
    process.start()
    try:
        assert held.wait(10)
        os.kill(process.pid or 0, signal.SIGKILL)
        process.join(10)
        began = time.monotonic()
        _take_once(SubmitTurns(tmp_path, 1))  # would wait forever if the lock outlived it
        assert time.monotonic() - began < 5
    finally:
        process.kill()


def _take_again_and_again(directory: str, taken: Any, stop: Any) -> None:
    """A busy process: takes the turn, holds it a while, lets it go, and at once wants it again."""
    turns = SubmitTurns(directory, 1)
    while not stop.is_set():
        with turns.turn():
            with taken.get_lock():
                taken.value += 1
            time.sleep(0.02)


def test_a_process_that_lets_its_turn_go_queues_behind_one_already_waiting(
    tmp_path: Path,
) -> None:
    """Two busy processes alternate: while this one waits, the other finishes the turn it has
    and does not take the next one too (its release would otherwise race this one's wake-up
    and win, as it did before the doorway: 14 of 15 waits). Two of fifteen are allowed for a
    descheduling between reading the count and asking for the turn."""
    taken, stop = FORK.Value("i", 0), FORK.Event()
    busy = FORK.Process(target=_take_again_and_again, args=(str(tmp_path), taken, stop))
    busy.start()
    try:
        turns, others = SubmitTurns(tmp_path, 1), []
        while taken.value == 0:
            time.sleep(0.01)
        for _ in range(15):
            before = taken.value
            with turns.turn():
                others.append(taken.value - before)
            time.sleep(0.005)
        assert sum(others) <= 2, others
    finally:
        stop.set()
        busy.join(10)
        busy.kill()


def test_a_turn_in_a_directory_that_is_gone_is_no_turn(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with SubmitTurns(tmp_path / "gone", 1).turn():
        pass
    assert "running without one" in caplog.text


def test_submissions_wait_for_the_pods_turn_and_go_together(
    mariadb_engine: sa.Engine, tmp_path: Path, holders: list[Holder]
) -> None:
    api = Api(mariadb_engine, pod_dir=str(tmp_path), submit_transactions=1)
    api.submit()  # the namespace row exists
    groups = api.app.state.ctx.submit_groups
    path = f"/v1/namespaces/{api.namespace}/tasks"
    before = _group_sizes(api)
    holders.append(Holder(tmp_path, 1))  # another HTTP process's transaction

    async def submit_five() -> list[Any]:
        calls = [
            asyncio.ensure_future(api.call("POST", path, {"handler": "h", "params": {"n": n}}))
            for n in range(5)
        ]
        await _until(lambda: groups.waiting == 5)  # none runs while the other process does
        await asyncio.sleep(0.1)
        assert groups.running == 0
        holders[0].release()
        return list(await asyncio.gather(*calls))

    answers = asyncio.run(submit_five())
    assert len({a["id"] for a in answers}) == 5
    count, total = _group_sizes(api)
    assert (count - before[0], total - before[1]) == (1, 5), "the five went together"


def test_a_lone_process_takes_no_turn(mariadb_engine: sa.Engine) -> None:
    api = Api(mariadb_engine)
    assert api.app.state.ctx.submit_groups.turns is None
