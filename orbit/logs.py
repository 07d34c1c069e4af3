"""Structured (JSON lines) logging for every Orbit process.

Fields passed through ``extra=`` become top-level JSON keys. Secrets never reach a log call:
tokens are hashed before they leave the request path, and database URLs are rendered with the
password hidden.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}
#: Extra fields other libraries add that are noise in JSON: uvicorn's ANSI-coloured message copy.
_DROPPED = _STANDARD | {"color_message"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update({k: v for k, v in record.__dict__.items() if k not in _DROPPED})
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure_logging(level: str = "INFO", *, json_lines: bool = True) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if json_lines:
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # One line per HTTP request is noise for a CLI; the server has its own access metrics.
    logging.getLogger("httpx").setLevel(max(logging.WARNING, root.level))
    logging.getLogger("alembic").setLevel(max(logging.WARNING, root.level))
