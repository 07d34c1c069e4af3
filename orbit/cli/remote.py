"""What every command that talks to a server shares: `--server`, `--token`, `--namespace`
(each: the flag, its environment variable, else the CLI context's -- contexts.py; the namespace
at last the token's own, from ``GET /v1/whoami``), and one way of reporting the server's
errors -- the problem's title and detail, every field it names (as the command's option when
there is one), and the exit code from exits.py. No tracebacks for answers a user can act on."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import astuple, dataclass
from typing import Annotated, NoReturn

import typer

from orbit.cli import contexts
from orbit.cli.exits import ExitCode, for_status
from orbit_sdk import Client, OrbitError, RetryPolicy, ServerUnreachable, Unauthorized
from orbit_sdk.errors import field_errors

DEFAULT_SERVER = "http://127.0.0.1:8080"

Server = Annotated[
    str | None,
    typer.Option(
        "--server",
        envvar="ORBIT_SERVER",
        help=f"Orbit server URL (default: the context's, else {DEFAULT_SERVER}).",
        show_default=False,
    ),
]
Token = Annotated[
    str | None,
    typer.Option(
        "--token",
        envvar="ORBIT_TOKEN",
        help="Bearer token (default: the context's token file; `orbit dev` writes one).",
        show_default=False,
    ),
]
Namespace = Annotated[
    str | None,
    typer.Option(
        "--namespace",
        "-n",
        envvar="ORBIT_NAMESPACE",
        help="Namespace (default: the context's, else the token's own).",
        show_default=False,
    ),
]
Reason = Annotated[str, typer.Option(help="Why (recorded in the audit log).")]

#: A person is waiting: a few quick tries, not the SDK's 30 s of patience.
CLI_RETRY = RetryPolicy(max_attempts=3, initial_backoff=0.2, max_backoff=1.0, max_elapsed=5.0)


@dataclass(frozen=True)
class Remote:
    client: Client
    namespace: str


def fail(message: str, code: ExitCode) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def in_cli_terms(text: str, options: Mapping[str, str]) -> str:
    """The server's words with the API's ``field=value`` as this command's option: a person
    typed ``--execution-ended``, not ``execution_ended=true``."""
    for field, option in options.items():
        text = re.sub(rf"\b{re.escape(field)}=true\b", option, text)
        text = re.sub(rf"\b{re.escape(field)}=(?=\S)", f"{option} ", text)
    return text


def report(exc: OrbitError, options: Mapping[str, str] | None = None, server: str = "") -> NoReturn:
    """Print an SDK error for a person and exit with its code. ``options`` maps the API's field
    names to this command's options (``{"page_size": "--limit"}``)."""
    problem = exc.problem
    if isinstance(exc, ServerUnreachable):
        head = f"cannot reach the Orbit server at {server or 'its URL'} ({problem.detail})"
        hint = "is it running? point --server or ORBIT_SERVER at it"
    else:
        head = problem.title if exc.client_side else f"{problem.title} ({problem.status})"
        if problem.detail:
            head += f": {in_cli_terms(problem.detail, options or {})}"
        hint = "pass --token or set ORBIT_TOKEN" if isinstance(exc, Unauthorized) else ""
    typer.echo(f"error: {head}", err=True)
    for field, message in field_errors(problem):
        option = (options or {}).get(field.split(".")[0].split("[")[0])
        typer.echo(f"  {f'{option} ({field})' if option else field}: {message}", err=True)
    if hint:
        typer.echo(f"  {hint}", err=True)
    raise typer.Exit(for_status(problem.status, client_side=exc.client_side))


@dataclass(frozen=True)
class Target:
    """Where a command goes: flags and environment first, then the CLI context."""

    server: str
    token: str | None
    namespace: str | None


def target(server: str | None, token: str | None, namespace: str | None) -> Target:
    try:
        context = contexts.active()
        context_token = context.token() if context is not None and not token else None
    except contexts.ContextError as exc:
        fail(str(exc), ExitCode.USAGE)
    return Target(
        server or (context.server if context else None) or DEFAULT_SERVER,
        token or context_token,
        namespace or (context.namespace if context else None),
    )


NO_TOKEN = (
    "no token: pass --token or set ORBIT_TOKEN, or run `orbit dev`, which writes a context "
    "every command finds (`orbit context` shows it)"
)


@contextmanager
def remote(
    server: str | None,
    token: str | None,
    namespace: str | None,
    options: Mapping[str, str] | None = None,
) -> Iterator[Remote]:
    """A client and the namespace to use; any SDK error inside is reported (see ``report``)."""
    server, token, namespace = astuple(target(server, token, namespace))
    if not token:
        fail(NO_TOKEN, ExitCode.AUTH)
    if logging.getLogger().level > logging.DEBUG:
        # The SDK logs each retry; a person only needs the final answer.
        logging.getLogger("orbit_sdk").setLevel(logging.ERROR)
    with Client(server, token=token, retry=CLI_RETRY) as client:
        try:
            yield Remote(client, namespace or client.whoami().namespace)
        except OrbitError as exc:
            report(exc, options, client.server)
