"""An outcome wakes the Weave inbox loop only when a workflow waits on it: a workflow step's
outcome is applied at once (seed §6.3), while a plain task's outcome, which writes no inbox row,
costs no inbox pass (a drain of plain tasks would otherwise run one pass per report batch). The
app runs in process on MariaDB; ``ctx.wake_weave`` is the app's own hook to the loop."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from .conftest import Api
from .test_workflows import _start, flows  # noqa: F401 (fixture)


def _wakes(api: Api) -> list[str]:
    woken: list[str] = []
    api.app.state.ctx.wake_weave = lambda: woken.append("woken")
    return woken


def _session(http: TestClient, api: Api, handler: str) -> str:
    body = {"namespace": api.namespace, "worker_name": "w", "handlers": [handler]}
    answer = http.post("/v1/worker-sessions", json=body)
    assert answer.status_code == 201, answer.text
    return str(answer.json()["id"])


def _leases(http: TestClient, session: str, handler: str, **more: Any) -> dict[str, Any]:
    body = {"max_tasks": 2, "start_handlers": [handler], **more}
    answer = http.post(f"/v1/worker-sessions/{session}/lease", json=body)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def _report(lease: dict[str, Any]) -> dict[str, Any]:
    return {"attempt_id": lease["attempt_id"], "token": lease["token"], "outcome": "succeeded"}


def test_plain_tasks_outcomes_do_not_wake_the_inbox_loop(api: Api, http: TestClient) -> None:
    woken = _wakes(api)
    api.submit(), api.submit()
    session = _session(http, api, "h")
    first, second = _leases(http, session, "h")["leases"]

    on_lease = _leases(http, session, "h", reports=[_report(first)])["reports"]
    body = {"token": second["token"], "outcome": "succeeded"}
    alone = http.post(f"/v1/attempts/{second['attempt_id']}/complete", json=body)

    assert [r["outcome_status"] for r in on_lease] == ["applied"]
    assert alone.status_code == 200 and alone.json()["status"] == "applied", alone.text
    assert woken == []


def test_a_workflow_steps_outcome_wakes_the_inbox_loop(
    admin_api: Api,
    flows: TestClient,  # noqa: F811 (the fixture)
) -> None:
    woken = _wakes(admin_api)
    _start(flows, admin_api, input={"n": 7})
    session = _session(flows, admin_api, "shop.echo")
    (step,) = _leases(flows, session, "shop.echo")["leases"]

    answer = _leases(flows, session, "shop.echo", reports=[_report(step)])["reports"]

    assert [r["outcome_status"] for r in answer] == ["applied"]
    assert woken == ["woken"]
