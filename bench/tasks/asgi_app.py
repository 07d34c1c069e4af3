"""Orbit's app for another ASGI server than uvicorn (``bench/tasks/e2e.py --asgi granian``):
built as `orbit server` builds it, with its defaults, from ``ORBIT_DATABASE_URL``. A factory, so
the server process builds it after it started.

Usage: ``granian --interface asgi --factory bench.tasks.asgi_app:app`` (from the repository root).
"""

from __future__ import annotations

import os

from fastapi import FastAPI

from orbit.api.app import create_app
from orbit.api.settings import ServerSettings
from orbit.cli.database.options import store_engine


def app() -> FastAPI:
    url = os.environ["ORBIT_DATABASE_URL"]
    settings = ServerSettings(database_url=url)
    return create_app(store_engine(url, pool_size=settings.db_pool_size), settings)
