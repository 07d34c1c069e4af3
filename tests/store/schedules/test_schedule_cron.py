"""Cron expressions in a time zone → UTC instants, and the DST rule of docs/concepts/schedules.md
(Debian cron's, through cronsim): in a gap a fixed-hour job fires at the first instant after the
jump and every-minute jobs simply have no instants; in a fold a fixed-hour job fires once and
every-minute jobs fire in both passes."""

from __future__ import annotations

import datetime as dt
import itertools

import pytest

from orbit_store.schedules.cron import parse, preview
from orbit_store.schedules.model import InvalidSchedule

UTC = dt.UTC

# 2026 transitions (UTC instant of the change).
NY_GAP = dt.datetime(2026, 3, 8, 7, 0)  # 02:00 EST -> 03:00 EDT
NY_FOLD = dt.datetime(2026, 11, 1, 6, 0)  # 02:00 EDT -> 01:00 EST
BERLIN_GAP = dt.datetime(2026, 3, 29, 1, 0)  # 02:00 CET -> 03:00 CEST
BERLIN_FOLD = dt.datetime(2026, 10, 25, 1, 0)  # 03:00 CEST -> 02:00 CET
TRANSITIONS = [
    ("America/New_York", NY_GAP),
    ("America/New_York", NY_FOLD),
    ("Europe/Berlin", BERLIN_GAP),
    ("Europe/Berlin", BERLIN_FOLD),
]


def take(iterator, n):  # type: ignore[no-untyped-def]
    return list(itertools.islice(iterator, n))


def wall(cron, instants):  # type: ignore[no-untyped-def]
    return [cron.local(at).strftime("%H:%M%z") for at in instants]


@pytest.mark.parametrize(("zone", "change"), TRANSITIONS)
def test_every_minute_fires_at_every_utc_minute_across_a_dst_change(
    zone: str, change: dt.datetime
) -> None:
    cron = parse("* * * * *", zone)
    start = change - dt.timedelta(hours=2)
    got = take(cron.after(start), 240)
    assert got == [start + dt.timedelta(minutes=m) for m in range(1, 241)]


def test_a_fixed_time_in_the_spring_gap_fires_at_the_first_instant_after_the_jump() -> None:
    ny = parse("30 2 * * *", "America/New_York")
    got = take(ny.after(dt.datetime(2026, 3, 6, 12, 0)), 3)
    assert wall(ny, got) == ["02:30-0500", "03:00-0400", "02:30-0400"]
    berlin = parse("30 2 * * *", "Europe/Berlin")
    got = take(berlin.after(dt.datetime(2026, 3, 27, 12, 0)), 3)
    assert wall(berlin, got) == ["02:30+0100", "03:00+0200", "02:30+0200"]


def test_a_fixed_time_in_the_autumn_fold_fires_once() -> None:
    ny = parse("30 1 * * *", "America/New_York")
    got = take(ny.after(dt.datetime(2026, 10, 30, 12, 0)), 3)
    assert wall(ny, got) == ["01:30-0400", "01:30-0400", "01:30-0500"]
    assert [d.day for d in got] == [31, 1, 2]
    berlin = parse("30 2 * * *", "Europe/Berlin")
    got = take(berlin.after(dt.datetime(2026, 10, 23, 12, 0)), 3)
    assert wall(berlin, got) == ["02:30+0200", "02:30+0200", "02:30+0100"]
    assert [d.day for d in got] == [24, 25, 26]


def test_an_hourly_job_fires_in_both_passes_of_the_fold() -> None:
    ny = parse("30 * * * *", "America/New_York")
    got = take(ny.after(dt.datetime(2026, 11, 1, 4, 45)), 3)
    assert wall(ny, got) == ["01:30-0400", "01:30-0500", "02:30-0500"]


