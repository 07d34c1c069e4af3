"""No read, write or secret crosses a namespace (seed §4: scope checks cover reads and writes;
§11), through every route of the real server on MariaDB. A token holding every role in
namespace ``attacker`` goes after the ``victim`` namespace's task, attempt, worker session,
schedule, workflow definition, workflow, subscription and events — by naming the victim's
namespace, and by naming its own namespace with the victim's ids and names. Every answer is a
403 or 404 problem (or, in a batch, a refused item), never a 5xx, and afterwards the victim's
things are exactly as they were."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from orbit_store.access.credentials import create_token
from orbit_store.db import run_transaction

from ..conftest import Server, Tenant, make_tenant

pytestmark = pytest.mark.slow

ALL_ROLES = ["read", "submit", "work", "review", "admin"]
SPEC = {"steps": [{"name": "approval", "wait": {"signal": "go"}}]}


@dataclass
class Victim:
    tenant: Tenant
    task_id: str  # WAITING, for later
    attempt_id: str  # LEASED, not started
    attempt_token: str
    session_id: str
    workflow_id: str
    event_id: str  # pulled, not acknowledged


def call(tenant: Tenant, method: str, path: str, body: Any = None) -> httpx.Response:
    return httpx.request(
        method, f"{tenant.server.url}{path}", json=body, headers=tenant.headers, timeout=30
    )


def ok(tenant: Tenant, method: str, path: str, body: Any = None) -> Any:
    answer = call(tenant, method, path, body)
    assert answer.is_success, (method, path, answer.status_code, answer.text)
    return answer.json()


@pytest.fixture
def victim(server: Server, mariadb_engine: sa.Engine) -> Victim:
    t = make_tenant(server, mariadb_engine, ALL_ROLES)
    ns = f"/v1/namespaces/{t.namespace}"
    ok(t, "PUT", f"{ns}/subscriptions/receipts", {"mode": "pull"})
    done = ok(t, "POST", f"{ns}/tasks", {"handler": "x.done", "delay_seconds": 3600})
    ok(t, "POST", f"{ns}/tasks/{done['id']}/cancel", {"reason": "an event"})
    (event,) = ok(t, "GET", f"{ns}/subscriptions/receipts/events?ack_deadline_seconds=3600")[
        "events"
    ]
    ok(
        t,
        "POST",
        f"{ns}/schedules",
        {"name": "nightly", "cron": "@daily", "task": {"handler": "x"}},
    )
    ok(t, "POST", f"{ns}/workflow-definitions", {"name": "flow", "spec": SPEC})
    workflow = ok(t, "POST", f"{ns}/workflows", {"definition": "flow"})
    later = ok(t, "POST", f"{ns}/tasks", {"handler": "x.later", "delay_seconds": 3600})
    session = ok(t, "POST", "/v1/worker-sessions", {"namespace": t.namespace, "worker_name": "w"})
    ok(t, "POST", f"{ns}/tasks", {"handler": "x.now"})
    (lease,) = ok(t, "POST", f"/v1/worker-sessions/{session['id']}/lease", {})["leases"]
    return Victim(
        t,
        later["id"],
        lease["attempt_id"],
        lease["token"],
        session["id"],
        workflow["id"],
        event["id"],
    )


@pytest.fixture
def attacker(server: Server, mariadb_engine: sa.Engine) -> Tenant:
    """Every role in its own namespace, with a pull subscription of its own."""
    t = make_tenant(server, mariadb_engine, ALL_ROLES)
    ok(t, "PUT", f"/v1/namespaces/{t.namespace}/subscriptions/mine", {"mode": "pull"})
    return t


def requests_into(v: Victim, namespace: str) -> list[tuple[str, str, Any]]:
    """Every namespaced route, aimed at the victim's things, under ``namespace``."""
    ns = f"/v1/namespaces/{namespace}"
    task, wf = v.task_id, v.workflow_id
    review = {
        "decision": "failed",
        "reason": "x",
        "evidence_ref": "x",
        "expected_state_version": 1,
        "execution_ended": True,
    }
    return [
        ("GET", f"{ns}/tasks", None),
        ("POST", f"{ns}/tasks", {"handler": "planted"}),
        ("POST", f"{ns}/tasks:batch", {"items": [{"handler": "planted"}]}),
        ("GET", f"{ns}/tasks/{task}", None),
        ("POST", f"{ns}/tasks/{task}/cancel", {"reason": "x"}),
        ("POST", f"{ns}/tasks/{task}/review", review),
        (
            "POST",
            f"{ns}/tasks/{task}/retry",
            {"reason": "x", "expected_state_version": 1, "safe_to_retry": True},
        ),
        ("GET", f"{ns}/overview", None),
        ("GET", f"{ns}/worker-sessions", None),
        ("GET", f"{ns}/schedules", None),
        ("GET", f"{ns}/schedules/nightly", None),
        ("PUT", f"{ns}/schedules/nightly", {"cron": "@hourly", "task": {"handler": "z"}}),
        ("DELETE", f"{ns}/schedules/nightly", None),
        ("POST", f"{ns}/schedules/nightly/suspend", {}),
        ("POST", f"{ns}/schedules/nightly/resume", {}),
        ("POST", f"{ns}/schedules/nightly/trigger", {}),
        ("GET", f"{ns}/workflow-definitions/flow", None),
        ("POST", f"{ns}/workflows", {"definition": "flow"}),
        ("GET", f"{ns}/workflows", None),
        ("GET", f"{ns}/workflows/{wf}", None),
        ("GET", f"{ns}/workflows/{wf}/history", None),
        ("POST", f"{ns}/workflows/{wf}/signals", {"signal_id": "s", "name": "go"}),
        ("POST", f"{ns}/workflows/{wf}/pause", {}),
        ("POST", f"{ns}/workflows/{wf}/resume", {}),
        ("POST", f"{ns}/workflows/{wf}/cancel", {}),
        ("GET", f"{ns}/subscriptions", None),
        ("GET", f"{ns}/subscriptions/receipts", None),
        ("DELETE", f"{ns}/subscriptions/receipts?discard_undelivered=true", None),
        ("GET", f"{ns}/subscriptions/receipts/events", None),
        ("POST", f"{ns}/subscriptions/receipts/ack", {"event_ids": [v.event_id]}),
        ("POST", f"{ns}/subscriptions/receipts/redrive", {"reason": "x"}),
    ]


