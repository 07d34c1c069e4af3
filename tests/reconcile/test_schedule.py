"""Schedule resources through `orbit apply` and the reconcile function the operator shares."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from orbit.cli.main import app
from orbit.reconcile import schedule
from orbit.reconcile.apply import apply_manifests
from orbit.reconcile.manifests import ManifestError
from orbit.reconcile.resource import InvalidSpec, Resource
from orbit_store.db import run_transaction
from orbit_store.schema import schedules

from .conftest import copy_examples

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "manifests" / "schedule-nightly-report.yaml"
runner = CliRunner()


def manifest(spec: str, name: str = "sync") -> str:
    return (
        "apiVersion: orbit.dev/v1alpha1\nkind: Schedule\n"
        f"metadata: {{name: {name}, namespace: shop}}\nspec:\n{spec}"
    )


def row(engine: sa.Engine, name: str = "sync") -> sa.Row:  # type: ignore[type-arg]
    with engine.connect() as conn:
        return conn.execute(sa.select(schedules).where(schedules.c.name == name)).one()


def test_apply_declares_the_example_schedule(store: sa.Engine, tmp_path: Path) -> None:
    copy_examples(tmp_path, only=EXAMPLE.name)
    [line] = apply_manifests(store, [tmp_path])
    assert (line.ref, line.action) == ("Schedule/shop/nightly-report", "configured")
    assert line.detail.startswith("next fire ") and "CE" in line.detail  # CET or CEST
    stored = row(store, "nightly-report")
    assert (stored.cron, stored.time_zone, stored.concurrency_policy) == (
        "30 2 * * *",
        "Europe/Berlin",
        "Forbid",
    )
    assert stored.task_template == {
        "handler": "shop.nightly_report",
        "queue": "default",
        "params": {"format": "csv"},
    }
    assert (stored.version, stored.source, stored.next_fire_at is not None) == (1, "manifest", True)

    [again] = apply_manifests(store, [tmp_path])
    assert again.action == "unchanged" and row(store, "nightly-report").version == 1


def test_a_changed_spec_is_a_new_version(store: sa.Engine, tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(manifest("  schedule: '0 * * * *'\n  taskTemplate: {handler: shop.sync}\n"))
    apply_manifests(store, [path])
    path.write_text(manifest("  schedule: '30 * * * *'\n  taskTemplate: {handler: shop.sync}\n"))
    [line] = apply_manifests(store, [path])
    assert line.action == "configured"
    assert (row(store).version, row(store).next_fire_at.minute) == (2, 30)


def test_a_suspended_schedule_says_so(store: sa.Engine, tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        manifest("  schedule: '@hourly'\n  suspend: true\n  taskTemplate: {handler: shop.sync}\n")
    )
    [line] = apply_manifests(store, [path])
    assert line.detail == "suspended: nothing fires until spec.suspend is false"
    assert row(store).next_fire_at is None


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        (
            "  schedule: '61 * * * *'\n  taskTemplate: {handler: h}\n",
            "spec.schedule: '61 * * * *' is not a valid cron expression (Bad minute)",
        ),
        (
            "  schedule: '@daily'\n  timeZone: Europe/Paris-ish\n  taskTemplate: {handler: h}\n",
            "spec.timeZone: 'Europe/Paris-ish' is not an IANA time zone",
        ),
        (
            "  schedule: '@daily'\n  startAt: next tuesday\n  taskTemplate: {handler: h}\n",
            "spec.startAt: 'next tuesday' is not an RFC 3339 date-time",
        ),
        (
            "  schedule: '@daily'\n  taskTemplate: {handler: h, queue: reports}\n",
            "queue 'reports' is not declared in namespace 'shop'",
        ),
    ],
)
def test_a_bad_schedule_applies_nothing_and_names_the_field(
    store: sa.Engine, tmp_path: Path, spec: str, words: str
) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(manifest("  schedule: '@daily'\n  taskTemplate: {handler: h}\n", "good"))
    (tmp_path / "bad.yaml").write_text(manifest(spec))
    with pytest.raises(ManifestError) as refused:
        apply_manifests(store, [tmp_path])
    assert "Schedule/shop/sync" in str(refused.value) and words in str(refused.value)
    with store.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(schedules)).scalar_one() == 0


def test_cli_apply_refuses_a_bad_expression_with_one_line_and_exit_2(
    store: sa.Engine, tmp_path: Path
) -> None:
    (tmp_path / "bad.yaml").write_text(
        manifest("  schedule: 'every day'\n  taskTemplate: {handler: h}\n")
    )
    result = runner.invoke(
        app,
        ["apply", "-f", str(tmp_path), "--database-url", str(store.url.render_as_string(False))],
    )
    assert result.exit_code == 2  # invalid manifests: nothing applied
    assert "spec.schedule: 'every day' is not a valid cron expression" in result.output
    assert "Traceback" not in result.output


def test_the_reconciler_refuses_what_apply_would(store: sa.Engine) -> None:
    resource = Resource(
        "Schedule",
        "shop",
        "sync",
        {
            "schedule": "* * * * *",
            "timeZone": "Nowhere/Land",
            "suspend": False,
            "concurrencyPolicy": "Allow",
            "misfirePolicy": "FireOnce",
            "catchUpLimit": 1,
            "taskTemplate": {"handler": "h", "queue": "default", "params": {}},
        },
    )
    with pytest.raises(InvalidSpec) as refused:
        run_transaction(store, lambda conn: schedule.reconcile(conn, resource))
    assert refused.value.field_path == "spec.timeZone"


def test_prune_deletes_a_schedule_the_folder_no_longer_declares(
    store: sa.Engine, tmp_path: Path
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(manifest("  schedule: '@hourly'\n  taskTemplate: {handler: h}\n"))
    apply_manifests(store, [path])
    path.unlink()
    (tmp_path / "other.yaml").write_text(
        manifest("  schedule: '@daily'\n  taskTemplate: {handler: h}\n", "other")
    )
    lines = apply_manifests(store, [tmp_path], prune=True)
    assert ("Schedule/shop/sync", "pruned") in {(line.ref, line.action) for line in lines}
