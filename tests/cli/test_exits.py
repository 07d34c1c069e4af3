"""One exit-code table for every command (docs/reference/cli.md)."""

from __future__ import annotations

from orbit.cli.exits import ExitCode, for_state, for_status


def test_the_servers_answers_map_to_the_documented_codes() -> None:
    assert for_status(422) == for_status(413) == ExitCode.USAGE == 2
    assert for_status(401) == for_status(403) == ExitCode.AUTH == 4
    assert for_status(503) == for_status(0, client_side=True) == ExitCode.UNAVAILABLE == 5
    assert for_status(404) == for_status(409) == for_status(429) == ExitCode.FAILED == 1


def test_each_way_a_task_can_end_has_its_own_code() -> None:
    codes = [for_state(s) for s in ("SUCCEEDED", "FAILED", "CANCELLED", "NEEDS_REVIEW", "RUNNING")]
    assert codes == [0, 10, 11, 12, 13]
