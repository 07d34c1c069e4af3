"""Hostile input against the real server on MariaDB, over every route its OpenAPI document
lists (a new route or field is attacked without being named here): non-JSON numbers, huge and
negative integers, 64-level nesting, unicode and control characters, lone surrogates, oversized
strings and wrong types in every body field; odd values in every path and query parameter; ids
of another namespace; tokens of another namespace and of every single role.

Every answer is a problem document below 500 (a refusal of a body field names the field), no
answer of namespace B's token reads or changes anything of namespace A (seed §4: scope checks
cover reads and writes), and valid submissions sent all the while by another tenant are all
accepted (invariant 1)."""

from __future__ import annotations

import functools
import json
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import sqlalchemy as sa

from orbit_store.credentials import create_token
from orbit_store.db import run_transaction

from . import hostile
from .conftest import Server, make_tenant, short_lease_queue

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


def _populate(http: httpx.Client, engine: sa.Engine, server: Server) -> Namespace:
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
        "POST /v1/worker-sessions/{session_id}/lease": {"max_tasks": 1, "wait_seconds": 0},
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


@dataclass
class Verdicts:
    """Every answer that broke a rule, described (the suite fails listing them all)."""

    broken: list[str] = field(default_factory=list)
    answers: int = 0
    statuses: dict[int, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def judge(self, what: str, answer: httpx.Response, *, names: str | None = None) -> None:
        wrong = broken_rule(answer, names)
        with self.lock:
            self.answers += 1
            self.statuses[answer.status_code] = self.statuses.get(answer.status_code, 0) + 1
            if wrong is not None:
                self.broken.append(f"{what}: {wrong}: {answer.status_code} {answer.text[:300]}")


def broken_rule(answer: httpx.Response, names: str | None) -> str | None:
    """Which rule ``answer`` breaks, if any; ``names``: the field a refusal must name."""
    status, json_body = answer.status_code, "json" in answer.headers.get("content-type", "")
    document = answer.json() if json_body else None
    if status >= 500:
        return "a server error"
    if status >= 400 and not (isinstance(document, dict) and document.get("status") == status):
        return "not a problem document"
    if status in (400, 413, 422) and names and not hostile.names(document, names):
        return f"a refusal that does not name {names!r}"
    if status == 422 and "database refused" in answer.text:
        return "refused by the database, not at the door (bound the field in its schema)"
    inner = list(hostile.server_errors(document)) if status < 300 else []
    return f"an item answered with a server error: {inner[0]}" if inner else None


class Submitter(threading.Thread):
    """Valid submissions of a tenant of its own, for as long as the suite attacks."""

    def __init__(self, server: Server, engine: sa.Engine) -> None:
        super().__init__(daemon=True)
        tenant = make_tenant(server, engine, ["submit"])
        self.url = f"{server.url}/v1/namespaces/{tenant.namespace}/tasks"
        self.headers = tenant.headers
        self.stop, self.statuses = threading.Event(), list[int]()

    def run(self) -> None:
        with httpx.Client(headers=self.headers, timeout=60) as http:
            while not self.stop.is_set():
                body = {"handler": "valid.h", "params": {"n": len(self.statuses)}}
                self.statuses.append(http.post(self.url, json=body).status_code)


@pytest.fixture(scope="module")
def world(server: Server, mariadb_engine: sa.Engine) -> Iterator[tuple[Namespace, Namespace]]:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        yield _populate(http, mariadb_engine, server), _populate(http, mariadb_engine, server)


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


def _cases(
    ops: list[hostile.Operation], openapi: dict[str, Any], a: Namespace, b: Namespace
) -> Iterator[tuple[str, Callable[[httpx.Client, Verdicts], None]]]:
    """Every attack: (what it is, a call that sends it and judges the answer)."""
    bodies = base_bodies(b)
    for op in ops:
        if op.body_schema is not None:
            assert op.key in bodies, f"{op.key}: no valid body in base_bodies: add one"
    for op in ops:
        own = path_values(b, op)
        body = bodies.get(op.key)
        yield from _body_attacks(op, openapi, b, own, body)
        yield from _param_attacks(op, b, own, body)
        yield from _cross_namespace(op, a, b, own, body)


def _send(
    http: httpx.Client, op: hostile.Operation, path: str, token: str, content: str | None
) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"}
    if content is not None:
        headers["Content-Type"] = "application/json"
    return http.request(
        op.method,
        path,
        content=content.encode("utf-8", "surrogatepass") if content else None,
        headers=headers,
    )


def _body_attacks(
    op: hostile.Operation, openapi: dict[str, Any], b: Namespace, own: dict[str, str], body: Any
) -> Iterator[tuple[str, Callable[[httpx.Client, Verdicts], None]]]:
    if op.body_schema is None:
        return
    path = url_of(op, own)
    for fpath in hostile.field_paths(openapi, op.body_schema):
        leaf = next(str(p) for p in reversed(fpath) if isinstance(p, str))
        for label, raw in hostile.BODY_VALUES.items():
            content = hostile.with_value(body, fpath, raw)
            what = f"{op.key} body {'.'.join(map(str, fpath))}={label}"

            def attack(
                http: httpx.Client, v: Verdicts, c: str = content, w: str = what, f: str = leaf
            ) -> None:
                v.judge(w, _send(http, op, path, b.token, c), names=f)

            yield what, attack


def _param_attacks(
    op: hostile.Operation, b: Namespace, own: dict[str, str], body: Any
) -> Iterator[tuple[str, Callable[[httpx.Client, Verdicts], None]]]:
    content = json.dumps(body) if body is not None else None
    for name in op.path_params:
        for label, value in hostile.PARAM_VALUES.items():
            path = url_of(op, {**own, name: value})
            what = f"{op.key} path {name}={label}"

            def attack(
                http: httpx.Client, v: Verdicts, p: str = path, w: str = what, n: str = name
            ) -> None:
                v.judge(w, _send(http, op, p, b.token, content), names=n)

            yield what, attack
    for name in op.query_params:
        for label, value in hostile.PARAM_VALUES.items():
            encoded = quote(value.encode("utf-8", "surrogateescape"), safe="")
            path = f"{url_of(op, own)}?{name}={encoded}"
            what = f"{op.key} query {name}={label}"

            def attack(
                http: httpx.Client, v: Verdicts, p: str = path, w: str = what, n: str = name
            ) -> None:
                v.judge(w, _send(http, op, p, b.token, content), names=n)

            yield what, attack


#: Path parameters that name one resource across the whole store (names are per namespace).
ID_PARAMS = frozenset({"task_id", "workflow_id", "session_id", "attempt_id"})


def _cross_namespace(
    op: hostile.Operation, a: Namespace, b: Namespace, own: dict[str, str], body: Any
) -> Iterator[tuple[str, Callable[[httpx.Client, Verdicts], None]]]:
    """B's tokens (all roles, and each role alone) on B's own resources, and aimed at A: A's
    namespace in the path, A's ids in B's namespace, A's attempt with its own secret token (in
    the path or in a batch's items). Aimed at A, only a refusal is right."""
    content = json.dumps(body) if body is not None else None
    theirs = path_values(a, op)
    targets: list[tuple[str, dict[str, str], str | None, bool]] = [("B's own", own, content, False)]
    if "namespace" in own:
        targets.append(("A's namespace", {**own, "namespace": a.name}, content, True))
    if ID_PARAMS & set(op.path_params):
        ids = {p: theirs[p] for p in op.path_params if p != "namespace"}
        targets.append(("A's ids", {**own, **ids}, content, True))
    stolen = {"token": a.ids["attempt_token"]}
    if "attempt_id" in op.path_params and body is not None:
        sent = json.dumps({**body, **stolen})
        targets.append(("A's attempt", {**own, "attempt_id": a.ids["attempt_id"]}, sent, True))
    if isinstance(body, dict) and "attempt_id" in (body.get("items") or [{}])[0]:
        items = [{**body["items"][0], "attempt_id": a.ids["attempt_id"], **stolen}]
        targets.append(("A's attempt in items", own, json.dumps({**body, "items": items}), False))
    query = f"?namespace={a.name}" if "namespace" in op.query_params else ""
    if query:
        targets.append(("A's namespace in the query", own, content, True))
    for label, values, sent, refused in targets:
        for role, token in [("all roles", b.token), *b.role_tokens.items()]:
            what = f"{op.key} with {label}, B's token ({role})"
            path = url_of(op, values) + (query if "query" in label else "")

            def attack(
                http: httpx.Client,
                v: Verdicts,
                p: str = path,
                w: str = what,
                t: str = token,
                c: str | None = sent,
                r: bool = refused,
            ) -> None:
                answer = _send(http, op, p, t, c)
                v.judge(w, answer)
                leaked = op.authenticated and _reached_a(answer, a, sent=p + (c or ""))
                if answer.status_code < 300 and (r or leaked):
                    with v.lock:
                        v.broken.append(f"{w}: answered {answer.status_code}: {answer.text[:300]}")

            yield what, attack


def _attack(
    case: tuple[str, Callable[[httpx.Client, Verdicts], None]], http: httpx.Client, v: Verdicts
) -> None:
    what, send = case
    try:
        send(http, v)
    except httpx.HTTPError as exc:
        with v.lock:
            v.broken.append(f"{what}: no answer: {exc!r}")


def _reached_a(answer: httpx.Response, a: Namespace, sent: str = "") -> bool:
    """The answer carries something of A's (its namespace or one of its ids) that the request
    did not carry itself (a batch answers each item under the id it was sent)."""
    secrets = [a.name, *(v for k, v in a.ids.items() if k != "attempt_token")]
    return any(value in answer.text for value in secrets if value not in sent)


def test_hostile_input_over_every_route_is_refused_by_field_and_never_crosses_namespaces(
    server: Server, mariadb_engine: sa.Engine, world: tuple[Namespace, Namespace]
) -> None:
    a, b = world
    openapi = httpx.get(f"{server.url}/openapi.json").json()
    ops = hostile.operations(openapi)
    assert len(ops) > 40, "every route of the document is attacked"
    verdicts = Verdicts()
    submitter = Submitter(server, mariadb_engine)
    with httpx.Client(base_url=server.url, timeout=120) as http:
        before = snapshot(http, a)
        cases = list(_cases(ops, openapi, a, b))
        submitter.start()
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda case: _attack(case, http, verdicts), cases))
        submitter.stop.set()
        submitter.join(60)
        after = snapshot(http, a)
        reads = [op for op in ops if op.method == "GET" and "namespace" in op.path_params]
        assert all(op.authenticated for op in reads)
        for op in reads:  # what the attacks stored can still be read by B, and none of A's
            answer = http.get(url_of(op, path_values(b, op)), headers=b.headers())
            if _reached_a(answer, a):
                verdicts.broken.append(f"{op.key}: B reads A's data: {answer.text[:300]}")
            verdicts.judge(f"{op.key} read after", answer)
    assert verdicts.broken == [], f"{len(verdicts.broken)} of {verdicts.answers}:\n" + "\n".join(
        verdicts.broken[:60]
    )
    assert before == after, "nothing of namespace A changed"
    assert submitter.statuses and set(submitter.statuses) == {201}, (
        f"valid submissions meanwhile: {len(submitter.statuses)}, "
        f"answered {sorted(set(submitter.statuses))}"
    )
    print(f"{len(cases)} attacks; answers by status {sorted(verdicts.statuses.items())}")
    print(f"{len(submitter.statuses)} valid submissions meanwhile, all 201")
