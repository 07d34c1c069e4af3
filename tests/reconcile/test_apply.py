"""`orbit apply -f`: the same manifests the operator reconciles, applied without a cluster."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from orbit.cli.main import app
from orbit.reconcile.apply import apply_manifests
from orbit.reconcile.manifests import ManifestError
from orbit_store.access.credentials import authenticate
from orbit_store.schema import credentials, queues, quotas

from .conftest import copy_examples

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "manifests"
TOKEN = "orb_example_token_0123456789abcdef"
runner = CliRunner()


def secret(name: str, token: str, namespace: str = "shop") -> str:
    return (
        f"apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: {namespace}}}\n"
        f"stringData: {{token: {token}}}\n"
    )


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    target = tmp_path / "manifests"
    copy_examples(target)
    (target / "secret.yaml").write_text(secret("checkout-worker-token", TOKEN))
    return target


def rows(engine: sa.Engine, table: sa.Table) -> list[sa.Row]:  # type: ignore[type-arg]
    with engine.connect() as conn:
        return list(conn.execute(sa.select(table).order_by(table.c.namespace, table.c.name)))


def test_apply_creates_queue_quota_and_credential_rows(store: sa.Engine, folder: Path) -> None:
    lines = apply_manifests(store, [folder])
    assert {(line.ref, line.action) for line in lines} >= {
        ("Queue/shop/checkout", "configured"),
        ("Quota/shop/checkout-limits", "configured"),
        ("Credential/shop/checkout-worker", "configured"),
        ("WorkerPool/shop/checkout-workers", "skipped"),
    }
    [queue] = rows(store, queues)
    assert (
        queue.priority,
        queue.max_attempts,
        queue.lease_seconds,
        queue.safety_default,
        queue.deletion_policy,
        queue.backoff_initial_ms,
    ) == (-10, 5, 60, "unsafe", "Drain", 2000)
    [quota] = rows(store, quotas)
    assert quota.queue == "checkout"
    [cred] = rows(store, credentials)
    assert cred.token_hash != TOKEN and TOKEN not in repr(cred)
    with store.connect() as conn:
        assert authenticate(conn, TOKEN).namespace == "shop"  # type: ignore[union-attr]


def test_applying_the_same_manifests_again_changes_nothing(store: sa.Engine, folder: Path) -> None:
    apply_manifests(store, [folder])
    again = apply_manifests(store, [folder])
    assert {line.action for line in again if line.ref.startswith(("Queue", "Quota", "Cred"))} == {
        "unchanged"
    }


def test_dry_run_reports_but_writes_nothing(store: sa.Engine, folder: Path) -> None:
    lines = apply_manifests(store, [folder], dry_run=True)
    assert any(line.action == "configured" for line in lines)
    assert rows(store, queues) == [] and rows(store, credentials) == []


def test_prune_removes_what_the_folder_no_longer_declares(store: sa.Engine, folder: Path) -> None:
    apply_manifests(store, [folder])
    (folder / "quota-default.yaml").unlink()
    lines = apply_manifests(store, [folder], prune=True)
    assert ("Quota/shop/checkout-limits", "pruned") in {(x.ref, x.action) for x in lines}
    assert rows(store, quotas) == [] and len(rows(store, queues)) == 1


def team_folder(tmp_path: Path, namespace: str, queue: str) -> Path:
    target = tmp_path / namespace
    target.mkdir()
    (target / "queue.yaml").write_text(
        f"apiVersion: orbit.dev/v1alpha1\nkind: Queue\n"
        f"metadata: {{name: {queue}, namespace: {namespace}}}\nspec: {{}}\n"
    )
    return target


def test_prune_only_touches_the_namespaces_the_applied_files_declare(
    store: sa.Engine, tmp_path: Path
) -> None:
    """Applying team A's folder with --prune leaves team B's manifest rows alone."""
    apply_manifests(store, [team_folder(tmp_path, "team-b", "billing")])
    team_a = team_folder(tmp_path, "team-a", "emails")

    lines = apply_manifests(store, [team_a], prune=True)

    assert [(x.ref, x.action) for x in lines] == [("Queue/team-a/emails", "configured")]
    assert {(q.namespace, q.name) for q in rows(store, queues)} == {
        ("team-a", "emails"),
        ("team-b", "billing"),
    }


def test_prune_namespace_prunes_a_namespace_the_files_no_longer_mention(
    store: sa.Engine, tmp_path: Path
) -> None:
    team_b = team_folder(tmp_path, "team-b", "billing")
    apply_manifests(store, [team_b])
    (team_b / "queue.yaml").unlink()
    team_a = team_folder(tmp_path, "team-a", "emails")

    lines = apply_manifests(store, [team_a, team_b], prune=True, prune_namespaces=["team-b"])

    assert ("Queue/team-b/billing", "pruned") in {(x.ref, x.action) for x in lines}
    assert {(q.namespace, q.name) for q in rows(store, queues)} == {("team-a", "emails")}


def test_cli_prune_namespace_needs_prune(store: sa.Engine, tmp_path: Path) -> None:
    url = store.url.render_as_string(hide_password=False)
    folder = team_folder(tmp_path, "team-a", "emails")
    result = runner.invoke(
        app, ["apply", "--database-url", url, "-f", str(folder), "--prune-namespace", "team-b"]
    )
    assert result.exit_code == 2
    assert "--prune-namespace needs --prune" in result.output


def test_an_invalid_manifest_applies_nothing_and_names_file_object_and_field(
    store: sa.Engine, folder: Path
) -> None:
    shutil.copy(ROOT / "tests/k8s/invalid/queue-max-backoff-below-initial.yaml", folder)
    with pytest.raises(ManifestError) as error:
        apply_manifests(store, [folder])
    message = str(error.value)
    assert "queue-max-backoff-below-initial.yaml" in message and "Queue shop/" in message
    assert "spec.retry.backoff" in message
    assert rows(store, queues) == [] and rows(store, quotas) == []


def test_rotating_the_secret_rotates_the_token(store: sa.Engine, folder: Path) -> None:
    apply_manifests(store, [folder])
    new = "orb_rotated_token_fedcba9876543210"
    (folder / "secret.yaml").write_text(secret("checkout-worker-token", new))
    apply_manifests(store, [folder])
    with store.connect() as conn:
        assert authenticate(conn, TOKEN) is None
        assert authenticate(conn, new) is not None


def test_a_credential_whose_secret_is_missing_is_not_ready_and_accepts_no_token(
    store: sa.Engine, folder: Path
) -> None:
    apply_manifests(store, [folder])
    (folder / "secret.yaml").unlink()
    lines = {x.ref: x for x in apply_manifests(store, [folder])}
    assert lines["Credential/shop/checkout-worker"].action == "not ready"
    assert "SecretNotFound" in lines["Credential/shop/checkout-worker"].detail
    with store.connect() as conn:
        assert authenticate(conn, TOKEN) is None


def test_cli_apply_prints_each_object_and_exits_2_on_invalid(
    any_empty_url: str, folder: Path
) -> None:
    assert runner.invoke(app, ["admin", "migrate", "--database-url", any_empty_url]).exit_code == 0
    ok = runner.invoke(app, ["apply", "--database-url", any_empty_url, "-f", str(folder)])
    assert ok.exit_code == 0, ok.output
    assert "Queue/shop/checkout configured" in ok.output
    bad = runner.invoke(
        app, ["apply", "--database-url", any_empty_url, "-f", str(ROOT / "tests/k8s/invalid")]
    )
    assert bad.exit_code == 2 and "nothing was applied" in bad.output


def test_a_quota_naming_an_undeclared_queue_applies_nothing(store: sa.Engine, folder: Path) -> None:
    (folder / "queue-default.yaml").unlink()
    with pytest.raises(ManifestError, match="queue 'checkout' is not declared"):
        apply_manifests(store, [folder])
    assert rows(store, quotas) == [] and rows(store, credentials) == []


def test_the_quota_reconciler_refuses_an_undeclared_queue(store: sa.Engine) -> None:
    from orbit.reconcile import quota
    from orbit.reconcile.resource import InvalidSpec, Resource
    from orbit_store.db import run_transaction

    resource = Resource("Quota", "ops", "q", {"queue": "nope", "maxWaiting": 5})
    with pytest.raises(InvalidSpec) as error:
        run_transaction(store, lambda c: quota.reconcile(c, resource))
    assert error.value.field_path == "spec.queue" and rows(store, quotas) == []


def test_a_schedule_template_over_the_payload_limit_applies_nothing(
    store: sa.Engine, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The limit the server holds a task's params to (ORBIT_MAX_PAYLOAD_BYTES, the variable
    `orbit server` reads too) holds a declared Schedule's template as well."""
    monkeypatch.setenv("ORBIT_MAX_PAYLOAD_BYTES", "2048")
    (folder / "big-schedule.yaml").write_text(
        "apiVersion: orbit.dev/v1alpha1\nkind: Schedule\n"
        "metadata: {name: big, namespace: shop}\n"
        "spec:\n  schedule: '@daily'\n  taskTemplate:\n    handler: shop.report\n"
        f"    params: {{blob: {'x' * 3000}}}\n"
    )
    with pytest.raises(ManifestError) as error:
        apply_manifests(store, [folder])
    message = str(error.value)
    assert "Schedule/shop/big: spec.taskTemplate.params:" in message
    assert "the limit is 2048 bytes" in message
    assert rows(store, queues) == []


