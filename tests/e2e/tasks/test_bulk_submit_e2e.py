"""Bulk submission through the real server: ``Client.submit_many``, its async twin and
``orbit task submit-many`` — one result per item, refusals per item, keys that make a re-run a
replay (invariants 1, 6 per item)."""

from __future__ import annotations

import asyncio
import json
import subprocess

from orbit_sdk import AsyncClient, Client, NotFound

from ..conftest import ORBIT, ROOT, Tenant


def _orbit(tenant: Tenant, *args: str, stdin: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ORBIT, "task", "submit-many", *args],
        cwd=ROOT,
        env=tenant.env(),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_submit_many_answers_each_item_in_order_across_requests(tenant: Tenant) -> None:
    items = [{"handler": "h", "params": {"i": i}, "idempotency_key": f"k{i}"} for i in range(25)]
    items.append({"handler": "h", "queue": "undeclared"})
    seen: list[tuple[int, int]] = []
    with Client(tenant.server.url, token=tenant.token) as client:
        results = client.submit_many(
            tenant.namespace, items, batch_size=10, on_progress=lambda *p: seen.append(p)
        )
        again = client.submit_many(tenant.namespace, items[:25])
        task = client.get(tenant.namespace, results[7].task_id or "")
    assert [r.index for r in results] == list(range(26))
    assert [r.status for r in results] == ["created"] * 25 + ["refused"]
    assert isinstance(results[25].error, NotFound), "the error a single submit raises"
    assert seen == [(10, 10), (20, 20), (26, 25)]
    assert task.params == {"i": 7}
    assert [r.status for r in again] == ["replayed"] * 25
    assert [r.task_id for r in again] == [r.task_id for r in results[:25]]


def test_the_async_client_submits_many_too(tenant: Tenant) -> None:
    async def scenario() -> list[str]:
        async with AsyncClient(tenant.server.url, token=tenant.token) as client:
            results = await client.submit_many(tenant.namespace, [{"handler": "h"}] * 3)
        return [r.status for r in results]

    assert asyncio.run(scenario()) == ["created"] * 3


def test_the_cli_reads_json_lines_reports_per_line_and_exits_truthfully(tenant: Tenant) -> None:
    lines = "\n".join(json.dumps({"handler": "h", "params": {"n": n}}) for n in range(3))
    ok = _orbit(tenant, "-f", "-", "--key-prefix", "file-a:", "-o", "json", stdin=lines + "\n")
    assert ok.returncode == 0, ok.stderr
    assert "sent 3/3, 3 accepted" in ok.stderr
    first = [r["status"] for r in json.loads(ok.stdout)["items"]]
    rerun = _orbit(tenant, "-f", "-", "--key-prefix", "file-a:", "-o", "json", stdin=lines)
    assert (first, [r["status"] for r in json.loads(rerun.stdout)["items"]]) == (
        ["created"] * 3,
        ["replayed"] * 3,
    )
    mixed = _orbit(tenant, "-f", "-", stdin=lines + '\n{"handler": "h", "queue": "nope"}\n')
    assert mixed.returncode == 1, mixed.stderr
    assert "1 of 4 lines were not accepted" in mixed.stderr
    assert "refused" in mixed.stdout and "nope" in mixed.stdout
    bad = _orbit(tenant, "-f", "-", stdin='{"handler": "h"}\n{"handler": "h", "colour": 1}\n')
    assert bad.returncode == 2 and "line 2: unknown field 'colour'" in bad.stderr
