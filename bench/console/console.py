"""The web console's load on the server: 20 open console pages polling a real `orbit server`.

Starts `orbit server` (one process, engine loops on) on a fresh MariaDB database, fills a
namespace with something to show (waiting tasks, a workflow waiting for a signal, a schedule),
measures the server process's CPU while idle, then opens 20 pages in Debian's chromium (two of
each console page, every one visible and polling) and measures again. The console's load is the
difference, as a share of one core. Chromium's own CPU is not the server's and is not counted.

Usage: ``.venv/bin/python bench/console/console.py [--pages 20] [--seconds 60]``. Record the
figures in bench/console/console.md with the machine's load at the time.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
import uuid
from pathlib import Path

import httpx
import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.tasks.dispatch import DEFAULT_SERVER, server  # the repository root, added above
from bench.tasks.e2e import cpu_seconds, mariadb_pid
from orbit_store.access.credentials import create_token
from orbit_store.db import create_store_engine, run_transaction
from orbit_store.upgrade import migrate
from tests.ui.chromium import CHROMIUM, FLAGS

FLOW = {
    "steps": [
        {"name": "approval", "wait": {"signal": "approved", "timeoutSeconds": 86400}},
        {"name": "ship", "dependsOn": ["approval"], "task": {"handler": "shop.ship"}},
    ]
}


def server_pid(port: int) -> int:
    """The pid of the process listening on ``port`` (the bench's own server)."""
    wanted = f":{port:04X}"
    inodes = {
        line.split()[9]
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]
        if line.split()[1].endswith(wanted) and line.split()[3] == "0A"
    }
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                if os.readlink(fd).removeprefix("socket:[").rstrip("]") in inodes:
                    return int(proc.name)
        except OSError:
            continue
    raise SystemExit(f"no process listens on port {port}")


def fill(url: str, namespace: str, token: str) -> dict[str, str]:
    """Something for every page to show; the ids the detail pages open."""
    api = httpx.Client(
        base_url=f"{url}/v1/namespaces/{namespace}",
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    tasks = [
        api.post("/tasks", json={"handler": "shop.mail", "params": {"n": n}}).json()["id"]
        for n in range(300)
    ]
    api.post("/workflow-definitions", json={"name": "order", "spec": FLOW}).raise_for_status()
    flow = api.post("/workflows", json={"definition": "order", "input": {}}).json()["id"]
    body = {"name": "nightly", "cron": "0 3 * * *", "time_zone": "Europe/Berlin"}
    api.post("/schedules", json={**body, "task": {"handler": "reports.nightly"}})
    return {"task": tasks[-1], "workflow": flow}


def measure(pids: list[int], seconds: float) -> list[float]:
    """The share of one core each of ``pids`` used over ``seconds``."""
    before, started = [cpu_seconds(p) for p in pids], time.monotonic()
    time.sleep(seconds)
    took = time.monotonic() - started
    return [(cpu_seconds(p) - b) / took for p, b in zip(pids, before, strict=True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--server", default=DEFAULT_SERVER, help="MariaDB server URL")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    name = f"orbit_bench_console_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(args.server)
    with admin.begin() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name}")
    url = f"{args.server.rstrip('/')}/{name}"
    try:
        engine = create_store_engine(url)
        migrate.upgrade(engine)
        namespace = "bench"
        token = run_transaction(
            engine,
            functools.partial(create_token, namespace=namespace, name="b", roles=["admin"]),
        ).token
        with server(url) as base:
            ids = fill(base, namespace, token)
            pids = [server_pid(int(base.rsplit(":", 1)[1])), mariadb_pid() or os.getpid()]
            idle, idle_db = measure(pids, args.seconds)
            ui = f"{base}/ui/ns/{namespace}"
            pages = [
                ui,
                f"{ui}/tasks",
                f"{ui}/tasks/{ids['task']}",
                f"{ui}/review",
                f"{ui}/schedules",
                f"{ui}/schedules/nightly",
                f"{ui}/workflows",
                f"{ui}/workflows/{ids['workflow']}",
                f"{ui}/workers",
                f"{ui}/audit",
            ]
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
                context = browser.new_context(viewport={"width": 1280, "height": 800})
                first = context.new_page()
                first.goto(f"{base}/ui/login")
                first.get_by_label("API token").fill(token)
                first.get_by_label("Keep me signed in").check()  # every page shares the token
                first.get_by_role("button", name="Sign in").click()
                first.wait_for_url("**/ui/ns/**")
                opened = [first]
                while len(opened) < args.pages:
                    page = context.new_page()
                    page.goto(pages[len(opened) % len(pages)])
                    opened.append(page)
                opened[0].goto(pages[0])
                time.sleep(10)  # every page has loaded and settled into its polling
                visible = sum(p.evaluate("document.visibilityState") == "visible" for p in opened)
                busy, busy_db = measure(pids, args.seconds)
                browser.close()
        print(f"server CPU, idle (engine loops only): {idle * 100:.2f}% of one core")
        print(
            f"server CPU, {len(opened)} console pages open ({visible} visible, polling): "
            f"{busy * 100:.2f}% of one core"
        )
        print(
            f"the console's share: {(busy - idle) * 100:.2f}% of one core "
            f"over {args.seconds:.0f} s; load average {os.getloadavg()[0]:.2f}"
        )
        print(
            "MariaDB (all of it, every client on this machine): "
            f"{idle_db * 100:.2f}% idle, {busy_db * 100:.2f}% with the pages open"
        )
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP DATABASE {name}")


if __name__ == "__main__":
    main()