def test_naming_the_victims_namespace_is_forbidden_on_every_route(
    victim: Victim, attacker: Tenant
) -> None:
    paths = requests_into(victim, victim.tenant.namespace)
    paths.append(("GET", f"/v1/audit?namespace={victim.tenant.namespace}", None))
    paths.append(
        ("POST", "/v1/worker-sessions", {"namespace": victim.tenant.namespace, "worker_name": "w"})
    )
    answers = {(m, p): call(attacker, m, p, b) for m, p, b in paths}
    wrong = {k: (a.status_code, a.text[:200]) for k, a in answers.items() if a.status_code != 403}
    assert wrong == {}
    assert_untouched(victim)


def test_the_victims_ids_and_names_under_the_attackers_namespace_find_nothing(
    victim: Victim, attacker: Tenant
) -> None:
    """The attacker's own namespace in the path, the victim's ids and names in it: 404, or
    the attacker's own (empty) lists."""
    expected_success = {  # the attacker's own resources or lists: fine, but never the victim's
        "GET /tasks",
        "POST /tasks",
        "POST /tasks:batch",
        "GET /overview",
        "GET /worker-sessions",
        "GET /schedules",
        "GET /workflows",
        "GET /subscriptions",
    }
    for method, path, body in requests_into(victim, attacker.namespace):
        answer = call(attacker, method, path, body)
        short = f"{method} {path.split(attacker.namespace, 1)[1].split('?')[0]}"
        if short in expected_success:
            assert answer.is_success, (short, answer.text)
            for theirs in (victim.task_id, victim.workflow_id, victim.session_id):
                assert theirs not in answer.text, (short, theirs)
            continue
        assert answer.status_code == 404, (short, answer.status_code, answer.text[:300])
    # Acknowledging the victim's event through the attacker's own subscription acks nothing.
    ns = f"/v1/namespaces/{attacker.namespace}"
    acked = ok(attacker, "POST", f"{ns}/subscriptions/mine/ack", {"event_ids": [victim.event_id]})
    assert acked["results"] == {victim.event_id: "unknown"}
    assert_untouched(victim)


