"""The orchestration lag (issue: outcome persisted → consumed) is a metric per namespace:
``orbit_workflow_orchestration_lag_seconds`` observes each inbox row the consumer applies, from
the outcome's commit to its consumption, on the database clock (seed §6.3)."""

from __future__ import annotations

from orbit.engines import weave_inbox
from orbit.metrics.server import Metrics

from ..drivers.weave_driver import WeaveDriver
from .test_weave_inbox import TWO_STEPS, finish_first


def test_each_consumed_outcome_is_observed_with_its_lag(weave: WeaveDriver) -> None:
    weave.publish("two", TWO_STEPS)
    wf = weave.start_workflow("two")
    finish_first(weave, wf)
    weave.advance(3)  # the outcome waits three seconds of database time
    metrics = Metrics(weave.engine)

    weave_inbox.inbox_pass(
        weave.engine, metrics, lambda *_: None, workers=1, namespace=weave.namespace
    )

    def sample(suffix: str, **labels: str) -> float:
        name = "orbit_workflow_orchestration_lag_seconds" + suffix
        value = metrics.registry.get_sample_value(name, {"namespace": weave.namespace, **labels})
        return 0.0 if value is None else value

    assert weave.step_states(wf)["second"] == "ACTIVE"
    assert sample("_count") == 1
    assert sample("_bucket", le="2.5") == 0, "observed at least the three seconds it waited"
