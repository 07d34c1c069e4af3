"""The web console in Debian's chromium against a real server on MariaDB with real workers: a
person signs in with a token, finds a task by its key, resolves a stuck task (seed invariant 7:
an unknown outcome is held for review, not run again; invariant 8: the review and the retry are
audited with identity and reason), watches a workflow's graph advance as its signal is sent,
suspends a schedule; a read-only token sees no action controls and the server refuses a forged
action; another namespace's token sees nothing of this one."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from e2e.conftest import ORBIT, free_port, wait_until
from playwright.sync_api import expect

from .conftest import Screens, Tenant, sign_in

Page = Any
LIVE = 60_000  # ms: generous, what the page shows depends on workers and engine loops
#: Labels and contrast, checked in the page (tests/ui/readable.js).
READABLE = Path(__file__).with_name("readable.js").read_text()

ORDER_FLOW = {
    "steps": [
        {"name": "prepare", "task": {"handler": "ui.echo", "params": {"order": "${input.order}"}}},
        {
            "name": "approval",
            "dependsOn": ["prepare"],
            "wait": {"signal": "approved", "timeoutSeconds": 3600, "onTimeout": "fail"},
        },
        {
            "name": "ship",
            "dependsOn": ["approval"],
            "task": {"handler": "ui.echo", "params": {"order": "${input.order}"}},
        },
    ]
}


def _state(page: Page) -> Any:
    """The state badge under the page's title."""
    return page.locator(".page-head .subtitle .state").first


def _rows(page: Page, text: str = "") -> Any:
    rows = page.locator("table tbody tr")
    return rows.filter(has_text=text) if text else rows


def test_sign_in_with_a_token_and_find_a_task_by_its_key(
    tenant: Tenant, page_for: Callable[..., Page], screens: Screens
) -> None:
    tenant.start_worker()
    with tenant.api as api:
        for n in range(3):
            body = {"handler": "ui.echo", "params": {"n": n}, "idempotency_key": f"other-{n}"}
            api.post("/tasks", json=body).raise_for_status()
        wanted = api.post(
            "/tasks",
            json={"handler": "ui.echo", "params": {"order": 42}, "idempotency_key": "order-42"},
        ).json()
    page = page_for()

    # A shared link to a page asks for the token first, then opens that page.
    page.goto(f"{tenant.server.url}/ui/ns/{tenant.namespace}/tasks")
    expect(page).to_have_url(re.compile(r"/ui/login\?next="))
    screens.save(page, "login")
    page.get_by_label("API token").fill(tenant.token)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(re.compile(rf"/ui/ns/{tenant.namespace}/tasks$"))
    expect(_rows(page)).to_have_count(4)

    page.get_by_label("Idempotency key").fill("order-42")
    page.get_by_role("button", name="Apply filters").click()
    expect(page).to_have_url(re.compile(r"\?key=order-42$"))
    expect(_rows(page)).to_have_count(1)
    expect(_rows(page).first).to_contain_text(wanted["id"])
    screens.save(page, "tasks")

    _rows(page).first.get_by_role("link", name=wanted["id"]).click()
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Task {wanted['id']}")
    expect(_state(page)).to_have_text("SUCCEEDED", timeout=LIVE)
    expect(page.locator("pre.json").first).to_contain_text('"order": 42')
    screens.save(page, "task")


