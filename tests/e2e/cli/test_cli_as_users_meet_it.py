"""The CLI as a user meets it: each thing a user stumbled over, typed at the real CLI against
the real server (MariaDB), with the exit codes of docs/reference/cli.md."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx
import pytest
import yaml

from orbit_sdk import Client

from ..conftest import ORBIT, ROOT, Tenant, report_unknown_outcome


def orbit(
    tenant: Tenant, *args: str, stdin: str | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    full_env = tenant.env(**env)
    for name in [k for k, v in env.items() if v == ""]:
        del full_env[name]  # ORBIT_X="" means: not set at all
    return subprocess.run(
        [ORBIT, *args],
        cwd=ROOT,
        env=full_env,
        capture_output=True,
        text=True,
        input=stdin,
        timeout=90,
    )


def submit_json(tenant: Tenant, *args: str) -> dict:  # type: ignore[type-arg]
    done = orbit(tenant, "task", "submit", *args, "-o", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


# --- 1. validation errors name the field ---------------------------------------------------


def test_a_servers_validation_error_names_each_option_and_field(tenant: Tenant) -> None:
    done = orbit(tenant, "task", "submit", "--handler", "x", "--priority", "5000", "--delay", "-5")
    assert done.returncode == 2
    assert "--priority (priority): Input should be less than or equal to 1000" in done.stderr
    assert "--delay (delay_seconds): Input should be greater than or equal to 0" in done.stderr
    empty = orbit(tenant, "task", "submit", "--handler", "")
    assert empty.returncode == 2 and "--handler (handler)" in empty.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["task", "list", "--state", "maybe"],
        ["task", "submit", "--handler", "x", "--safety", "maybe"],
        ["task", "list", "-o", "xml"],
        [
            "task",
            "review",
            "t",
            "--decision",
            "maybe",
            "--reason",
            "r",
            "--evidence",
            "e",
            "--expected-version",
            "1",
        ],
    ],
    ids=["state", "safety", "output", "decision"],
)
def test_a_choice_outside_its_values_is_refused_before_any_request(
    tenant: Tenant, args: list[str]
) -> None:
    done = orbit(tenant, *args)
    assert done.returncode == 2 and ("'maybe'" in done.stderr or "'xml'" in done.stderr)
    assert "Traceback" not in done.stderr


def test_states_may_be_typed_in_lower_case(tenant: Tenant) -> None:
    assert orbit(tenant, "task", "list", "--state", "failed").returncode == 0


# --- 3. no token: one line, no traceback ---------------------------------------------------


def test_without_a_token_client_commands_and_the_worker_say_so_in_one_line(tenant: Tenant) -> None:
    for args in (["task", "list"], ["worker", "tests.e2e.handlers:worker"]):
        done = orbit(tenant, *args, ORBIT_TOKEN="")
        assert done.returncode == 4, done.stderr
        assert done.stderr.startswith("error: no token") and len(done.stderr.splitlines()) == 1


def test_a_worker_with_an_unknown_token_exits_4_without_a_traceback(tenant: Tenant) -> None:
    done = orbit(tenant, "worker", "tests.e2e.handlers:worker", "--token", "orb_unknown_token_123")
    assert done.returncode == 4
    assert (
        "Traceback" not in done.stderr and "error: Missing or invalid bearer token" in done.stderr
    )


# --- 4. --wait and watch: the exit code says how the task ended ----------------------------


def test_wait_exits_0_when_the_task_succeeded_and_10_when_it_failed(tenant: Tenant) -> None:
    tenant.start_worker()
    ok = orbit(tenant, "task", "submit", "--handler", "e2e.echo", "--wait", "30", "-o", "json")
    assert ok.returncode == 0 and json.loads(ok.stdout)["state"] == "SUCCEEDED", ok.stderr
    failed = orbit(
        tenant,
        "task",
        "submit",
        "--handler",
        "e2e.flaky",
        "--params",
        '{"failures": 5}',
        "--max-attempts",
        "1",
        "--wait",
        "30",
        "-o",
        "json",
    )
    assert failed.returncode == 10 and json.loads(failed.stdout)["state"] == "FAILED"


def test_wait_exits_13_when_time_runs_out_and_the_task_keeps_going(tenant: Tenant) -> None:
    done = orbit(tenant, "task", "submit", "--handler", "x", "--delay", "3600", "--wait", "0.5")
    assert done.returncode == 13 and "still WAITING" in done.stderr


def test_watch_prints_each_change_and_exits_11_for_cancelled_and_12_for_review(
    tenant: Tenant,
) -> None:
    # Submitted and cancelled over HTTP: only the watches' exit codes are the point here.
    with Client(tenant.server.url, token=tenant.token) as client:
        cancelled = client.submit(tenant.namespace, handler="x", delay=3600)
        client.cancel(tenant.namespace, cancelled.id)
        review = client.submit(tenant.namespace, handler="x", safety="unsafe")
    watched = orbit(tenant, "task", "watch", cancelled.id)
    assert watched.returncode == 11
    assert "WAITING -> CANCELLED" in watched.stdout.splitlines()[-1]
    report_unknown_outcome(tenant)
    watched = orbit(tenant, "task", "watch", review.id, "-o", "json")
    events = [json.loads(line) for line in watched.stdout.splitlines()]
    assert watched.returncode == 12 and events[-1]["to_state"] == "NEEDS_REVIEW"


# --- 9. a NEEDS_REVIEW task says why -------------------------------------------------------


def test_get_says_why_a_task_needs_review_and_how_to_settle_it(tenant: Tenant) -> None:
    task = submit_json(tenant, "--handler", "x", "--safety", "unsafe")
    report_unknown_outcome(tenant)
    fields = orbit(tenant, "task", "get", task["id"]).stdout.split("\n\n")[0]
    lines = dict(line.split(":", 1) for line in fields.splitlines())
    assert lines["state"].strip() == "NEEDS_REVIEW"
    assert "unknown" in lines["reason"] and "orbit task review" in lines["next"]


# --- 5. empty idempotency keys --------------------------------------------------------------


def test_an_empty_key_is_refused_and_an_absent_one_is_generated(tenant: Tenant) -> None:
    refused = orbit(tenant, "task", "submit", "--handler", "x", "--key", "")
    assert refused.returncode == 2 and "--key" in refused.stderr
    first, second = (submit_json(tenant, "--handler", "x") for _ in range(2))
    assert first["id"] != second["id"]


# --- 6. large params: @file, stdin, and the server's limit ---------------------------------


def test_params_come_from_a_file_or_standard_input(tenant: Tenant, tmp_path: Path) -> None:
    params = {"rows": ["x" * 100] * 3000}  # 300 kB: too long for many shells' argument limit
    (tmp_path / "params.json").write_text(json.dumps(params))
    from_file = submit_json(tenant, "--handler", "x", "--params", f"@{tmp_path / 'params.json'}")
    done = orbit(
        tenant,
        "task",
        "submit",
        "--handler",
        "x",
        "--params",
        "-",
        "-o",
        "json",
        stdin=json.dumps({"from": "stdin"}),
    )
    assert from_file["params"] == params and json.loads(done.stdout)["params"] == {"from": "stdin"}


def test_params_over_the_servers_limit_are_refused_with_413_naming_params(
    tenant: Tenant, tmp_path: Path
) -> None:
    (tmp_path / "big.json").write_text(json.dumps({"blob": "x" * (1024 * 1024 + 10)}))
    done = orbit(
        tenant, "task", "submit", "--handler", "x", "--params", f"@{tmp_path / 'big.json'}"
    )
    assert done.returncode == 2
    assert "The request is too large (413)" in done.stderr and "--params (params)" in done.stderr
    assert orbit(tenant, "task", "list").stderr.strip() == "no tasks found"


# --- 10. listing: paging, never a silent cut, yaml -----------------------------------------


def test_list_says_when_more_match_and_pages_through_them(tenant: Tenant) -> None:
    with Client(tenant.server.url, token=tenant.token) as client:
        ids = [client.submit(tenant.namespace, handler="x", delay=3600).id for _ in range(7)]
    first = orbit(tenant, "task", "list", "--limit", "5")
    assert len(first.stdout.splitlines()) == 6  # header + 5
    token = first.stderr.split("--page-token ")[1].split()[0]
    rest = orbit(tenant, "task", "list", "--page-token", token)
    assert len(rest.stdout.splitlines()) == 3 and rest.stderr == ""
    everything = yaml.safe_load(orbit(tenant, "task", "list", "--all", "-o", "yaml").stdout)
    assert [t["id"] for t in everything["items"]] == ids[::-1]
    assert everything["next_page_token"] is None
    assert orbit(tenant, "task", "list", "--limit", "600").returncode == 0


# --- 13. the namespace comes from the token -------------------------------------------------


def test_without_a_namespace_the_cli_uses_the_tokens_own(tenant: Tenant) -> None:
    task = json.loads(
        orbit(tenant, "task", "submit", "--handler", "x", "-o", "json", ORBIT_NAMESPACE="").stdout
    )
    assert task["namespace"] == tenant.namespace
    wrong = orbit(tenant, "task", "list", "-n", "default")
    assert wrong.returncode == 4
    assert f"this token belongs to namespace '{tenant.namespace}', not 'default'" in wrong.stderr


def test_a_worker_without_a_namespace_serves_its_tokens_namespace(tenant: Tenant) -> None:
    tenant.start_worker("examples.quickstart.worker:worker", ORBIT_NAMESPACE="")
    with Client(tenant.server.url, token=tenant.token) as client:
        task = client.submit(tenant.namespace, handler="shop.echo", params={"n": 1})
        assert client.wait(tenant.namespace, task.id, timeout=30).result == {"n": 1}


# --- 12. a server that is down: one clear line ---------------------------------------------


def test_an_unreachable_server_is_one_line_and_exit_5(tenant: Tenant) -> None:
    done = orbit(tenant, "task", "list", "--server", "http://127.0.0.1:9")
    assert done.returncode == 5
    assert done.stderr.splitlines()[0].startswith("error: cannot reach the Orbit server at")
    assert '"level"' not in done.stderr  # no JSON retry warnings


def test_whoami_over_http_names_the_tokens_namespace_and_roles(tenant: Tenant) -> None:
    answer = httpx.get(f"{tenant.server.url}/v1/whoami", headers=tenant.headers).json()
    assert answer == {
        "namespace": tenant.namespace,
        "name": "e2e",
        "roles": ["review", "submit", "work"],
    }


def test_list_watch_prints_a_task_again_each_time_it_changes_until_ctrl_c(
    tenant: Tenant,
) -> None:
    import signal

    watch = subprocess.Popen(
        [ORBIT, "task", "list", "--watch", "--interval", "0.2", "-o", "json"],
        cwd=ROOT,
        env=tenant.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        with Client(tenant.server.url, token=tenant.token) as client:
            task = client.submit(tenant.namespace, handler="x", delay=3600)
            assert watch.stdout is not None
            first = json.loads(watch.stdout.readline())
            client.cancel(tenant.namespace, task.id)
            second = json.loads(watch.stdout.readline())
    finally:
        watch.send_signal(signal.SIGINT)
        watch.wait(30)
    assert (first["id"], first["state"]) == (task.id, "WAITING")
    assert (second["id"], second["state"]) == (task.id, "CANCELLED")
    assert watch.returncode == 0
