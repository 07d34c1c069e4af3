"""The chaos verdict's rule for a safe task run again after it had finished: only a fault of the
finishing worker excuses it (a re-run across server or database faults is work the platform
lost)."""

from __future__ import annotations

from .checker import explains

END, RERUN = 100.0, 104.0  # the `end` effect, and the next generation's first effect


def test_a_kill_right_after_the_write_explains_the_rerun() -> None:
    assert explains({"kind": "worker_kill", "at": END + 0.2}, END, RERUN)


def test_a_pause_spanning_the_write_explains_the_rerun() -> None:
    # Stopped between its lease check and its write, the worker wrote on resuming, 4 s later.
    pause = {"kind": "worker_pause", "at": END - 4.0, "seconds": 4.1}
    assert explains(pause, END, RERUN)


def test_a_pause_that_ended_well_before_the_write_does_not_explain_it() -> None:
    pause = {"kind": "worker_pause", "at": END - 8.0, "seconds": 4.0}
    assert not explains(pause, END, RERUN)


def test_a_kill_long_before_the_write_does_not_explain_it() -> None:
    assert not explains({"kind": "worker_kill", "at": END - 5.0}, END, RERUN)


def test_a_fault_after_the_rerun_began_does_not_explain_it() -> None:
    assert not explains({"kind": "worker_kill", "at": RERUN + 2.0}, END, RERUN)
