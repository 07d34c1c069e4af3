"""The example manifests give the same rows through the operator as through `orbit apply`, and
created together, as `kubectl apply -f examples/manifests/` does, every one is Ready within 15 s
(the operator handles them concurrently, so a Quota or a WorkerPool may come before its Queue is
in MySQL: it waits for it and is retried within seconds). The emulator serves the Secret and
the Deployment this needs; tests/kube/test_ordering.py shows the same against a real API server
for the kinds it can serve."""

from __future__ import annotations

import copy
import secrets as random
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
import yaml
from conftest import ROOT, Kube, secret, wait_for

from orbit.reconcile.apply import apply_manifests
from orbit.reconcile.snapshot import declared_rows
from orbit_store.db import create_store_engine
from orbit_store.upgrade import migrate

pytestmark = pytest.mark.slow

EXAMPLES = ROOT / "examples" / "manifests"
KINDS = ("Queue", "Quota", "Credential", "WorkerPool", "Schedule")
READY_WITHIN = 15.0


def examples() -> list[dict[str, object]]:
    docs = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert {d["kind"] for d in docs} >= set(KINDS)
    return docs


def test_examples_through_the_operator_match_orbit_apply(
    kube: Kube,
    engine: sa.Engine,
    namespace: str,
    empty_mariadb_url: str,
    tmp_path: Path,
) -> None:
    token = random.token_hex(24)
    docs = examples()
    example_namespace = "shop"  # the examples name none: apply's default_namespace places them
    secret_name = next(d for d in docs if d["kind"] == "Credential")["spec"]["secretRef"]["name"]  # type: ignore[index]

    # orbit apply, on a fresh MariaDB database and on a fresh SQLite file (orbit dev).
    secret_file = tmp_path / "secret.yaml"
    secret_file.write_text(yaml.safe_dump(secret(example_namespace, secret_name, token=token)))
    by_backend = {}
    for backend, url in (
        ("mariadb", empty_mariadb_url),
        ("sqlite", f"sqlite:///{tmp_path / 'apply.db'}"),
    ):
        fresh = create_store_engine(url)
        try:
            migrate.upgrade(fresh)
            apply_manifests(fresh, [EXAMPLES, secret_file], default_namespace=example_namespace)
            with fresh.connect() as conn:
                by_backend[backend] = declared_rows(conn, example_namespace)
        finally:
            fresh.dispose()
    applied = by_backend["mariadb"]
    assert by_backend["sqlite"] == applied

    # The operator, in this test's namespace of the shared database.
    kube.create(secret(namespace, secret_name, token=token))
    started = time.monotonic()
    for doc in docs:
        doc = copy.deepcopy(doc)
        doc["metadata"]["namespace"] = namespace  # type: ignore[index]
        kube.create(doc)
    for doc in docs:
        kind, name = str(doc["kind"]), doc["metadata"]["name"]  # type: ignore[index]
        wait_for(
            f"{kind} {name} Ready within {READY_WITHIN:g} s of the folder",
            lambda kind=kind, name=name: (
                (r := kube.ready(kind, namespace, name)) and r["status"] == "True"
            ),
            timeout=max(READY_WITHIN - (time.monotonic() - started), 0.1),
        )

    def operated() -> dict[str, object]:
        with engine.connect() as conn:
            return declared_rows(conn, namespace)

    assert all(applied.values()), applied
    wait_for("same rows", lambda: operated() == applied)
