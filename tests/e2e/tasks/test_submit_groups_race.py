"""Group commit under a real race: client processes submit the same keys, several
times each and in different orders, to two server replicas at once. The replicas' groups
collide on keys (a group then answers each of its requests alone, by its key). Invariant 6:
every key names exactly one task, every answer for a key names that task, exactly one answer
per key is 201 — and every accepted task has its key and its accepted event (invariant 1)."""

from __future__ import annotations

import json
import multiprocessing
import random
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from orbit_store.schema import submission_keys, task_events, tasks

from ..conftest import Server, Tenant, start_server, stop_server

KEYS = 60
PROCESSES = 6


@pytest.fixture
def second_replica(mariadb_url: str, tmp_path: Path) -> Iterator[Server]:
    replica = start_server(mariadb_url, tmp_path / "replica.log")
    yield replica
    stop_server(replica)


def _submitter(urls: list[str], namespace: str, token: str, seed: int, out: str) -> None:
    """Submit every key, in this process's own order, alternating replicas; record the answers."""
    rng = random.Random(seed)
    keys = list(range(KEYS))
    rng.shuffle(keys)
    answers = []
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(headers=headers, timeout=60) as http:
        for n, key in enumerate(keys):
            body = {"handler": "e2e.echo", "params": {"k": key}, "idempotency_key": f"key-{key}"}
            r = http.post(f"{urls[n % 2]}/v1/namespaces/{namespace}/tasks", json=body)
            answers.append((key, r.status_code, r.json().get("id")))
    Path(out).write_text(json.dumps(answers))


def test_concurrent_submissions_of_the_same_keys_to_two_replicas_make_one_task_each_inv6(
    tenant: Tenant, second_replica: Server, mariadb_engine: sa.Engine, tmp_path: Path
) -> None:
    urls = [tenant.server.url, second_replica.url]
    ctx = multiprocessing.get_context("spawn")
    outs = [tmp_path / f"answers-{i}.json" for i in range(PROCESSES)]
    procs = [
        ctx.Process(target=_submitter, args=(urls, tenant.namespace, tenant.token, i, str(out)))
        for i, out in enumerate(outs)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(120)
        assert proc.exitcode == 0
    answers = [tuple(a) for out in outs for a in json.loads(out.read_text())]
    assert len(answers) == KEYS * PROCESSES
    assert {code for _, code, _ in answers} <= {200, 201}, "each answered as a lone submission"
    by_key: dict[int, set[str]] = {}
    for key, _, task_id in answers:
        by_key.setdefault(key, set()).add(task_id)
    assert all(len(ids) == 1 for ids in by_key.values()), "one task per key in every answer"
    created = sorted(key for key, code, _ in answers if code == 201)
    assert created == list(range(KEYS)), "exactly one 201 per key"
    with mariadb_engine.connect() as conn:
        stored = dict(
            conn.execute(
                sa.select(submission_keys.c.idempotency_key, submission_keys.c.task_id).where(
                    submission_keys.c.namespace == tenant.namespace
                )
            ).all()
        )
        count = conn.execute(
            sa.select(sa.func.count()).where(tasks.c.namespace == tenant.namespace)
        ).scalar_one()
        accepted = conn.execute(
            sa.select(sa.func.count()).where(
                task_events.c.namespace == tenant.namespace, task_events.c.reason == "submitted"
            )
        ).scalar_one()
    assert count == KEYS and accepted == KEYS
    assert stored == {f"key-{key}": ids.pop() for key, ids in by_key.items()}