def test_the_victims_session_and_attempt_cannot_be_used_with_another_namespaces_token(
    victim: Victim, attacker: Tenant
) -> None:
    """Worker routes name no namespace: the token's namespace scopes them. The victim's
    session id and its attempt id *with its secret token* still reach nothing."""
    attempt, token = victim.attempt_id, victim.attempt_token
    refused = [
        ("POST", f"/v1/worker-sessions/{victim.session_id}/lease", {}),
        ("POST", f"/v1/worker-sessions/{victim.session_id}/drain", {}),
        ("DELETE", f"/v1/worker-sessions/{victim.session_id}", None),
        ("POST", f"/v1/attempts/{attempt}/start", {"token": token}),
        ("POST", f"/v1/attempts/{attempt}/complete", {"token": token, "outcome": "succeeded"}),
    ]
    for method, path, body in refused:
        answer = call(attacker, method, path, body)
        assert answer.status_code == 404, (method, path, answer.status_code, answer.text[:300])
    batch = [{"attempt_id": attempt, "token": token}]
    started = ok(attacker, "POST", "/v1/attempts:start", {"items": batch})["results"]
    assert [r["status"] for r in started] == ["refused"]
    completed = ok(
        attacker,
        "POST",
        "/v1/attempts:complete",
        {"items": [{**batch[0], "outcome": "failed", "error": {"message": "x"}}]},
    )["results"]
    assert [r["status"] for r in completed] == ["refused"]
    beat = ok(attacker, "POST", "/v1/attempts/heartbeat", {"items": batch})["results"]
    assert [r["status"] for r in beat] == ["lost"]
    beat_session = call(
        attacker, "POST", "/v1/attempts/heartbeat", {"session_id": victim.session_id, "items": []}
    )
    assert beat_session.status_code == 404, beat_session.text
    assert_untouched(victim)


def assert_untouched(v: Victim) -> None:
    """The victim sees everything as the fixture left it."""
    t = v.tenant
    ns = f"/v1/namespaces/{t.namespace}"
    assert ok(t, "GET", f"{ns}/tasks/{v.task_id}")["state"] == "WAITING"
    tasks = ok(t, "GET", f"{ns}/tasks?page_size=50")["items"]
    assert {x["handler"]: x["state"] for x in tasks} == {
        "x.done": "CANCELLED",
        "x.later": "WAITING",
        "x.now": "LEASED",
    }
    workflow = ok(t, "GET", f"{ns}/workflows/{v.workflow_id}")
    assert (workflow["state"], workflow["paused"]) == ("RUNNING", False)
    schedule = ok(t, "GET", f"{ns}/schedules/nightly")
    assert (schedule["version"], schedule["suspend"]) == (1, False)
    assert ok(t, "GET", f"{ns}/workflow-definitions/flow")["latest_version"] == 1
    sub = ok(t, "GET", f"{ns}/subscriptions/receipts")
    assert sub["deliveries"] == {"PENDING": 1, "DELIVERED": 0, "PARKED": 0}
    live = call(t, "POST", f"/v1/worker-sessions/{v.session_id}/lease", {})
    assert live.status_code == 200, "the victim's session is still live"