def test_a_stuck_task_is_found_reviewed_and_retried_from_the_console_inv7_inv8(
    tenant: Tenant, page_for: Callable[..., Page], screens: Screens
) -> None:
    tenant.queue("payments", lease_seconds=2)
    worker = tenant.start_worker("payments")
    with tenant.api as api:
        task = api.post(
            "/tasks",
            json={"queue": "payments", "handler": "ui.charge", "params": {"order": 7}},
        ).json()
    wait_until(lambda: (tenant.records / "charge-7").exists())
    worker.kill()  # lost in the middle of an unsafe charge: did it charge? Nobody knows
    worker.wait(10)
    page = page_for()
    page.clock.install()  # the overview polls every 10 s: its next round is brought forward
    sign_in(page, tenant.server, tenant.token)

    with tenant.api as api:  # the reaper holds the lapsed unsafe task in real time
        wait_until(lambda: api.get(f"/tasks/{task['id']}").json()["state"] == "NEEDS_REVIEW")
    page.clock.run_for(10_000)
    waiting = page.locator(".alert", has_text="tasks waiting for review")
    expect(waiting.locator("strong")).to_have_text("1", timeout=LIVE)
    expect(page.locator(".alert", has_text="leases lapsed").locator("strong")).to_have_text("1")
    screens.save(page, "overview")
    waiting.get_by_role("link").click()
    expect(page).to_have_url(re.compile(r"/review$"))
    expect(_rows(page, task["id"])).to_contain_text("lease lapsed while running (unsafe)")
    expect(_rows(page, task["id"])).to_contain_text("LAPSED")
    screens.save(page, "review")

    page.get_by_role("link", name=f"Open task {task['id']} to review it").click()
    expect(page.locator(".where")).to_contain_text("Held for review")
    expect(page.get_by_role("region", name="Attempts")).to_contain_text("LAPSED")
    page.get_by_role("button", name="Review…").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_label("It failed (no effect happened)").check()
    dialog.get_by_label("Evidence").fill("payment provider: no charge for order 7")
    dialog.get_by_label("Reason").fill("worker lost before the charge")
    dialog.get_by_label("No handler of this task is still running").check()
    screens.save(page, "task-review")
    dialog.get_by_role("button", name="Record the review").click()
    expect(_state(page)).to_have_text("FAILED")

    page.get_by_role("button", name="Retry…").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_label("Reason").fill("the charge did not happen: charge again")
    dialog.get_by_label("Running it again is safe").check()
    dialog.get_by_role("button", name="Create the retry").click()
    expect(page.get_by_role("heading", level=1)).not_to_have_text(f"Task {task['id']}")
    retry_id = page.url.rsplit("/", 1)[1]
    tenant.start_worker("payments")
    expect(_state(page)).to_have_text("SUCCEEDED", timeout=LIVE)
    expect(page.get_by_label("result", exact=True)).to_contain_text("charged")

    page.get_by_role("link", name="of the task it retries").click()
    expect(_rows(page)).to_have_count(2)
    expect(_rows(page, "task.review")).to_contain_text("worker lost before the charge")
    expect(_rows(page, "task.review")).to_contain_text("payment provider: no charge")
    expect(_rows(page, "task.retry")).to_contain_text("charge again")
    screens.save(page, "audit")

    with tenant.api as api:
        original, retry = (api.get(f"/tasks/{i}").json() for i in (task["id"], retry_id))
    assert (original["state"], retry["state"], retry["retry_of"]) == (
        "FAILED",
        "SUCCEEDED",
        task["id"],
    )


def test_a_workflow_graph_advances_live_as_its_signal_is_sent(
    tenant: Tenant, page_for: Callable[..., Page], screens: Screens
) -> None:
    tenant.start_worker()
    with tenant.api as api:
        api.post("/workflow-definitions", json={"name": "ui-order", "spec": ORDER_FLOW})
        flow = api.post(
            "/workflows", json={"definition": "ui-order", "input": {"order": 9}, "start_key": "o9"}
        ).json()
    page = page_for()
    sign_in(page, tenant.server, tenant.token)
    page.get_by_role("link", name="Workflows").click()
    expect(_rows(page, flow["id"])).to_have_count(1)
    screens.save(page, "workflows")
    page.get_by_role("link", name=flow["id"]).click()

    def step(name: str) -> Any:
        return page.locator(f'g.dag-node[data-step="{name}"]')

    expect(step("approval")).to_have_attribute("data-phase", "signal", timeout=LIVE)
    expect(step("prepare")).to_have_attribute("data-phase", "succeeded")
    expect(step("ship")).to_have_attribute("data-phase", "pending")
    screens.save(page, "workflow")
    page.evaluate("window.stillThisPage = true")  # the graph changes without a page load

    page.get_by_role("button", name="Send signal…").click()
    dialog = page.get_by_role("dialog")
    expect(dialog.get_by_label("Signal name")).to_have_value("approved")
    dialog.get_by_label("Payload (JSON)").fill('{"by": "ops"}')
    dialog.get_by_role("button", name="Send").click()

    expect(step("approval")).to_have_attribute("data-phase", "succeeded", timeout=LIVE)
    expect(step("ship")).to_have_attribute("data-phase", "succeeded", timeout=LIVE)
    expect(_state(page)).to_have_text("SUCCEEDED", timeout=LIVE)
    assert page.evaluate("window.stillThisPage") is True


