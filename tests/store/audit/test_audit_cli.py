"""`orbit admin audit list|export|correct`: the audit trail from the command line, filtered by
actor, action, resource and time; export as JSON lines; corrections as new linked rows."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from orbit.cli.main import app

from ..drivers.pulse_driver import PulseDriver

runner = CliRunner()


def orbit(pulse: PulseDriver, *args: str) -> str:
    url = pulse.engine.url.render_as_string(hide_password=False)
    result = runner.invoke(app, ["admin", "audit", args[0], "--database-url", url, *args[1:]])
    assert result.exit_code == 0, result.output
    return result.output


def seeded(pulse: PulseDriver) -> tuple[str, str, str]:
    """alice cancels one task; an hour later bob cancels another; returns (first, second,
    an instant between the two)."""
    first = pulse.submit(params={"n": 1}).task_id
    second = pulse.submit(params={"n": 2}).task_id
    pulse.cancel(first, actor="alice", reason="duplicate order")
    pulse.advance(3600)
    pulse.cancel(second, actor="bob", reason="customer called")
    between = pulse.now(-1800).isoformat() + "Z"
    return first, second, between


def listed(pulse: PulseDriver, *filters: str) -> list[tuple[str, str]]:
    out = orbit(pulse, "list", "-n", pulse.namespace, "-o", "json", *filters)
    return [(row["actor"], row["resource_id"]) for row in json.loads(out)["items"]]


def test_list_filters_by_actor_action_resource_and_time(pulse: PulseDriver) -> None:
    first, second, between = seeded(pulse)
    assert listed(pulse) == [("bob", second), ("alice", first)]
    assert listed(pulse, "--by", "alice") == [("alice", first)]
    assert listed(pulse, "--action", "task.*") == listed(pulse)
    assert listed(pulse, "--action", "task.review") == []
    assert listed(pulse, "--resource", f"task/{second}") == [("bob", second)]
    assert listed(pulse, "--since", between) == [("bob", second)]
    assert listed(pulse, "--until", between) == [("alice", first)]


def test_list_prints_a_table_by_default(pulse: PulseDriver) -> None:
    first, _, _ = seeded(pulse)
    out = orbit(pulse, "list", "-n", pulse.namespace, "--by", "alice")
    assert "task.cancel" in out and f"task/{first}" in out and "duplicate order" in out


def test_export_writes_one_json_object_per_line_oldest_first(pulse: PulseDriver) -> None:
    first, second, _ = seeded(pulse)
    out = orbit(pulse, "export", "--format", "jsonl", "-n", pulse.namespace)
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["actor"], r["resource_id"]) for r in rows] == [("alice", first), ("bob", second)]
    assert rows[0]["at"].endswith("Z") and rows[0]["reason"] == "duplicate order"


def test_correct_appends_a_linked_row_and_leaves_the_original(pulse: PulseDriver) -> None:
    first, _, _ = seeded(pulse)
    (original,) = json.loads(
        orbit(pulse, "list", "-n", pulse.namespace, "--by", "alice", "-o", "json")
    )["items"]
    orbit(
        pulse,
        "correct",
        original["id"],
        "-n",
        pulse.namespace,
        "--reason",
        "it was order 1042, not a duplicate",
        "--actor",
        "alice",
    )
    rows = json.loads(
        orbit(pulse, "list", "-n", pulse.namespace, "--resource", f"task/{first}", "-o", "json")
    )["items"]
    assert [(r["action"], r["corrects_id"]) for r in rows] == [
        ("audit.correct", original["id"]),
        ("task.cancel", None),
    ]
    assert rows[1]["reason"] == "duplicate order"
