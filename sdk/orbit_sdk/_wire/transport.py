"""The one place requests are sent: retries with backoff, and problem+json → typed errors.

What is retried, and why:

- **Not sent** (connect error, connect/pool timeout): always safe to retry, nothing reached the
  server.
- **Maybe applied** (read/write timeout, dropped connection, 502/503/504): retried only for calls
  marked ``idempotent`` -- reads, and writes the server deduplicates (submit with its idempotency
  key, start, heartbeat, complete, cancel, drain, close). A lease request is not: a lost answer
  means tasks were granted to nobody; they lapse back to WAITING, and the worker loop simply asks
  again rather than have the transport pile up grants.
- **429** only for GETs: there it is rate limiting and goes away. On a submission it means a quota
  is full -- a business answer the caller must see (``QuotaExceeded``), not something to hammer.

Backoff is exponential with full jitter (so many clients recovering from one outage do not retry
in lock-step), honours ``Retry-After``, and is bounded both in tries and in total time.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from ..errors import OrbitError, ServerUnreachable, ValidationFailed, error_for_problem
from ..json_values import storable_problem
from ..models import Problem

log = logging.getLogger("orbit_sdk.transport")

#: Gateway/overload answers worth another try (for idempotent calls).
RETRY_STATUSES = frozenset({502, 503, 504})
#: Raised before the request left this process: retrying can never duplicate an effect.
NOT_SENT_ERRORS: tuple[type[Exception], ...] = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.PoolTimeout,
)
#: The request may have reached the server.
MAYBE_SENT_ERRORS: tuple[type[Exception], ...] = (
    httpx.ReadTimeout,
    httpx.WriteTimeout,
    httpx.ReadError,
    httpx.WriteError,
    httpx.RemoteProtocolError,
)


@dataclass(frozen=True)
class RetryPolicy:
    """Bounds for one call's retries: ``max_attempts`` tries in at most ``max_elapsed`` s."""

    max_attempts: int = 5
    initial_backoff: float = 0.2
    max_backoff: float = 5.0
    multiplier: float = 2.0
    max_elapsed: float = 30.0

    def backoff(self, retry_number: int, rng: random.Random) -> float:
        """Full jitter: uniform in [0, min(cap, initial * multiplier**(n-1))]."""
        ceiling = min(
            self.max_backoff, self.initial_backoff * self.multiplier ** (retry_number - 1)
        )
        return rng.uniform(0, ceiling)


NO_RETRY = RetryPolicy(max_attempts=1)


def check_body(body: Any) -> None:
    """A body the server would refuse as JSON it cannot store (NaN, nesting too deep, text that
    is not Unicode) is refused before anything is sent, with the same typed error naming the
    field (``ValidationFailed``, client side)."""
    refused = storable_problem(body)
    if refused is not None:
        raise ValidationFailed.for_field(refused.path or "<body>", refused.reason)


@dataclass(frozen=True)
class Call:
    """One API call, described once so sync and async clients send exactly the same thing."""

    method: str
    path: str
    json: Any = None
    params: Mapping[str, Any] | None = None
    #: Safe to send again when the first try may have been applied (see module docstring).
    idempotent: bool = True
    #: Overrides the client's timeout (long polls need more than the usual read timeout).
    timeout: float | None = None
    retry: RetryPolicy | None = None
    #: Seconds for every try together, and the most any one try may wait for its answer (never
    #: more than the timeout it would have had): a worker's report must fit in a third of its
    #: lease, however long the client's own timeout and retries would wait.
    budget: float | None = None

    def __post_init__(self) -> None:
        if self.json is not None:
            check_body(self.json)

    def clean_params(self) -> dict[str, Any] | None:
        if not self.params:
            return None
        return {k: v for k, v in self.params.items() if v is not None}


def problem_from_response(response: httpx.Response) -> Problem:
    """Parse an error body; anything that is not a problem document (a proxy's HTML page, a
    framework default) becomes a synthetic problem with the status and a snippet of the text."""
    try:
        body = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        body = None
    if isinstance(body, dict) and "type" in body and "title" in body:
        data = dict(body)
        data.setdefault("status", response.status_code)
        try:
            return Problem.model_validate(data)
        except ValueError:
            pass
    detail = response.text[:500] if response.text else None
    if isinstance(body, dict) and isinstance(body.get("detail"), str):
        detail = body["detail"]
    return Problem(
        type="about:blank",
        title=response.reason_phrase or f"HTTP {response.status_code}",
        status=response.status_code,
        detail=detail,
    )


def error_from_response(response: httpx.Response) -> OrbitError:
    return error_for_problem(problem_from_response(response))


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # the HTTP-date form is rare for APIs; fall back to our own backoff