def test_suspend_and_trigger_a_schedule_from_the_console(
    tenant: Tenant, page_for: Callable[..., Page], screens: Screens
) -> None:
    with tenant.api as api:
        api.post(
            "/schedules",
            json={
                "name": "nightly",
                "cron": "30 2 * * *",
                "time_zone": "Europe/Berlin",
                "task": {"handler": "ui.echo"},
            },
        ).raise_for_status()
    page = page_for()
    sign_in(page, tenant.server, tenant.token)
    page.get_by_role("link", name="Schedules").click()
    row = _rows(page, "nightly")
    expect(row.locator(".state")).to_have_text("Active")

    row.get_by_role("button", name="Suspend…").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_label("Reason").fill("database maintenance tonight")
    dialog.get_by_role("button", name="Suspend").click()
    expect(row.locator(".state")).to_have_text("Suspended")
    expect(row.get_by_role("button", name="Resume…")).to_be_visible()
    screens.save(page, "schedules")

    row.get_by_role("link", name="nightly").click()
    page.get_by_role("button", name="Trigger now…").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_label("Reason").fill("the report is needed before the meeting")
    dialog.get_by_role("button", name="Trigger now").click()
    ledger = page.get_by_role("region", name="Occurrences, newest first")
    expect(ledger.locator("tbody tr")).to_have_count(1)
    expect(ledger.locator("tbody tr")).to_contain_text("Manual")
    fires = page.get_by_role("region", name="Next fires of nightly")
    expect(fires.locator("tbody tr")).to_have_count(5)
    expect(fires).to_contain_text(re.compile(r"02:30(:00)? \+0[12]:00"))
    expect(fires).to_contain_text(re.compile("Central European (Standard|Summer) Time"))  # DST
    screens.save(page, "schedule")
    with tenant.api as api:
        assert api.get("/schedules/nightly").json()["suspend"] is True
        audit = httpx_get(tenant, "/v1/audit", action="schedule.*")
    assert [(e["action"], e["reason"]) for e in audit["items"]] == [
        ("schedule.trigger", "the report is needed before the meeting"),
        ("schedule.suspend", "database maintenance tonight"),
        ("schedule.create", "create through the API"),
    ]


def httpx_get(tenant: Tenant, path: str, **params: str) -> Any:
    with tenant.api as api:
        answer = api.get(f"{tenant.server.url}{path}", params=params)
    answer.raise_for_status()
    return answer.json()


def test_bulk_cancel_says_what_happens_to_each_task_then_does_it(
    tenant: Tenant, page_for: Callable[..., Page], screens: Screens
) -> None:
    tenant.start_worker()
    with tenant.api as api:
        done = api.post("/tasks", json={"handler": "ui.echo"}).json()
        later = [
            api.post("/tasks", json={"handler": "ui.echo", "delay_seconds": 3600}).json()
            for _ in range(2)
        ]
        wait_until(lambda: api.get(f"/tasks/{done['id']}").json()["state"] == "SUCCEEDED")
    page = page_for()
    sign_in(page, tenant.server, tenant.token)
    page.get_by_role("link", name="Tasks").click()
    expect(_rows(page)).to_have_count(3)
    expect(_rows(page, later[0]["id"])).to_contain_text("scheduled")
    page.get_by_label("Select every task on this page").check()
    page.get_by_role("button", name="Cancel selected (3)").click()

    dialog = page.get_by_role("dialog")
    expect(dialog.locator(".plan li")).to_have_text(
        [
            "2 waiting or leased: cancelled at once, they will not run.",
            "1 finished or held for review: left as they are.",
        ]
    )
    dialog.get_by_role("button", name="Cancel 2").click()
    expect(dialog.locator(".results li.ok")).to_have_count(2)
    dialog.get_by_role("button", name="Done").click()
    with tenant.api as api:
        states = [api.get(f"/tasks/{t['id']}").json()["state"] for t in [done, *later]]
    assert states == ["SUCCEEDED", "CANCELLED", "CANCELLED"]
    expect(_rows(page, "CANCELLED")).to_have_count(2)