@pytest.mark.parametrize(("zone", "change"), TRANSITIONS)
@pytest.mark.parametrize("expression", ["* * * * *", "30 * * * *", "30 1 * * *", "30 2 * * *"])
def test_iterating_from_any_point_gives_the_same_instants(
    zone: str, change: dt.datetime, expression: str
) -> None:
    """Starting inside a fold or gap never yields an instant twice or out of order, and the
    backwards walk finds exactly what the forwards one does."""
    cron = parse(expression, zone)
    hours = 3 if expression.startswith("*") else 26
    start, end = change - dt.timedelta(hours=hours), change + dt.timedelta(hours=hours)
    reference = list(itertools.takewhile(lambda at: at <= end, cron.after(start)))
    assert reference == sorted(set(reference))
    for minutes in range(0, 2 * hours * 60, 17):
        origin = start + dt.timedelta(minutes=minutes, seconds=13)
        following = list(itertools.takewhile(lambda at: at <= end, cron.after(origin)))
        assert following == [at for at in reference if at > origin]
    backwards = list(itertools.takewhile(lambda at: at > start, cron.before(end)))
    assert backwards[::-1] == [at for at in reference if at < end]


def test_kubernetes_macros_and_a_seconds_field() -> None:
    assert parse("@hourly", "UTC").fields == "0 * * * *"
    assert parse("@daily", "UTC").fields == "0 0 * * *"
    every_ten = parse("*/10 * * * * *", "UTC")
    assert take(every_ten.after(dt.datetime(2026, 1, 1)), 2) == [
        dt.datetime(2026, 1, 1, 0, 0, 10),
        dt.datetime(2026, 1, 1, 0, 0, 20),
    ]


@pytest.mark.parametrize(
    ("expression", "zone", "field", "words"),
    [
        ("61 * * * *", "UTC", "cron", "not a valid cron expression (Bad minute)"),
        ("every day", "UTC", "cron", "five fields"),
        ("0 0 */20 * 1L", "UTC", "cron", "never matches"),
        ("TZ=UTC 0 * * * *", "UTC", "cron", "give the zone in time_zone"),
        ("* * * * *", "Mars/Olympus", "time_zone", "not an IANA time zone"),
        ("* * * * *", "../../etc/passwd", "time_zone", "'Europe/Berlin'"),
        ("* * * * *", "", "time_zone", "not an IANA time zone"),
    ],
)
def test_a_bad_expression_or_zone_names_the_field_and_the_fix(
    expression: str, zone: str, field: str, words: str
) -> None:
    with pytest.raises(InvalidSchedule) as refused:
        parse(expression, zone)
    assert refused.value.field == field
    assert words in str(refused.value)


def test_preview_lists_utc_and_local_times_within_the_bounds() -> None:
    cron = parse("0 9 * * MON-FRI", "Europe/Berlin")
    found = preview(
        cron,
        after=dt.datetime(2026, 3, 26, 12, 0),
        count=5,
        end_at=dt.datetime(2026, 3, 31, 7, 0),
    )
    assert [p.at for p in found] == [
        dt.datetime(2026, 3, 27, 8, 0),  # Friday, CET
        dt.datetime(2026, 3, 30, 7, 0),  # Monday, CEST
        dt.datetime(2026, 3, 31, 7, 0),  # the end bound is included
    ]
    assert [p.local.strftime("%a %H:%M%z") for p in found][:2] == [
        "Fri 09:00+0100",
        "Mon 09:00+0200",
    ]


def test_first_instant_honours_the_start_bound() -> None:
    cron = parse("0 * * * *", "UTC")
    now = dt.datetime(2026, 1, 1, 10, 30)
    assert cron.first_from(now) == dt.datetime(2026, 1, 1, 11, 0)
    assert cron.first_from(now, start_at=dt.datetime(2026, 1, 2, 8, 0)) == dt.datetime(
        2026, 1, 2, 8, 0
    )
    assert cron.first_from(now, end_at=dt.datetime(2026, 1, 1, 10, 59)) is None
