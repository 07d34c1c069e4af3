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

import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import sqlalchemy as sa

from ..conftest import Server, make_tenant
from . import hostile
from .hostile_world import Namespace, base_bodies, path_values, populate, snapshot, url_of


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
            self.note(f"{what}: {wrong}: {answer.status_code} {answer.text[:300]}")

    def note(self, broken: str) -> None:
        with self.lock:
            self.broken.append(broken)


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
        yield populate(http, mariadb_engine, server), populate(http, mariadb_engine, server)


@dataclass(frozen=True)
class Attack:
    """One request of the suite and what its answer must be."""

    what: str
    op: hostile.Operation
    path: str
    token: str
    content: str | None
    names: str | None = None  # the field a refusal must name
    refused: bool = False  # aimed at A: only a refusal is right

    def send(self, http: httpx.Client, verdicts: Verdicts, a: Namespace) -> None:
        headers = {"Authorization": f"Bearer {self.token}"}
        if self.content is not None:
            headers["Content-Type"] = "application/json"
        body = self.content.encode("utf-8", "surrogatepass") if self.content else None
        try:
            answer = http.request(self.op.method, self.path, content=body, headers=headers)
        except httpx.HTTPError as exc:
            verdicts.note(f"{self.what}: no answer: {exc!r}")
            return
        verdicts.judge(self.what, answer, names=self.names)
        sent = self.path + (self.content or "")
        leaked = self.op.authenticated and _reached_a(answer, a, sent)
        if answer.status_code < 300 and (self.refused or leaked):
            verdicts.note(f"{self.what}: answered {answer.status_code}: {answer.text[:300]}")


def _attacks(
    ops: list[hostile.Operation], openapi: dict[str, Any], a: Namespace, b: Namespace
) -> Iterator[Attack]:
    """Every request of the suite, route by route."""
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


def _body_attacks(
    op: hostile.Operation, openapi: dict[str, Any], b: Namespace, own: dict[str, str], body: Any
) -> Iterator[Attack]:
    if op.body_schema is None:
        return
    for fpath in hostile.field_paths(openapi, op.body_schema):
        leaf = next(str(p) for p in reversed(fpath) if isinstance(p, str))
        for label, raw in hostile.BODY_VALUES.items():
            what = f"{op.key} body {'.'.join(map(str, fpath))}={label}"
            content = hostile.with_value(body, fpath, raw)
            yield Attack(what, op, url_of(op, own), b.token, content, names=leaf)


def _param_attacks(
    op: hostile.Operation, b: Namespace, own: dict[str, str], body: Any
) -> Iterator[Attack]:
    content = json.dumps(body) if body is not None else None
    for name in op.path_params:
        for label, value in hostile.PARAM_VALUES.items():
            path = url_of(op, {**own, name: value})
            yield Attack(f"{op.key} path {name}={label}", op, path, b.token, content, names=name)
    for name in op.query_params:
        for label, value in hostile.PARAM_VALUES.items():
            encoded = quote(value.encode("utf-8", "surrogateescape"), safe="")
            path = f"{url_of(op, own)}?{name}={encoded}"
            yield Attack(f"{op.key} query {name}={label}", op, path, b.token, content, names=name)


#: Path parameters that name one resource across the whole store (names are per namespace).
ID_PARAMS = frozenset({"task_id", "workflow_id", "session_id", "attempt_id"})


def _cross_namespace(
    op: hostile.Operation, a: Namespace, b: Namespace, own: dict[str, str], body: Any
) -> Iterator[Attack]:
    """B's tokens (all roles, and each role alone) on B's own resources, and aimed at A: A's
    namespace in the path or the query, A's ids in B's namespace, A's attempt with its own
    secret token (in the path or in a batch's items). Aimed at A, only a refusal is right."""
    content = json.dumps(body) if body is not None else None
    theirs, path = path_values(a, op), url_of(op, own)
    targets: list[tuple[str, str, str | None, bool]] = [("B's own", path, content, False)]
    if "namespace" in own:
        targets.append(("A's namespace", url_of(op, {**own, "namespace": a.name}), content, True))
    if "namespace" in op.query_params:
        targets.append(("A's namespace in the query", f"{path}?namespace={a.name}", content, True))
    if ID_PARAMS & set(op.path_params):
        ids = {p: theirs[p] for p in op.path_params if p != "namespace"}
        targets.append(("A's ids", url_of(op, {**own, **ids}), content, True))
    stolen = {"attempt_id": a.ids["attempt_id"], "token": a.ids["attempt_token"]}
    if "attempt_id" in op.path_params and body is not None:
        theft = json.dumps({**body, "token": stolen["token"]})
        target = url_of(op, {**own, "attempt_id": stolen["attempt_id"]})
        targets.append(("A's attempt", target, theft, True))
    if isinstance(body, dict) and "attempt_id" in (body.get("items") or [{}])[0]:
        items = json.dumps({**body, "items": [{**body["items"][0], **stolen}]})
        targets.append(("A's attempt in items", path, items, False))
    for label, url, payload, refused in targets:
        for role, token in [("all roles", b.token), *b.role_tokens.items()]:
            what = f"{op.key} with {label}, B's token ({role})"
            yield Attack(what, op, url, token, payload, refused=refused)


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
        attacks = list(_attacks(ops, openapi, a, b))
        submitter.start()
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda attack: attack.send(http, verdicts, a), attacks))
        submitter.stop.set()
        submitter.join(60)
        after = snapshot(http, a)
        reads = [op for op in ops if op.method == "GET" and "namespace" in op.path_params]
        assert all(op.authenticated for op in reads)
        for op in reads:  # what the attacks stored can still be read by B, and none of A's
            answer = http.get(url_of(op, path_values(b, op)), headers=b.headers())
            if _reached_a(answer, a):
                verdicts.note(f"{op.key}: B reads A's data: {answer.text[:300]}")
            verdicts.judge(f"{op.key} read after", answer)
    assert verdicts.broken == [], f"{len(verdicts.broken)} of {verdicts.answers}:\n" + "\n".join(
        verdicts.broken[:60]
    )
    assert before == after, "nothing of namespace A changed"
    assert submitter.statuses and set(submitter.statuses) == {201}, (
        f"valid submissions meanwhile: {len(submitter.statuses)}, "
        f"answered {sorted(set(submitter.statuses))}"
    )
    print(f"{len(attacks)} attacks; answers by status {sorted(verdicts.statuses.items())}")
    print(f"{len(submitter.statuses)} valid submissions meanwhile, all 201")