def test_a_read_only_token_sees_no_action_controls_and_a_forged_action_is_refused(
    tenant: Tenant, page_for: Callable[..., Page], screens: Screens
) -> None:
    with tenant.api as api:
        task = api.post("/tasks", json={"handler": "ui.echo", "delay_seconds": 3600}).json()
        api.post(
            "/schedules",
            json={"name": "hourly", "cron": "@hourly", "task": {"handler": "ui.echo"}},
        ).raise_for_status()
    page = page_for()
    sign_in(page, tenant.server, tenant.token_with("read"))
    base = f"{tenant.server.url}/ui/ns/{tenant.namespace}"

    page.goto(f"{base}/tasks")
    expect(_rows(page)).to_have_count(1)
    expect(page.get_by_role("checkbox")).to_have_count(0)
    expect(page.get_by_role("button", name=re.compile("selected"))).to_have_count(0)
    screens.save(page, "tasks-read-only")
    page.goto(f"{base}/tasks/{task['id']}")
    expect(_state(page)).to_have_text("WAITING")
    expect(page.locator(".where [data-cause]")).to_have_text(  # why it waits
        [re.compile(r"^not before "), re.compile(r"^no live worker session serves queue")]
    )
    expect(page.locator(".page-actions button")).to_have_count(0)
    page.goto(f"{base}/schedules")
    expect(_rows(page, "hourly")).to_have_count(1)
    expect(page.locator("main button", has_text="Suspend")).to_have_count(0)

    status, problem = page.evaluate(
        """async (path) => {
            const session = JSON.parse(sessionStorage.getItem("orbit.console.session"));
            const answer = await fetch(path, {
                method: "POST",
                headers: {Authorization: `Bearer ${session.token}`,
                          "Content-Type": "application/json"},
                body: JSON.stringify({reason: "forged"}),
            });
            return [answer.status, await answer.json()];
        }""",
        f"/v1/namespaces/{tenant.namespace}/tasks/{task['id']}/cancel",
    )
    assert status == 403 and "submit role" in problem["detail"]
    with tenant.api as api:
        assert api.get(f"/tasks/{task['id']}").json()["state"] == "WAITING"


def test_a_token_of_another_namespace_sees_nothing_of_this_one(
    tenant: Tenant, page_for: Callable[..., Page]
) -> None:
    with tenant.api as api:
        task = api.post("/tasks", json={"handler": "ui.echo", "delay_seconds": 3600}).json()
    elsewhere = f"{tenant.namespace}-other"
    page = page_for()
    sign_in(page, tenant.server, tenant.token_with("admin", namespace=elsewhere))
    expect(page).to_have_url(re.compile(rf"/ui/ns/{elsewhere}$"))

    for path in (f"/tasks/{task['id']}", "/tasks", "", "/workers"):
        page.goto(f"{tenant.server.url}/ui/ns/{tenant.namespace}{path}")
        expect(page.get_by_role("alert")).to_contain_text(
            f"this token belongs to namespace '{elsewhere}'"
        )
        expect(page.locator("main table tbody tr, .summary, pre.json")).to_have_count(0)
    page.goto(f"{tenant.server.url}/ui/ns/{elsewhere}/tasks")
    expect(page.get_by_text("No task matches these filters.")).to_be_visible()


