"""Exit codes, one table for every `orbit` command (docs/reference/cli.md lists them per
command). Scripts branch on these, so a code keeps its meaning across commands and releases."""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    OK = 0
    #: The server or the store refused, or the operation failed: not found, conflict, quota,
    #: an invariant violation found, an internal error.
    FAILED = 1
    #: An option or an input is invalid: found by the CLI, or the server's 422/413 answer.
    USAGE = 2
    #: Done only in part: `orbit apply` wrote everything, but some objects are not ready yet.
    INCOMPLETE = 3
    #: No token, an unknown, expired or revoked one (401), or one not allowed to do this (403).
    AUTH = 4
    #: Something needed is not there now: the server is unreachable or unavailable (503), the
    #: database is unreachable or its schema is not current, the port is taken.
    UNAVAILABLE = 5
    #: `--wait` and `orbit task watch`: how the task ended, when it did not succeed.
    TASK_FAILED = 10
    TASK_CANCELLED = 11
    TASK_NEEDS_REVIEW = 12
    #: `--wait` ran out of time while the task was still going (it keeps going).
    STILL_RUNNING = 13


#: A settled task's state → the exit code of a command that waited for it.
STATE_EXIT_CODES = {
    "SUCCEEDED": ExitCode.OK,
    "FAILED": ExitCode.TASK_FAILED,
    "CANCELLED": ExitCode.TASK_CANCELLED,
    "NEEDS_REVIEW": ExitCode.TASK_NEEDS_REVIEW,
}


def for_status(status: int, *, client_side: bool = False) -> ExitCode:
    """The exit code for an error answer (or a client-side stand-in with ``client_side``)."""
    if client_side or status in (502, 503, 504):
        return ExitCode.UNAVAILABLE
    if status in (401, 403):
        return ExitCode.AUTH
    if status in (400, 413, 422):
        return ExitCode.USAGE
    return ExitCode.FAILED


def for_state(state: str) -> ExitCode:
    return STATE_EXIT_CODES.get(state, ExitCode.STILL_RUNNING)
