"""The world the hostile-input suite (test_hostile_input.py) attacks: two namespaces with one
of each resource — a waiting task, a running attempt with its session, a workflow definition
and a workflow waiting for a signal, a schedule, a subscription — and tokens with every role
and each role alone; a valid body for each route; and what a reader of a namespace sees of it,
to tell that nothing changed."""

from __future__ import annotations

import functools
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx
import sqlalchemy as sa

from orbit_store.access.credentials import create_token
from orbit_store.db import run_transaction

from ..conftest import Server, make_tenant, short_lease_queue
from . import hostile

SPEC = {
    "steps": [
        {"name": "first", "task": {"handler": "hostile.step", "params": {"n": "${input.n}"}}},
        {"name": "approval", "dependsOn": ["first"], "wait": {"signal": "go"}},
    ]
}
#: Fields of A's resources that change by themselves (clocks, a worker seen or not).
VOLATILE = {"runnable_by_live_worker", "inbox_lag_seconds", "inbox_oldest_age_seconds", "detail"}
ROLES = ("submit", "work", "review", "admin")


@dataclass
class Namespace:
    """A namespace with one of each resource and tokens: all roles, and each role alone."""

    name: str
    token: str
    role_tokens: dict[str, str]
    ids: dict[str, str] = field(default_factory=dict)

    def headers(self, token: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {token or self.token}"}


def populate(http: httpx.Client, engine: sa.Engine, server: Server) -> Namespace:
    tenant = make_tenant(server, engine, list(ROLES))
    roles = {role: _token_in(engine, tenant.namespace, role) for role in ROLES}
    ns = Namespace(tenant.namespace, tenant.token, roles)
    queue = short_lease_queue(engine, tenant, "long", lease_seconds=3600)
    base, h = f"/v1/namespaces/{ns.name}", ns.headers()

    def ok(answer: httpx.Response) -> Any:
        assert answer.status_code < 300, answer.text
        return answer.json() if answer.content else None

    waiting = ok(http.post(f"{base}/tasks", json={"handler": "hostile.h"}, headers=h))
    ns.ids["task_id"] = waiting["id"]
    running = {"handler": "hostile.run", "queue": queue}
    ok(http.post(f"{base}/tasks", json=running, headers=h))
    session = ok(
        http.post(
            "/v1/worker-sessions",
            json={
                "namespace": ns.name,
                "worker_name": "owner",
                "queues": [queue],
                "handlers": ["hostile.run"],
                "ttl_seconds": 3600,
            },
            headers=h,
        )
    )
    ns.ids["session_id"] = session["id"]
    lease = ok(
        http.post(
            f"/v1/worker-sessions/{session['id']}/lease",
            json={"max_tasks": 1, "wait_seconds": 5},
            headers=h,
        )
    )["leases"][0]
    ns.ids |= {"attempt_id": lease["attempt_id"], "attempt_token": lease["token"]}
    ns.ids["running_task_id"] = lease["task_id"]
    start = {"token": lease["token"]}
    ok(http.post(f"/v1/attempts/{lease['attempt_id']}/start", json=start, headers=h))
    definition = {"name": "flow", "spec": SPEC}
    ok(http.post(f"{base}/workflow-definitions", json=definition, headers=h))
    workflow = {"definition": "flow", "input": {"n": 1}}
    ns.ids["workflow_id"] = ok(http.post(f"{base}/workflows", json=workflow, headers=h))["id"]
    schedule = {"name": "nightly", "cron": "0 3 * * *", "suspend": True, "task": {"handler": "x"}}
    ok(http.post(f"{base}/schedules", json=schedule, headers=h))
    ok(http.put(f"{base}/subscriptions/sub", json={"mode": "pull"}, headers=h))
    return ns


def _token_in(engine: sa.Engine, namespace: str, role: str) -> str:
    """A token of ``namespace`` with ``role`` alone."""
    issued = run_transaction(
        engine,
        functools.partial(create_token, namespace=namespace, name=f"only-{role}", roles=[role]),
    )
    return issued.token


def base_bodies(b: Namespace) -> dict[str, Any]:
    """A valid body of each route that takes one (attacked field by field). A route with a body
    not listed here fails the suite: add what a valid request to it looks like."""
    wid, attempt, token = b.ids["workflow_id"], b.ids["attempt_id"], b.ids["attempt_token"]
    ns = "/v1/namespaces/{namespace}"
    review = {"reason": "r", "evidence_ref": "e", "expected_state_version": 1, "decision": "failed"}
    return {
        f"POST {ns}/tasks": {"handler": "hostile.h", "params": {"n": 1}},
        f"POST {ns}/tasks:batch": {"items": [{"handler": "hostile.h"}]},
        f"POST {ns}/tasks/{{task_id}}/cancel": {"reason": "r"},
        f"POST {ns}/tasks/{{task_id}}/review": {**review, "execution_ended": True},
        f"POST {ns}/tasks/{{task_id}}/retry": {
            "reason": "r",
            "expected_state_version": 1,
            "safe_to_retry": True,
        },
        "POST /v1/worker-sessions": {"namespace": b.name, "worker_name": "hostile"},
        "POST /v1/worker-sessions/{session_id}/lease": {
            "max_tasks": 1,
            "wait_seconds": 0,
            "reports": [{"attempt_id": attempt, "token": token, "outcome": "unknown"}],
        },
        "POST /v1/attempts/{attempt_id}/start": {"token": token},
        "POST /v1/attempts/heartbeat": {"items": [{"attempt_id": attempt, "token": token}]},
        "POST /v1/attempts/{attempt_id}/complete": {"token": token, "outcome": "unknown"},
        "POST /v1/attempts:start": {"items": [{"attempt_id": attempt, "token": token}]},
        "POST /v1/attempts:complete": {
            "items": [{"attempt_id": attempt, "token": token, "outcome": "unknown"}]
        },
        f"POST {ns}/schedules": {
            "name": "hostile",
            "cron": "0 3 * * *",
            "suspend": True,
            "task": {"handler": "hostile.h"},
        },
        f"POST {ns}/schedules/preview": {"cron": "0 3 * * *"},
        f"PUT {ns}/schedules/{{name}}": {"cron": "0 4 * * *", "task": {"handler": "x"}},
        f"POST {ns}/schedules/{{name}}/suspend": {"reason": "r"},
        f"POST {ns}/schedules/{{name}}/resume": {"reason": "r"},
        f"POST {ns}/schedules/{{name}}/trigger": {"reason": "r"},
        f"POST {ns}/workflow-definitions": {"name": "flow", "spec": SPEC},
        f"POST {ns}/workflows": {"definition": "flow", "input": {"n": 2}},
        f"POST {ns}/workflows/{{workflow_id}}/signals": {"signal_id": f"s-{wid}", "name": "go"},
        f"POST {ns}/workflows/{{workflow_id}}/pause": {"reason": "r"},
        f"POST {ns}/workflows/{{workflow_id}}/resume": {"reason": "r"},
        f"POST {ns}/workflows/{{workflow_id}}/cancel": {"reason": "r"},
        f"PUT {ns}/subscriptions/{{name}}": {"mode": "pull"},
        f"POST {ns}/subscriptions/{{name}}/ack": {"event_ids": [str(uuid.uuid4())]},
        f"POST {ns}/subscriptions/{{name}}/redrive": {"reason": "r"},
        "POST /v1/admin/restore-fence": {"reason": "r"},
        "POST /v1/admin/restore-fence/reopen": {"reason": "r"},
    }


def path_values(ns: Namespace, op: hostile.Operation) -> dict[str, str]:
    """``ns``'s own value for each path parameter of ``op``. A parameter not known here fails
    the suite: say which of the namespace's resources it names."""
    segment = op.path.split("/{name}")[0].rsplit("/", 1)[-1] if "{name}" in op.path else ""
    names = {"schedules": "nightly", "subscriptions": "sub", "workflow-definitions": "flow"}
    known = {"namespace": ns.name, **ns.ids, "name": names.get(segment, "")}
    missing = [p for p in op.path_params if not known.get(p)]
    assert not missing, f"{op.key}: no value for path parameter(s) {missing}: add one"
    return {p: known[p] for p in op.path_params}


def url_of(op: hostile.Operation, values: dict[str, str]) -> str:
    path = op.path
    for name, value in values.items():
        encoded = quote(value.encode("utf-8", "surrogateescape"), safe="")
        path = path.replace("{" + name + "}", encoded)
    return path


def snapshot(http: httpx.Client, a: Namespace) -> dict[str, Any]:
    """What a reader of namespace A sees of everything in it."""
    base, h = f"/v1/namespaces/{a.name}", a.headers()
    reads = [
        f"{base}/tasks?page_size=500",
        f"{base}/tasks/{a.ids['task_id']}",
        f"{base}/tasks/{a.ids['running_task_id']}",
        f"{base}/workflows/{a.ids['workflow_id']}",
        f"{base}/workflows/{a.ids['workflow_id']}/history",
        f"{base}/workflows",
        f"{base}/workflow-definitions/flow",
        f"{base}/schedules/nightly",
        f"{base}/schedules",
        f"{base}/subscriptions",
    ]
    return {path: _stable(http.get(path, headers=h).json()) for path in reads}


def _stable(document: Any) -> Any:
    if isinstance(document, dict):
        return {k: _stable(v) for k, v in document.items() if k not in VOLATILE}
    if isinstance(document, list):
        return [_stable(v) for v in document]
    return document
