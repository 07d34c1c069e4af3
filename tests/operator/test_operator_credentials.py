"""Credential resources: the token stays in its Secret, MySQL keeps its hash; Secret changes
rotate or revoke it."""

from __future__ import annotations

import secrets as random
from typing import Any

import pytest
import sqlalchemy as sa
from conftest import ORBIT, Kube, orbit_resource, secret, wait_for

from orbit_store.access.credentials import Role, authenticate, hash_api_token
from orbit_store.schema import credentials

pytestmark = pytest.mark.slow


def login(engine: sa.Engine, token: str) -> Any:
    with engine.connect() as conn:
        return authenticate(conn, token)


def credential_row(engine: sa.Engine, namespace: str, name: str) -> Any:
    with engine.connect() as conn:
        return conn.execute(
            sa.select(credentials).where(
                credentials.c.namespace == namespace, credentials.c.name == name
            )
        ).one_or_none()


def test_token_from_secret_is_stored_as_a_hash_and_follows_the_secret(
    kube: Kube, engine: sa.Engine, namespace: str
) -> None:
    first, second = random.token_hex(20), random.token_hex(20)
    kube.create(secret(namespace, "worker-token", token=first))
    kube.create(
        orbit_resource(
            "Credential",
            namespace,
            "worker",
            {"secretRef": {"name": "worker-token"}, "roles": ["work", "submit"]},
        )
    )

    obj = kube.wait_ready("Credential", namespace, "worker")
    assert obj["status"]["observedGeneration"] == 1
    found = wait_for("token accepted", lambda: login(engine, first))
    assert (found.namespace, found.name) == (namespace, "worker")
    assert found.roles == {Role.WORK, Role.SUBMIT}
    row = credential_row(engine, namespace, "worker")
    assert row.token_hash == hash_api_token(first)
    assert first not in [str(v) for v in row._mapping.values()]

    # Rotating the Secret rotates the token.
    kube.patch(
        "v1", "Secret", namespace, "worker-token", {"data": secret("", "", token=second)["data"]}
    )
    wait_for("new token accepted", lambda: login(engine, second))
    assert login(engine, first) is None

    # Deleting the Secret revokes the token: SecretNotFound until it is back.
    kube.delete("v1", "Secret", namespace, "worker-token")
    obj = kube.wait_ready(
        "Credential", namespace, "worker", status="False", reason="SecretNotFound"
    )
    assert "worker-token" in obj["status"]["conditions"][0]["message"]
    assert login(engine, second) is None

    kube.create(secret(namespace, "worker-token", token=second))
    kube.wait_ready("Credential", namespace, "worker")
    wait_for("token accepted again", lambda: login(engine, second))

    kube.delete(ORBIT, "Credential", namespace, "worker")
    kube.wait_gone(ORBIT, "Credential", namespace, "worker")
    assert credential_row(engine, namespace, "worker") is None
    assert login(engine, second) is None


def test_missing_secret_is_reported_and_noticed_when_created(
    kube: Kube, engine: sa.Engine, namespace: str
) -> None:
    kube.create(
        orbit_resource(
            "Credential",
            namespace,
            "ci",
            {"secretRef": {"name": "ci-token", "key": "api"}, "roles": ["submit"]},
        )
    )

    obj = kube.wait_ready("Credential", namespace, "ci", status="False", reason="SecretNotFound")
    assert "kubectl -n" in obj["status"]["conditions"][0]["message"]
    assert credential_row(engine, namespace, "ci") is None

    token = random.token_hex(20)
    kube.create(secret(namespace, "ci-token", api=token))
    kube.wait_ready("Credential", namespace, "ci")
    assert wait_for("token accepted", lambda: login(engine, token)).name == "ci"


def test_a_short_token_is_an_invalid_spec(kube: Kube, engine: sa.Engine, namespace: str) -> None:
    kube.create(secret(namespace, "weak", token="short"))
    kube.create(
        orbit_resource(
            "Credential", namespace, "weak", {"secretRef": {"name": "weak"}, "roles": ["admin"]}
        )
    )

    obj = kube.wait_ready("Credential", namespace, "weak", status="False", reason="InvalidSpec")
    assert "shorter than 24 characters" in obj["status"]["conditions"][0]["message"]
    assert credential_row(engine, namespace, "weak") is None
