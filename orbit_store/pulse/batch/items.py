"""The items of a batch of attempt reports: a start or a completion, named by attempt and token.

Apart from ``batches`` (which runs them) so that the set path (``start_set``,
``complete_set``) can name them without importing the module that calls it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from orbit_store.pulse.model import Outcome, Safety


@dataclass(frozen=True)
class StartItem:
    attempt_id: str
    token: str
    handler_safety: Safety | None = None


@dataclass(frozen=True)
class CompletionItem:
    attempt_id: str
    token: str
    outcome: Outcome
    result: Any = None
    error: Any = None
    retryable: bool = False
