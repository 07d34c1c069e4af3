"""Logging of the operator: JSON lines for `orbit operator` (orbit.logs), with Kopf's per-object
context kept as ``object`` ({kind, namespace, name, uid}) and its internal extras left out; and
the resync timers' routine "succeeded" lines kept out of the log and of the objects' Events."""

from __future__ import annotations

import logging

from orbit.logs import JsonFormatter

_INTERNAL = ("settings", "k8s_skip", "k8s_ref")
KOPF_OBJECTS = "kopf.objects"


class OperatorJsonFormatter(JsonFormatter):
    def format(self, record: logging.LogRecord) -> str:
        ref = getattr(record, "k8s_ref", None)
        saved = {key: record.__dict__.pop(key) for key in _INTERNAL if key in record.__dict__}
        if isinstance(ref, dict):
            record.__dict__["object"] = {k: v for k, v in ref.items() if k != "apiVersion"}
        try:
            return super().format(record)
        finally:
            record.__dict__.pop("object", None)
            record.__dict__.update(saved)


def use_json_logs() -> None:
    """Swap the JSON formatter `orbit` configured for the operator's own."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler.formatter, JsonFormatter):
            handler.setFormatter(OperatorJsonFormatter())


class QuietTimers(logging.Filter):
    """Kopf logs "Timer 'x' succeeded." at INFO for every tick of every object, and posts each
    as an Event; drop those. What a tick changes is logged by the handler itself."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.INFO or not isinstance(record.msg, str):
            return True
        return not (record.msg.startswith("Timer ") and record.msg.endswith(" succeeded."))


def quiet_timers() -> None:
    logger = logging.getLogger(KOPF_OBJECTS)
    if not any(isinstance(f, QuietTimers) for f in logger.filters):
        logger.addFilter(QuietTimers())
