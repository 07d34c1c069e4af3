"""A submission's digest is stored with its idempotency key (``submission_keys.request_digest``)
and compared with every later request under that key: a replay must match it, anything else is
a conflict. So the digest of a request may never change between Orbit versions — a key used
before an upgrade would otherwise turn its honest retries into conflicts. These are the values
the digest has had since keys were introduced."""

from __future__ import annotations

import datetime as dt

from orbit_store.pulse.model import Safety
from orbit_store.pulse.submit.accept import SubmitRequest


def test_a_plain_request_s_digest_never_changes() -> None:
    plain = SubmitRequest(namespace="ns", queue="q", handler="h")
    assert plain.digest() == "c2447ff58882fb973027952c5f58d7a1b7e389f10a08e64c328c78af7b184ee3"


def test_a_full_request_s_digest_never_changes() -> None:
    full = SubmitRequest(
        namespace="ns",
        queue="q",
        handler="h",
        params={"b": [1, {"c": None}], "a": "é"},
        idempotency_key="k",
        available_at=dt.datetime(2026, 12, 3, 18, 0, 0, 123456),
        priority=5,
        safety=Safety.SAFE,
        concurrency_key="ck",
        submitted_by="me",
    )
    assert full.digest() == "b8fd57dac9ce47b475f99d55a3d40a02653c1936312c37f3f51504fa4e2b2b7b"


def test_the_key_and_the_submitter_are_not_part_of_the_meaning() -> None:
    one = SubmitRequest(namespace="ns", queue="q", handler="h", idempotency_key="a")
    other = SubmitRequest(
        namespace="ns", queue="q", handler="h", idempotency_key="b", submitted_by="x"
    )
    assert one.digest() == other.digest()
