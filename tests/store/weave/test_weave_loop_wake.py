"""The inbox loop is woken when an outcome lands in this process, instead of waiting for its
poll: :meth:`EngineLoop.wake` runs the next pass now."""

from __future__ import annotations

import threading

from orbit.engines.loop import EngineLoop


def test_a_woken_loop_runs_its_next_pass_without_waiting_for_its_interval() -> None:
    ran = [threading.Event(), threading.Event()]
    passes: list[int] = []

    def run_pass() -> None:
        passes.append(len(passes))
        ran[min(len(passes), 2) - 1].set()

    loop = EngineLoop("weave-inbox", run_pass, interval=3600)  # polls once an hour
    loop.start()
    try:
        assert ran[0].wait(30), "the first pass runs at start"
        loop.wake()
        assert ran[1].wait(30), "a wake runs the next pass long before the hour"
    finally:
        loop.stop()
    assert len(passes) >= 2
