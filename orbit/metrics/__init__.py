"""Prometheus metrics (ORBIT.md §11; the catalogue is docs/operations/monitoring.md).

``server`` holds each app's registry and the counters and histograms of the server and its
engines; ``delivery``, ``fencing`` and ``workflows`` the gauges the gauge loop reads from MySQL;
``processes`` the multiprocess directory that lets one pod's server processes report as one.

This module imports nothing: ``processes`` must be importable before prometheus_client is
(it picks its mode at import), so nothing here may pull prometheus_client in.
"""
