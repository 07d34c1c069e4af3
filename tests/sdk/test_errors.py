"""The SDK's typed errors travel between processes (multiprocessing pools, task queues that
pickle exceptions) as what they were: the same class, problem, message and ``client_side``."""

from __future__ import annotations

import multiprocessing
import pickle

import pytest

from orbit_sdk.errors import (
    PROBLEM_CLASSES,
    OrbitError,
    ServerUnreachable,
    TimeoutExpired,
    ValidationFailed,
    error_for_problem,
)
from orbit_sdk.models import Problem

SERVER_ERRORS = [OrbitError, *PROBLEM_CLASSES.values()]


def problem_for(cls: type[OrbitError]) -> Problem:
    return Problem(
        type=f"https://orbit.dev/problems/{cls.slug or 'x'}",
        title=cls.__name__,
        status=cls.default_status,
        detail="it went wrong",
    )


@pytest.mark.parametrize("cls", SERVER_ERRORS, ids=lambda cls: cls.__name__)
def test_a_server_error_survives_pickling_whole(cls: type[OrbitError]) -> None:
    error = cls(problem_for(cls))
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is cls
    assert (str(copy), copy.status, copy.type, copy.client_side) == (
        str(error),
        error.status,
        error.type,
        False,
    )


def test_a_client_side_error_stays_client_side_when_pickled() -> None:
    error = ServerUnreachable.from_detail("connection refused")
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), str(copy), copy.client_side) == (ServerUnreachable, str(error), True)


def test_a_timeout_keeps_the_last_state_it_saw_when_pickled() -> None:
    error = TimeoutExpired(problem_for(TimeoutExpired), task={"id": 7, "state": "RUNNING"})
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.task, str(copy), copy.client_side) == (error.task, str(error), True)


def test_a_validation_error_keeps_the_fields_it_names_when_pickled() -> None:
    problem = Problem.model_validate(
        {
            "type": "https://orbit.dev/problems/validation",
            "title": "Invalid request",
            "status": 422,
            "errors": [{"loc": ["body", "retry", "max_attempts"], "msg": "must be >= 1"}],
        }
    )
    copy = pickle.loads(pickle.dumps(error_for_problem(problem)))
    assert isinstance(copy, ValidationFailed)
    assert copy.fields == [("retry.max_attempts", "must be >= 1")]


def _raise_not_found(_: int) -> None:
    raise error_for_problem(problem_for(PROBLEM_CLASSES["not-found"]))


def test_an_error_raised_in_a_pool_process_reaches_the_caller_typed() -> None:
    """Before the fix the pool's result thread died unpickling it and the caller hung."""
    with multiprocessing.get_context("fork").Pool(2) as pool:
        outcome = pool.map_async(_raise_not_found, [1])
        with pytest.raises(OrbitError) as raised:
            outcome.get(timeout=60)
    assert (raised.value.status, raised.value.slug) == (404, "not-found")
