"""The web console: pages under ``/ui`` served by ``orbit server`` and ``orbit dev``.

The console is a client of the public HTTP API: the server hands out the same static page and
ES modules to everyone (they hold no data), and the browser calls ``/v1/…`` with the user's
bearer token, like the CLI. There is no second path into the store. docs/ui.md says why this
stack (Preact with htm, dagre for workflow graphs, vendored; no build step).
"""

from .routes import install

__all__ = ["install"]
