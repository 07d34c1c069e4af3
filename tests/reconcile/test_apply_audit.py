"""Invariant 8: applying and deleting resources — with `orbit apply` here, with the operator in
tests/operator — appends audit rows through the shared reconcile functions, in the same
transaction as the change: who, what, which resource at which generation, digests before/after."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from orbit.cli.main import app
from orbit.reconcile.audited import reconcile_audited
from orbit.reconcile.kinds import KINDS
from orbit.reconcile.manifests import read
from orbit_store.schema import audit_log, queues

from .conftest import copy_examples

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "manifests"
TOKEN = "orb_example_token_0123456789abcdef"
runner = CliRunner()


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    target = tmp_path / "manifests"
    copy_examples(target)
    (target / "secret.yaml").write_text(
        "apiVersion: v1\nkind: Secret\nmetadata: {name: checkout-worker-token, namespace: shop}\n"
        f"stringData: {{token: {TOKEN}}}\n"
    )
    return target


def apply(store: sa.Engine, folder: Path, *extra: str) -> None:
    url = store.url.render_as_string(hide_password=False)
    result = runner.invoke(
        app, ["apply", "--database-url", url, "-f", str(folder), "--actor", "alice", *extra]
    )
    assert result.exit_code in (0, 3), result.output


def audit(store: sa.Engine) -> list[Any]:
    with store.connect() as conn:
        query = sa.select(audit_log).order_by(audit_log.c.at, audit_log.c.id)
        return list(conn.execute(query))


def actions(store: sa.Engine) -> list[tuple[str, str]]:
    return [(row.action, row.resource_id) for row in audit(store)]


def test_orbit_apply_audits_each_change_once_with_actor_generation_and_digests(
    store: sa.Engine, folder: Path
) -> None:
    apply(store, folder)
    assert actions(store) == [
        ("queue.apply", "checkout"),
        ("quota.apply", "checkout-limits"),
        ("schedule.apply", "nightly-report"),
        ("credential.apply", "checkout-worker"),
        ("workflowdefinition.apply", "order-fulfilment"),
    ]
    for row in audit(store):
        assert (row.actor, row.resource_version, row.before) == ("orbit-apply:alice", 1, None)
        assert row.after["digest"].startswith("sha256:")
        assert TOKEN not in str(row.after)
    apply(store, folder)
    assert len(audit(store)) == 5, "an apply that changes nothing is not an admin action"


def test_pausing_and_resuming_a_queue_are_audited_as_such(store: sa.Engine, folder: Path) -> None:
    apply(store, folder)
    manifest = folder / "queue-default.yaml"
    original = manifest.read_text()
    manifest.write_text(original.replace("spec:\n", "spec:\n  paused: true\n", 1))
    apply(store, folder)
    manifest.write_text(original)
    apply(store, folder)
    pause, resume = audit(store)[-2:]
    assert (pause.action, resume.action) == ("queue.pause", "queue.resume")
    assert pause.after["changed"] == ["paused"]
    assert pause.before["fields"]["paused"] is False and pause.after["fields"]["paused"] is True
    assert pause.after["digest"] == resume.before["digest"]


def test_suspending_and_resuming_a_schedule_are_audited_as_such(
    store: sa.Engine, folder: Path
) -> None:
    apply(store, folder)
    manifest = folder / "schedule-nightly-report.yaml"
    original = manifest.read_text()
    manifest.write_text(original.replace("spec:\n", "spec:\n  suspend: true\n", 1))
    apply(store, folder)
    manifest.write_text(original)
    apply(store, folder)
    suspend, resume = audit(store)[-2:]
    assert (suspend.action, resume.action) == ("schedule.suspend", "schedule.resume")
    assert suspend.resource_id == "nightly-report"
    assert "next_fire_at" not in suspend.after["fields"]  # runtime state is not audited


def test_a_missing_secret_revokes_the_credential_and_says_so(
    store: sa.Engine, folder: Path
) -> None:
    apply(store, folder)
    (folder / "secret.yaml").unlink()
    apply(store, folder)
    last = audit(store)[-1]
    assert (last.action, last.resource_id) == ("credential.revoke", "checkout-worker")
    assert "SecretNotFound" in last.reason


def test_pruning_a_resource_is_audited_as_its_deletion(store: sa.Engine, folder: Path) -> None:
    apply(store, folder)
    (folder / "quota-default.yaml").unlink()
    apply(store, folder, "--prune")
    last = audit(store)[-1]
    assert (last.action, last.resource_id, last.after) == ("quota.delete", "checkout-limits", None)
    assert "prune" in last.reason


def test_the_audit_row_and_the_change_commit_or_roll_back_together(
    store: sa.Engine, folder: Path
) -> None:
    queue = next(r for r in read([folder], "default").resources if r.kind == "Queue")
    with store.connect() as conn:
        trans = conn.begin()
        reconcile_audited(conn, KINDS["Queue"], queue, lambda ns, n: None, actor="alice")
        assert conn.execute(sa.select(sa.func.count()).select_from(audit_log)).scalar() == 1
        trans.rollback()
    with store.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(queues)).scalar() == 0
        assert conn.execute(sa.select(sa.func.count()).select_from(audit_log)).scalar() == 0