READ = {"read", "submit", "work", "review"}
#: (method, path after the namespace) → the roles that may call it (admin may call anything).
ROLES = {
    ("GET", "/tasks"): READ,
    ("POST", "/tasks"): {"submit"},
    ("POST", "/tasks:batch"): {"submit"},
    ("GET", "/tasks/{id}"): READ,
    ("POST", "/tasks/{id}/cancel"): {"submit"},
    ("POST", "/tasks/{id}/review"): {"review"},
    ("POST", "/tasks/{id}/retry"): {"review"},
    ("GET", "/overview"): READ,
    ("GET", "/worker-sessions"): READ,
    ("GET", "/schedules"): READ,
    ("GET", "/schedules/nightly"): READ,
    ("PUT", "/schedules/nightly"): {"submit"},
    ("DELETE", "/schedules/nightly"): {"submit"},
    ("POST", "/schedules/nightly/suspend"): {"submit"},
    ("POST", "/schedules/nightly/resume"): {"submit"},
    ("POST", "/schedules/nightly/trigger"): {"submit"},
    ("GET", "/workflow-definitions/flow"): READ,
    ("POST", "/workflows"): {"submit"},
    ("GET", "/workflows"): READ,
    ("GET", "/workflows/{id}"): READ,
    ("GET", "/workflows/{id}/history"): READ,
    ("POST", "/workflows/{id}/signals"): {"submit"},
    ("POST", "/workflows/{id}/pause"): {"submit"},
    ("POST", "/workflows/{id}/resume"): {"submit"},
    ("POST", "/workflows/{id}/cancel"): {"submit"},
    ("GET", "/subscriptions"): READ,
    ("GET", "/subscriptions/receipts"): READ,
    ("DELETE", "/subscriptions/receipts"): set(),
    ("GET", "/subscriptions/receipts/events"): {"submit"},
    ("POST", "/subscriptions/receipts/ack"): {"submit"},
    ("POST", "/subscriptions/receipts/redrive"): set(),
}


def test_a_token_without_the_role_a_route_needs_is_forbidden_and_changes_nothing(
    victim: Victim, mariadb_engine: sa.Engine
) -> None:
    """Tokens of the victim's own namespace holding one role each: every route refuses the
    roles the API reference does not give it (403), before looking anything up."""
    ns = victim.tenant.namespace
    tokens = {
        role: run_transaction(
            mariadb_engine,
            functools.partial(create_token, namespace=ns, name=f"only-{role}", roles=[role]),
        ).token
        for role in ("read", "submit", "work", "review")
    }
    wrong = []
    for method, path, body in requests_into(victim, ns):
        tail = path.split(ns, 1)[1].split("?")[0]
        tail = tail.replace(victim.task_id, "{id}").replace(victim.workflow_id, "{id}")
        allowed = ROLES[(method, tail)]
        for role, token in tokens.items():
            if role in allowed:
                continue
            as_role = Tenant(ns, token, victim.tenant.server)
            answer = call(as_role, method, path, body)
            if answer.status_code != 403:
                wrong.append((role, method, tail, answer.status_code))
    for role in ("read", "submit", "review"):  # the worker protocol needs the work role
        as_role = Tenant(ns, tokens[role], victim.tenant.server)
        for method, path, body in [
            ("POST", "/v1/worker-sessions", {"namespace": ns, "worker_name": "x"}),
            ("POST", f"/v1/worker-sessions/{victim.session_id}/lease", {}),
            ("POST", f"/v1/attempts/{victim.attempt_id}/start", {"token": victim.attempt_token}),
            ("POST", "/v1/attempts/heartbeat", {"items": []}),
        ]:
            answer = call(as_role, method, path, body)
            if answer.status_code != 403:
                wrong.append((role, method, path, answer.status_code))
    for role, token in tokens.items():
        answer = call(Tenant(ns, token, victim.tenant.server), "GET", "/v1/audit", None)
        if answer.status_code != 403:
            wrong.append((role, "GET", "/v1/audit", answer.status_code))
    assert wrong == []
    assert_untouched(victim)