def test_every_page_is_labelled_and_readable_in_light_and_dark_and_on_a_phone(
    tenant: Tenant, page_for: Callable[..., Page], screens: Screens
) -> None:
    tenant.start_worker()
    with tenant.api as api:
        api.post("/tasks", json={"handler": "ui.echo"}).raise_for_status()
        # The workers page polls every 10 s: it is opened once the worker has signed in.
        wait_until(
            lambda: any(s["state"] == "ACTIVE" for s in api.get("/worker-sessions").json()["items"])
        )
    page = page_for()
    sign_in(page, tenant.server, tenant.token)
    page.get_by_role("link", name="Workers").click()
    expect(_rows(page, "ACTIVE")).to_have_count(1, timeout=LIVE)
    expect(_rows(page, "ACTIVE")).to_contain_text("ui.charge, ui.echo")
    screens.save(page, "workers")

    pages = ("", "/tasks", "/review", "/schedules", "/workflows", "/workers", "/audit")
    for name in pages:  # light, at 1280x800
        page.goto(f"{tenant.server.url}/ui/ns/{tenant.namespace}{name}")
        expect(page.locator(".freshness")).to_contain_text("Updated")
        assert page.evaluate(READABLE) == [], name

    # Live by polling while visible; a hidden tab asks the server nothing (bench/console/).
    # The page's clock is Playwright's, moved on by hand: poll periods pass without waiting.
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    page.clock.install()
    page.goto(f"{tenant.server.url}/ui/ns/{tenant.namespace}/tasks")
    expect(page.locator(".freshness")).to_contain_text("Updated")  # the first round is done
    with page.expect_request(lambda request: "/v1/" in request.url):
        page.clock.run_for(6_000)  # the tasks page polls every 5 s
    assert sum("/v1/" in url for url in asked) >= 2
    page.evaluate(
        """() => {
            Object.defineProperty(document, "hidden", {value: true, configurable: true});
            document.dispatchEvent(new Event("visibilitychange"));
        }"""
    )
    asked.clear()
    page.clock.run_for(60_000)  # a dozen poll periods while hidden
    page.evaluate("() => document.hidden")  # a round trip: requests made by now are reported
    assert asked == []
    with page.expect_request(lambda request: "/v1/" in request.url):  # shown again: it catches up
        page.evaluate(
            """() => {
                Object.defineProperty(document, "hidden", {value: false, configurable: true});
                document.dispatchEvent(new Event("visibilitychange"));
            }"""
        )

    phone = page_for(viewport={"width": 390, "height": 844}, color_scheme="dark", is_mobile=True)
    sign_in(phone, tenant.server, tenant.token)
    for name in pages:
        phone.goto(f"{tenant.server.url}/ui/ns/{tenant.namespace}{name}")
        expect(phone.locator(".freshness")).to_contain_text("Updated")
        assert phone.evaluate(READABLE) == [], name
        # Nothing wider than the screen but the tables and graphs, which scroll by themselves.
        assert phone.evaluate("document.documentElement.scrollWidth") <= 390, name
    phone.goto(f"{tenant.server.url}/ui/ns/{tenant.namespace}/tasks")
    expect(_rows(phone)).to_have_count(1)
    screens.save(phone, "phone-dark")
    # Every page is reachable by keyboard: the skip link is the first stop.
    phone.keyboard.press("Tab")
    assert phone.evaluate("document.activeElement.textContent") == "Skip to the page"


def test_orbit_dev_prints_a_console_link_that_signs_in_on_first_try(
    page_for: Callable[..., Page], tmp_path: Path
) -> None:
    port = free_port()
    log = tmp_path / "dev.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORBIT_")}
    with log.open("wb") as sink:
        dev = subprocess.Popen(
            [ORBIT, "dev", "--db", str(tmp_path / "dev.db"), "--port", str(port)],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=sink,
        )
    try:
        line = wait_until(lambda: re.search(r"web console: (\S+)", log.read_text()))
        link = line.group(1)
        assert link.startswith(f"http://127.0.0.1:{port}/ui/login#token=orb_")
        page = page_for()
        page.goto(link)
        expect(page).to_have_url(f"http://127.0.0.1:{port}/ui/ns/dev")  # the token left the URL
        expect(page.get_by_role("heading", level=1)).to_have_text("Overview")
        expect(page.locator(".freshness")).to_contain_text("Updated")
    finally:
        dev.send_signal(signal.SIGTERM)
        dev.wait(30)
