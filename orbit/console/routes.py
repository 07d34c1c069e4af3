"""Serving the console: ``/ui/assets/…`` are the package's static files, every other ``/ui/…``
path is the one HTML page (the browser's router draws the page the path names, so every page
has a URL to share); ``/`` leads a browser to it (orbit/api/routes/health.py).

The page's Content-Security-Policy allows scripts, styles and requests from this server only;
the one inline script, the import map, is allowed by its hash.
"""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

STATIC = Path(__file__).with_name("static")
PREFIX = "/ui"

router = APIRouter(include_in_schema=False)


def _page() -> tuple[str, str]:
    """The HTML page and its Content-Security-Policy."""
    page = (STATIC / "index.html").read_text()
    found = re.search(r'<script type="importmap">(.*?)</script>', page, re.S)
    if found is None:
        raise RuntimeError("orbit/console/static/index.html has no import map")
    digest = base64.b64encode(hashlib.sha256(found.group(1).encode()).digest()).decode()
    policy = (
        "default-src 'self'; "
        f"script-src 'self' 'sha256-{digest}'; "
        "style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )
    return page, policy


PAGE, POLICY = _page()
HEADERS = {
    "Content-Security-Policy": POLICY,
    "Cache-Control": "no-cache",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}


@router.get(PREFIX)
def ui_root() -> RedirectResponse:
    return RedirectResponse(f"{PREFIX}/", status_code=307)


@router.get(PREFIX + "/{page:path}")
def page(page: str) -> HTMLResponse:
    """The same page for every console URL; what it shows is drawn from the path."""
    return HTMLResponse(PAGE, headers=HEADERS)


def install(app: FastAPI) -> None:
    """Serve the console from ``app``: the assets first, so the page route does not take them."""
    app.mount(f"{PREFIX}/assets", StaticFiles(directory=STATIC), name="console-assets")
    app.include_router(router)