class _Retrier:
    """Decides, after each failed try, whether and how long to wait before the next one."""

    def __init__(
        self, call: Call, policy: RetryPolicy, rng: random.Random, clock: Callable[[], float]
    ) -> None:
        self.call, self.policy, self.rng, self.clock = call, policy, rng, clock
        self.tries = 1
        self.started = clock()

    def _delay(self, minimum: float | None = None) -> float | None:
        if self.tries >= self.policy.max_attempts:
            return None
        delay = self.policy.backoff(self.tries, self.rng)
        if minimum is not None:
            delay = max(delay, minimum)
        if self.clock() - self.started + delay > self.policy.max_elapsed:
            return None
        self.tries += 1
        return delay

    def after_exception(self, exc: Exception) -> float | None:
        if isinstance(exc, NOT_SENT_ERRORS):
            return self._delay()
        if isinstance(exc, MAYBE_SENT_ERRORS) and self.call.idempotent:
            return self._delay()
        return None

    def after_response(self, response: httpx.Response) -> float | None:
        status = response.status_code
        if status in RETRY_STATUSES and self.call.idempotent:
            return self._delay(_retry_after(response))
        if status == 429 and self.call.method == "GET":
            return self._delay(_retry_after(response))
        return None

    def next_try(self, outcome: httpx.Response | httpx.TransportError) -> float | None:
        """After one try: None when ``outcome`` is the answer to return (a 2xx), the seconds to
        wait before the next try, or the typed error for the final failure raised."""
        if isinstance(outcome, httpx.TransportError):
            delay = self.after_exception(outcome)
            if delay is None:
                raise _unreachable(self.call, outcome) from outcome
            self.log_retry(type(outcome).__name__, delay)
            return delay
        if outcome.is_success:
            return None
        delay = self.after_response(outcome)
        if delay is None:
            raise error_from_response(outcome)
        self.log_retry(f"HTTP {outcome.status_code}", delay)
        return delay

    def log_retry(self, why: str, delay: float) -> None:
        log.warning(
            "orbit request %s %s failed (%s); retry %d in %.2fs",
            self.call.method,
            self.call.path,
            why,
            self.tries,
            delay,
            extra={"orbit_path": self.call.path, "orbit_retry": self.tries},
        )


def _try_timeout(call: Call, client: httpx.Timeout) -> httpx.Timeout:
    """The timeout of one try: the call's own or the client's, cut to the call's budget."""
    if call.budget is None:
        return client if call.timeout is None else httpx.Timeout(call.timeout)
    usual = call.timeout if call.timeout is not None else client.read
    return httpx.Timeout(call.budget if usual is None else min(usual, call.budget))


def _policy(call: Call, default: RetryPolicy) -> RetryPolicy:
    policy = call.retry or default
    if call.budget is not None and call.budget < policy.max_elapsed:
        policy = dataclasses.replace(policy, max_elapsed=call.budget)
    return policy


def _unreachable(call: Call, exc: Exception) -> ServerUnreachable:
    err = ServerUnreachable.from_detail(
        f"{call.method} {call.path}: {type(exc).__name__}: {exc}",
        title="Orbit server unreachable",
    )
    assert isinstance(err, ServerUnreachable)
    return err


def _request(call: Call, client: httpx.Client | httpx.AsyncClient) -> httpx.Request:
    return client.build_request(
        call.method,
        call.path,
        json=call.json,
        params=call.clean_params(),
        timeout=_try_timeout(call, client.timeout),
    )


class SyncTransport:
    """Sends ``Call``s over an ``httpx.Client`` (thread-safe because httpx's pool is)."""

    def __init__(
        self,
        client: httpx.Client,
        policy: RetryPolicy | None = None,
        *,
        sleep: Callable[[float], object] = time.sleep,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.policy = policy or RetryPolicy()
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._clock = clock

    def send(self, call: Call) -> httpx.Response:
        """Return a 2xx answer or raise the typed error for the final failure."""
        retrier = _Retrier(call, _policy(call, self.policy), self._rng, self._clock)
        while True:
            outcome: httpx.Response | httpx.TransportError
            try:
                outcome = self.client.send(_request(call, self.client))
            except httpx.TransportError as exc:
                outcome = exc
            delay = retrier.next_try(outcome)
            if delay is None:
                assert isinstance(outcome, httpx.Response)
                return outcome
            self._sleep(delay)

    def close(self) -> None:
        self.client.close()


async def _async_sleep(delay: float) -> None:
    await asyncio.sleep(delay)


class AsyncTransport:
    """The ``httpx.AsyncClient`` twin of ``SyncTransport``: the same requests, the same retry
    decisions (``_Retrier.next_try``); only the sending and the sleeping are awaited."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        policy: RetryPolicy | None = None,
        *,
        sleep: Callable[[float], Any] = _async_sleep,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.policy = policy or RetryPolicy()
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._clock = clock

    async def send(self, call: Call) -> httpx.Response:
        retrier = _Retrier(call, _policy(call, self.policy), self._rng, self._clock)
        while True:
            outcome: httpx.Response | httpx.TransportError
            try:
                outcome = await self.client.send(_request(call, self.client))
            except httpx.TransportError as exc:
                outcome = exc
            delay = retrier.next_try(outcome)
            if delay is None:
                assert isinstance(outcome, httpx.Response)
                return outcome
            await self._sleep(delay)

    async def aclose(self) -> None:
        await self.client.aclose()
