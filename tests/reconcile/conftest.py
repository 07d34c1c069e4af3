"""`orbit apply` and the reconcile functions on a fresh database of each backend."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from orbit_store import migrate
from orbit_store.db import create_store_engine


@pytest.fixture
def store(any_empty_url: str) -> Iterator[sa.Engine]:
    engine = create_store_engine(any_empty_url)
    migrate.upgrade(engine)
    yield engine
    engine.dispose()
