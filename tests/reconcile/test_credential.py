"""Credential tokens are unique per namespace: the same secret in another
namespace is accepted without telling anyone it exists there; two credentials of one namespace
sharing a secret is a spec error, reported once, not a database error retried forever."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from orbit.reconcile import credential
from orbit.reconcile.resource import InvalidSpec, Resource
from orbit_store.db import run_transaction

TOKEN = "orb_shared_between_two_0123456789abcdef"


def _credential(namespace: str, name: str) -> Resource:
    spec = {"secretRef": {"name": f"{name}-token", "key": "token"}, "roles": ["work"]}
    return Resource("Credential", namespace, name, spec)


def _reconcile(store: sa.Engine, resource: Resource) -> object:
    return run_transaction(store, lambda c: credential.reconcile(c, resource, {"token": TOKEN}))


def test_the_same_secret_in_two_namespaces_is_accepted_in_both(store: sa.Engine) -> None:
    assert _reconcile(store, _credential("shop", "worker")).ready  # type: ignore[attr-defined]
    assert _reconcile(store, _credential("ops", "worker")).ready  # type: ignore[attr-defined]


def test_two_credentials_of_a_namespace_sharing_a_secret_is_an_invalid_spec(
    store: sa.Engine,
) -> None:
    _reconcile(store, _credential("shop", "first"))
    with pytest.raises(InvalidSpec, match="'first'") as raised:
        _reconcile(store, _credential("shop", "second"))
    assert raised.value.field_path == "spec.secretRef"
