"""The CLI users touch: tokens in the database, tasks through the server, invariant scans."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import httpx
import sqlalchemy as sa
from typer.testing import CliRunner

from orbit.api.transport.auth import CACHE_SECONDS
from orbit.cli.main import app as cli_app
from orbit_store.schema import task_events

from ..conftest import (
    ORBIT,
    ROOT,
    Server,
    Tenant,
    make_tenant,
    report_unknown_outcome,
    wait_until,
)


def orbit(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ORBIT, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


def test_token_create_prints_it_once_list_hides_it_and_revoke_stops_it(server: Server) -> None:
    db = ["--database-url", server.database_url]
    created = orbit(
        "admin", "token", "create", *db, "-n", "cli-ns", "--role", "submit", "--name", "ci-bot"
    )
    assert created.returncode == 0, created.stderr
    token = created.stdout.strip()
    assert token.startswith("orb_")
    url = f"{server.url}/v1/namespaces/cli-ns/tasks"
    bearer = {"Authorization": f"Bearer {token}"}
    assert httpx.get(url, headers=bearer).status_code == 200
    listed = orbit("admin", "token", "list", *db, "-n", "cli-ns", "-o", "json")
    assert json.loads(listed.stdout)["items"][0]["name"] == "ci-bot" and token not in listed.stdout
    again = orbit("admin", "token", "create", *db, "-n", "cli-ns", "--role", "nope")
    assert again.returncode == 1 and "roles are" in again.stderr
    assert (
        orbit("admin", "token", "revoke", *db, "-n", "cli-ns", "--name", "ci-bot").returncode == 0
    )
    # The server caches a look-up for CACHE_SECONDS (docs/reference/api.md): refused within that,
    # for good.
    wait_until(lambda: httpx.get(url, headers=bearer).status_code == 401, timeout=CACHE_SECONDS + 5)
    refused = httpx.get(url, headers=bearer)
    assert refused.status_code == 401 and refused.json()["type"].endswith("unauthorized")


def test_task_submit_get_list_and_cancel_through_the_server(tenant: Tenant) -> None:
    env = tenant.env()
    submitted = orbit(
        "task",
        "submit",
        "--handler",
        "x.y",
        "--params",
        '{"a": 1}',
        "--key",
        "k",
        "--delay",
        "3600",
        "-o",
        "json",
        env=env,
    )
    assert submitted.returncode == 0, submitted.stderr
    task_id = json.loads(submitted.stdout)["id"]
    again = orbit(
        "task",
        "submit",
        "--handler",
        "x.y",
        "--params",
        '{"a": 1}',
        "--key",
        "k",
        "--delay",
        "3600",
        "-o",
        "json",
        env=env,
    )
    assert json.loads(again.stdout)["id"] == task_id
    assert task_id in orbit("task", "list", env=env).stdout
    got = json.loads(orbit("task", "get", task_id, "-o", "json", env=env).stdout)
    assert got["state"] == "WAITING" and got["params"] == {"a": 1}
    cancelled = json.loads(
        orbit("task", "cancel", task_id, "--reason", "test", "-o", "json", env=env).stdout
    )
    assert cancelled["state"] == "CANCELLED"
    bad = orbit("task", "submit", "--handler", "x", "--params", "{nope", env=env)
    assert bad.returncode == 2 and "not valid JSON" in bad.stderr


def test_admin_verify_is_clean_then_names_a_corruption(
    tenant: Tenant, mariadb_engine: sa.Engine
) -> None:
    env = tenant.env()
    task_id = json.loads(orbit("task", "submit", "--handler", "x", "-o", "json", env=env).stdout)[
        "id"
    ]
    db = ["--database-url", tenant.server.database_url, "--namespace", tenant.namespace]
    clean = orbit("admin", "verify", *db)
    assert clean.returncode == 0 and json.loads(clean.stdout)["clean"] is True
    with mariadb_engine.begin() as conn:  # history rewritten by hand: an event goes missing
        conn.execute(task_events.delete().where(task_events.c.task_id == task_id))
    broken = orbit("admin", "verify", *db)
    report = json.loads(broken.stdout)
    assert broken.returncode == 1 and report["clean"] is False
    assert report["checks"]["event_gaps"]["examples"] == [task_id]


def test_task_review_and_retry_from_the_cli(tenant: Tenant) -> None:

    env = tenant.env()
    task_id = json.loads(
        orbit(
            "task", "submit", "--handler", "x", "--safety", "unsafe", "-o", "json", env=env
        ).stdout
    )["id"]
    report_unknown_outcome(tenant)
    version = json.loads(orbit("task", "get", task_id, "-o", "json", env=env).stdout)
    refused = orbit(
        "task",
        "review",
        task_id,
        "--decision",
        "failed",
        "--reason",
        "r",
        "--evidence",
        "e",
        "--expected-version",
        str(version["state_version"]),
        env=env,
    )
    # the option to add, as this command spells it, not the API's field (execution_ended=true)
    assert refused.returncode == 2 and "(--execution-ended)" in refused.stderr, refused.stderr
    assert "execution_ended" not in refused.stderr
    reviewed = orbit(
        "task",
        "review",
        task_id,
        "--decision",
        "failed",
        "--reason",
        "not charged",
        "--evidence",
        "psp-7",
        "--expected-version",
        str(version["state_version"]),
        "--execution-ended",
        "-o",
        "json",
        env=env,
    )
    assert json.loads(reviewed.stdout)["state"] == "FAILED", reviewed.stderr
    failed = json.loads(orbit("task", "get", task_id, "-o", "json", env=env).stdout)
    unsure = orbit(
        *("task", "retry", task_id, "--reason", "again"),
        *("--expected-version", str(failed["state_version"])),
        env=env,
    )
    assert unsure.returncode == 2 and "(--safe-to-retry)" in unsure.stderr, unsure.stderr
    assert "safe_to_retry" not in unsure.stderr
    retried = orbit(
        "task",
        "retry",
        task_id,
        "--reason",
        "again",
        "--expected-version",
        str(failed["state_version"]),
        "--safe-to-retry",
        "-o",
        "json",
        env=env,
    )
    assert json.loads(retried.stdout)["retry_of"] == task_id, retried.stderr


def test_workflow_publish_honours_the_manifests_namespace_and_refuses_a_contradiction(
    server: Server, mariadb_engine: sa.Engine, tmp_path: Path
) -> None:
    """A manifest's metadata.namespace is where `workflow publish -f` publishes (as `orbit
    apply` and kubectl do), never silently another; a --namespace that contradicts it is exit 2."""
    import yaml

    tenant = make_tenant(server, mariadb_engine, ["admin"])
    doc = yaml.safe_load((ROOT / "examples/manifests/workflowdefinition-order.yaml").read_text())
    doc["metadata"]["namespace"] = tenant.namespace
    manifest = tmp_path / "order.yaml"
    manifest.write_text(yaml.safe_dump(doc))
    env = {k: v for k, v in tenant.env().items() if k != "ORBIT_NAMESPACE"}
    published = orbit("workflow", "publish", "-f", str(manifest), "-o", "id", env=env)
    assert published.returncode == 0, published.stderr
    assert published.stdout.strip() == "order-fulfilment"
    shown = httpx.get(
        f"{tenant.server.url}/v1/namespaces/{tenant.namespace}/workflow-definitions/order-fulfilment",
        headers=tenant.headers,
    )
    assert shown.status_code == 200, shown.text
    contradicted = orbit("workflow", "publish", "-f", str(manifest), "-n", "elsewhere", env=env)
    assert contradicted.returncode == 2
    assert (
        f"declares namespace {tenant.namespace!r} but --namespace (or ORBIT_NAMESPACE) says "
        "'elsewhere'" in contradicted.stderr
    )


def test_deleting_a_subscription_with_undelivered_events_names_the_option_to_add(
    server: Server, mariadb_engine: sa.Engine
) -> None:
    tenant = make_tenant(server, mariadb_engine, ["admin"])
    env = tenant.env()
    made = orbit("subscription", "put", "receipts", "--outcome", "CANCELLED", env=env)
    assert made.returncode == 0, made.stderr
    task_id = orbit("task", "submit", "--handler", "x", "--delay", "3600", "-o", "id", env=env)
    assert orbit("task", "cancel", task_id.stdout.strip(), env=env).returncode == 0
    refused = orbit("subscription", "delete", "receipts", env=env)
    assert refused.returncode == 1, refused.stderr
    assert "--discard-undelivered" in refused.stderr and "discard_undelivered" not in refused.stderr
    deleted = orbit("subscription", "delete", "receipts", "--discard-undelivered", env=env)
    assert deleted.returncode == 0, deleted.stderr


def admin_with_the_example_workflow(server: Server, engine: sa.Engine) -> Tenant:
    """A namespace, an admin token, and the example order-fulfilment definition published."""
    tenant = make_tenant(server, engine, ["admin"])
    manifest = str(ROOT / "examples/manifests/workflowdefinition-order.yaml")
    assert orbit("workflow", "publish", "-f", manifest, env=tenant.env()).returncode == 0
    return tenant


def test_workflow_input_refused_with_every_problem_each_at_its_json_path(
    server: Server, mariadb_engine: sa.Engine
) -> None:
    env = admin_with_the_example_workflow(server, mariadb_engine).env()
    refused = orbit(
        *("workflow", "start", "order-fulfilment", "--input", '{"order": "seven", "amount": -1}'),
        env=env,
    )
    assert refused.returncode == 2, refused.stderr
    lines = refused.stderr.splitlines()
    assert lines[0].startswith("error: The request is not valid (422): 2 problems with the input")
    assert lines[1:] == [
        "  --input (input.amount): -1 is less than the minimum of 0",
        "  --input (input.order): 'seven' is not of type 'integer'",
    ]


def test_task_list_filters_by_handler(tenant: Tenant) -> None:
    env = tenant.env()
    for handler in ("shop.charge", "shop.echo", "shop.charge"):
        submitted = orbit("task", "submit", "--handler", handler, "--delay", "3600", env=env)
        assert submitted.returncode == 0, submitted.stderr
    listed = orbit("task", "list", "--handler", "shop.charge", "-o", "json", env=env)
    assert listed.returncode == 0, listed.stderr
    handlers = [t["handler"] for t in json.loads(listed.stdout)["items"]]
    assert handlers == ["shop.charge", "shop.charge"]


#: Anything that looks like a date and a time, however written — but a waiting cause's detail,
#: which is prose for people ("not before …Z", to the second, as the console shows it).
TIME_LIKE = re.compile(r"(?<!not before )\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}[^\s\",]*")
HUMAN_UTC = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")
JSON_UTC = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z")


def test_every_time_the_cli_prints_is_rfc3339_utc_and_local_with_local(
    server: Server, mariadb_engine: sa.Engine
) -> None:
    """One form in every human output (to the second, Z), the same with microseconds in JSON;
    --local shows this machine's zone (RFC 3339 with its offset) instead. The outputs are printed
    by the CLI's entry point in this process, against the real server; --local runs `orbit` with
    the zone of its environment."""
    tenant = admin_with_the_example_workflow(server, mariadb_engine)
    env = tenant.env()
    started = orbit(
        *("workflow", "start", "order-fulfilment", "--input", '{"order": 1, "amount": 2}'),
        *("-o", "id"),
        env=env,
    )
    workflow_id = started.stdout.strip()
    task_id = orbit("task", "submit", "--handler", "x", "--delay", "60", "-o", "id", env=env)
    task_id_text = task_id.stdout.strip()
    db = ["--database-url", server.database_url, "-n", tenant.namespace]
    commands = [
        ("task", "get", task_id_text),
        ("task", "list"),
        ("workflow", "get", workflow_id),
        ("workflow", "list"),
        ("workflow", "history", workflow_id),
        ("admin", "audit", "list", *db),
    ]
    runner = CliRunner()
    for command in commands:
        for shown in ("table", "wide", "json", "yaml"):
            # The printing is the point, not the process: orbit's own entry point in this one.
            printed = runner.invoke(cli_app, [*command, "-o", shown], env=env)
            assert printed.exit_code == 0, printed.output
            times = TIME_LIKE.findall(printed.stdout)
            form = JSON_UTC if shown in ("json", "yaml") else HUMAN_UTC
            assert times and all(form.fullmatch(t.strip("'")) for t in times), (command, times)
    kolkata = {**env, "TZ": "Asia/Kolkata"}
    local = orbit("task", "get", task_id_text, "--local", env=kolkata)
    times = TIME_LIKE.findall(local.stdout)
    assert times and all(t.endswith("+05:30") for t in times), times
    local_json = orbit("task", "get", task_id_text, "--local", "-o", "json", env=kolkata)
    assert json.loads(local_json.stdout)["created_at"].endswith("+05:30")
