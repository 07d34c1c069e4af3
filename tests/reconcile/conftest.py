"""`orbit apply` and the reconcile functions on a fresh database of each backend."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
import yaml

from orbit_store.db import create_store_engine


@pytest.fixture
def store(any_migrated_url: str) -> Iterator[sa.Engine]:
    """A migrated database of the test's own: `orbit apply --prune` and the audit log look at
    a whole database."""
    engine = create_store_engine(any_migrated_url)
    yield engine
    engine.dispose()


EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "manifests"


def copy_examples(target: Path, namespace: str = "shop", only: str = "*.yaml") -> Path:
    """The example manifests in ``target``, placed in ``namespace`` (they name none: kubectl or
    `orbit apply` puts them in their own default namespace)."""
    target.mkdir(parents=True, exist_ok=True)
    for path in sorted(EXAMPLES.glob(only)):
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        for doc in docs:
            doc["metadata"]["namespace"] = namespace
        (target / path.name).write_text(yaml.safe_dump_all(docs))
    return target