def test_the_reserved_system_namespace_is_applied_only_when_asked_for(
    store: sa.Engine, tmp_path: Path
) -> None:
    """An admin token in orbit-system is the database's administrator (restore fencing): a
    folder of manifests cannot declare one there unless the apply says it is meant to."""
    token = "orb_system_token_0123456789abcdef0"
    (tmp_path / "system.yaml").write_text(
        secret("fence-token", token, namespace="orbit-system")
        + "---\napiVersion: orbit.dev/v1alpha1\nkind: Credential\n"
        "metadata: {name: fencer, namespace: orbit-system}\n"
        "spec: {secretRef: {name: fence-token}, roles: [admin]}\n"
    )
    with pytest.raises(ManifestError) as error:
        apply_manifests(store, [tmp_path])
    message = str(error.value)
    assert "Credential/orbit-system/fencer: metadata.namespace:" in message
    assert "reserved system namespace" in message and "--allow-system-namespace" in message
    with store.connect() as conn:
        assert authenticate(conn, token) is None
    with pytest.raises(ManifestError, match="reserved system namespace"):
        apply_manifests(store, [EXAMPLES], prune=True, prune_namespaces=["orbit-system"])

    cli = runner.invoke(
        app,
        [
            "apply",
            "-f",
            str(tmp_path),
            "--database-url",
            store.url.render_as_string(hide_password=False),
        ],
    )
    assert cli.exit_code == 2 and "--allow-system-namespace" in cli.output

    lines = apply_manifests(store, [tmp_path], allow_system_namespace=True)
    assert ("Credential/orbit-system/fencer", "configured") in {(x.ref, x.action) for x in lines}
    with store.connect() as conn:
        found = authenticate(conn, token)
    assert found is not None and found.namespace == "orbit-system"
