"""The console in a real browser: Debian's chromium driven by Playwright (``executable_path``,
never a downloaded browser) against a real `orbit server` on MariaDB with real workers.

Screenshots go to ``$ORBIT_UI_SCREENSHOTS`` (default: the test's temporary directory);
``ORBIT_UI_SCREENSHOTS=docs/ui pytest tests/ui`` refreshes the ones docs/ui.md shows.
"""

from __future__ import annotations

import functools
import os
import subprocess
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

# The end-to-end tests' real server on a MariaDB database of its own serves the browser tests too.
from e2e.conftest import ORBIT, ROOT, Server, mariadb_engine, mariadb_url, server

from .chromium import CHROMIUM, FLAGS

__all__ = ["mariadb_engine", "mariadb_url", "server"]  # fixtures, used by name

from orbit_store.access.credentials import create_token
from orbit_store.db import run_transaction
from orbit_store.pulse.limits.queues import put_queue
from orbit_store.pulse.model import QueuePolicy

DESKTOP = {"width": 1280, "height": 800}

playwright_api = pytest.importorskip("playwright.sync_api")
if not Path(CHROMIUM).exists():  # scripts/ensure-chromium installs it
    pytest.skip("Debian's chromium is not installed", allow_module_level=True)
# Generous (ms): a page waits on its server, which waits on a loaded machine's MariaDB; a check
# passes as soon as its condition holds.
playwright_api.expect.set_options(timeout=20_000)


@dataclass
class Tenant:
    """A namespace of the test's own, its admin token, and the workers started for it."""

    namespace: str
    token: str
    server: Server
    engine: sa.Engine
    records: Path
    workers: list[subprocess.Popen[bytes]]

    @property
    def api(self) -> httpx.Client:
        return httpx.Client(
            base_url=f"{self.server.url}/v1/namespaces/{self.namespace}",
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=30,
        )

    def token_with(self, *roles: str, namespace: str | None = None) -> str:
        issued = run_transaction(
            self.engine,
            functools.partial(
                create_token,
                namespace=namespace or self.namespace,
                name=f"ui-{'-'.join(roles)}-{uuid.uuid4().hex[:6]}",
                roles=list(roles),
            ),
        )
        return issued.token

    def queue(self, name: str, lease_seconds: int) -> None:
        policy = QueuePolicy(name=name, lease_seconds=lease_seconds)
        run_transaction(
            self.engine, functools.partial(put_queue, namespace=self.namespace, policy=policy)
        )

    def start_worker(self, queues: str = "default") -> subprocess.Popen[bytes]:
        log = self.records / f"worker-{len(self.workers)}.log"
        env = {
            **os.environ,
            "ORBIT_SERVER": self.server.url,
            "ORBIT_TOKEN": self.token,
            "ORBIT_NAMESPACE": self.namespace,
            "ORBIT_UI_DIR": str(self.records),
            "ORBIT_UI_QUEUES": queues,
            "PYTHONPATH": str(ROOT),
        }
        with log.open("wb") as sink:
            worker = subprocess.Popen(
                [ORBIT, "worker", "tests.ui.workers:worker"],
                env=env,
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=sink,
            )
        self.workers.append(worker)
        return worker


@pytest.fixture
def tenant(server: Server, mariadb_engine: sa.Engine, tmp_path: Path) -> Iterator[Tenant]:
    namespace = f"ui-{uuid.uuid4().hex[:8]}"
    t = Tenant(namespace, "", server, mariadb_engine, tmp_path, [])
    t.token = t.token_with("admin")
    yield t
    for worker in t.workers:
        if worker.poll() is None:
            worker.kill()
            worker.wait(10)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    with playwright_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield launched
        launched.close()


class Screens:
    """Where screenshots go (docs/ui when refreshing the documentation's pictures)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)

    def save(self, page: Any, name: str) -> Path:
        path = self.folder / f"{name}.png"
        page.screenshot(path=str(path), full_page=False)
        return path


@pytest.fixture(scope="session")
def screens(tmp_path_factory: pytest.TempPathFactory) -> Screens:
    chosen = os.environ.get("ORBIT_UI_SCREENSHOTS")
    folder = (ROOT / chosen) if chosen else tmp_path_factory.mktemp("screenshots")
    return Screens(folder)


@pytest.fixture
def page_for(browser: Any) -> Iterator[Callable[..., Any]]:
    """Open a fresh browser context (its own sessionStorage); the test fails on any error the
    page's scripts raise."""
    contexts = []
    errors: list[str] = []

    def open_page(**options: Any) -> Any:
        context = browser.new_context(**{"viewport": DESKTOP, **options})
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(20_000)
        page.on("pageerror", lambda error: errors.append(str(error)))
        return page

    yield open_page
    for context in contexts:
        context.close()
    assert errors == [], errors


def sign_in(page: Any, server: Server, token: str) -> None:
    """The login page, as a person uses it: type the token, press Sign in."""
    page.goto(f"{server.url}/ui/login")
    page.get_by_label("API token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/ui/ns/**")
