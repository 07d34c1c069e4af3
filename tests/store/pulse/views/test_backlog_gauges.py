"""The backlog as /metrics shows it: read_backlog (one read over the live tasks and sessions) and
the gauge cache that serves every MySQL gauge, refreshed by a loop and never by a scrape, one
reader (one short read-only transaction) at a time."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric

from orbit.metrics import gauges
from orbit.metrics.gauges import GaugeCache, GaugesUnavailable, backlog_gauges, gauge
from orbit.metrics.server import Metrics
from orbit_store.pulse.views.backlog import read_backlog

from ...drivers.pulse_driver import PulseDriver
from ...drivers.sent_statements import sent_statements


def depth(pulse: PulseDriver) -> dict[tuple[str, str], int]:
    backlog = pulse.tx(read_backlog)
    return {(d.queue, d.state): d.tasks for d in backlog.depth if d.namespace == pulse.namespace}


def test_backlog_counts_live_tasks_by_queue_and_state_and_not_finished_ones(
    pulse: PulseDriver,
) -> None:
    pulse.session()
    for _ in range(3):
        pulse.submit()
    pulse.submit(delay_seconds=3600)
    done = pulse.claim_one()
    pulse.start(done)
    pulse.succeed(done)
    running = pulse.claim_one()
    pulse.start(running)

    assert depth(pulse) == {("default", "WAITING"): 2, ("default", "RUNNING"): 1}


def test_oldest_waiting_age_is_measured_on_database_time_and_zero_when_nothing_is_due(
    pulse: PulseDriver,
) -> None:
    pulse.submit(delay_seconds=600)
    (oldest,) = [o for o in pulse.tx(read_backlog).oldest_waiting if o.namespace == pulse.namespace]
    assert oldest.age_seconds == 0
    pulse.advance(900)  # the task became due 300 s ago
    (oldest,) = [o for o in pulse.tx(read_backlog).oldest_waiting if o.namespace == pulse.namespace]
    assert 299 <= oldest.age_seconds <= 330


def test_live_sessions_are_counted_per_namespace_and_state(pulse: PulseDriver) -> None:
    session = pulse.session("w1")
    pulse.session("w2")
    pulse.drain(session.id)
    counts = {
        s.state: s.sessions
        for s in pulse.tx(read_backlog).sessions
        if s.namespace == pulse.namespace
    }
    assert counts == {"ACTIVE": 1, "DRAINING": 1}


# --- the cache -------------------------------------------------------------------------------


@pytest.fixture
def statements(engine: sa.Engine) -> Iterator[list[str]]:
    """Every SQL statement the engine runs while the test does."""
    with sent_statements(engine) as seen:
        yield seen


def scrape(cache: GaugeCache) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    registry = CollectorRegistry()
    registry.register(cache)
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in registry.collect()
        for s in family.samples
    }


def test_scrapes_never_query_the_database_only_refreshes_do(
    pulse: PulseDriver, engine: sa.Engine, statements: list[str]
) -> None:
    pulse.submit()
    cache = GaugeCache(engine, interval=60)
    cache.refresh()
    statements.clear()

    for _ in range(5):
        samples = scrape(cache)

    assert statements == []
    key = (
        "orbit_queue_tasks",
        (("namespace", pulse.namespace), ("queue", "default"), ("state", "WAITING")),
    )
    assert samples[key] == 1


def test_the_cache_shows_a_change_after_the_next_refresh(
    pulse: PulseDriver, engine: sa.Engine
) -> None:
    cache = GaugeCache(engine, interval=60)
    cache.refresh()
    pulse.submit()
    key = (
        "orbit_queue_tasks",
        (("namespace", pulse.namespace), ("queue", "default"), ("state", "WAITING")),
    )
    assert key not in scrape(cache)
    cache.refresh()
    assert scrape(cache)[key] == 1


class Clock:
    """The gauge cache's monotonic clock, moved by the test: staleness is decided on it alone,
    so a starved machine's scheduling delays cannot age a snapshot the test just took."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return time.time()


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(gauges, "time", clock)
    return clock


def test_nothing_is_served_before_the_first_refresh_or_once_it_is_stale(
    engine: sa.Engine, clock: Clock
) -> None:
    cache = GaugeCache(engine, interval=0.01)
    assert scrape(cache) == {}
    cache.refresh()
    clock.now += 0.02  # two intervals: still fresh
    assert any(name == "orbit_gauges_refreshed_timestamp_seconds" for name, _ in scrape(cache))
    clock.now += 0.02  # four intervals without a refresh: stale
    assert scrape(cache) == {}


def broken_reader(conn: sa.Connection) -> list[Metric]:
    raise RuntimeError("a defect in this reader")


def names(cache: GaugeCache) -> set[str]:
    return {name for name, _labels in scrape(cache)}


def test_a_reader_that_fails_is_counted_and_the_other_gauges_are_still_served(
    pulse: PulseDriver, engine: sa.Engine, caplog: pytest.LogCaptureFixture
) -> None:
    pulse.submit()
    metrics = Metrics(engine, gauge_interval=60)
    metrics.gauges.readers = (broken_reader, backlog_gauges)

    assert metrics.refresh_gauges() == 1

    assert "orbit_queue_tasks" in names(metrics.gauges)
    assert "orbit_gauges_refreshed_timestamp_seconds" not in names(metrics.gauges), (
        "the timestamp says when every gauge was last refreshed"
    )
    errors = metrics.registry.get_sample_value("orbit_engine_item_errors_total", {"loop": "gauges"})
    assert errors == 1
    assert "gauge reader broken_reader" in caplog.text


def test_a_pass_where_every_reader_fails_fails_as_a_whole(engine: sa.Engine) -> None:
    cache = GaugeCache(engine, interval=60, readers=[broken_reader, broken_reader])
    with pytest.raises(GaugesUnavailable):
        cache.refresh()


def test_a_failing_readers_last_gauges_disappear_once_stale_while_the_others_stay(
    engine: sa.Engine, clock: Clock
) -> None:
    def failing_later(conn: sa.Connection) -> list[Metric]:
        if calls:
            raise RuntimeError("fails from the second refresh on")
        calls.append(1)
        return [gauge("orbit_test_gauge", "A test gauge.", [], [([], 1.0)])]

    calls: list[int] = []
    cache = GaugeCache(engine, interval=0.05, readers=[failing_later, backlog_gauges])
    cache.refresh()
    assert "orbit_test_gauge" in names(cache)
    for _ in range(4):  # more than three intervals of refreshes
        clock.now += 0.05
        assert cache.refresh() == 1
    assert "orbit_test_gauge" not in names(cache), "its snapshot went stale"
    assert "orbit_worker_sessions" in names(cache), "the healthy reader's gauges stay"
