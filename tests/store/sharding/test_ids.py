"""Row ids are canonical UUIDv7 strings (RFC 9562): they sort by creation time and parse as
UUIDs wherever they are shown."""

from __future__ import annotations

import time
import uuid

from orbit_store.ids import new_id


def test_an_id_is_a_canonical_version_7_uuid_string() -> None:
    for _ in range(1000):
        text = new_id()
        parsed = uuid.UUID(text)
        assert str(parsed) == text  # lower-case 8-4-4-4-12, as the API and MySQL show it
        assert parsed.version == 7
        assert parsed.variant == uuid.RFC_4122


def test_an_id_carries_its_creation_millisecond() -> None:
    before = time.time_ns() // 1_000_000
    made = uuid.UUID(new_id()).int >> 80
    after = time.time_ns() // 1_000_000
    assert before <= made <= after


def test_ids_of_later_milliseconds_sort_after_earlier_ones() -> None:
    earlier = new_id()
    time.sleep(0.002)
    assert new_id() > earlier


def test_ids_do_not_repeat() -> None:
    assert len({new_id() for _ in range(20_000)}) == 20_000
