"""CEL (the Kubernetes expression language, via cel-python) for workflow conditions and templates.

Expressions see ``input`` (the instance input), ``steps`` (``steps.<name>.state`` and
``steps.<name>.result``) and ``signals`` (``signals.<name>``: the payload of the signal a wait of
that name consumed); a poll's ``until`` also sees ``result`` (this round's task result) and
``round`` (1, 2, …).

A template is any JSON value whose strings may hold ``${expression}``: a string that is exactly
one expression becomes the expression's value (a number stays a number, a map a map); otherwise
each ``${…}`` is replaced by the value's text. An expression inside ``${…}`` of a longer string
cannot contain ``}``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any

import celpy
from celpy import celtypes
from celpy.adapter import CELJSONEncoder, json_to_cel

_ENV = celpy.Environment()
_EMBEDDED = re.compile(r"\$\{(.+?)\}", re.DOTALL)


class CelError(Exception):
    """An expression failed to compile or to evaluate; the message names the expression."""

    def __init__(self, expression: str, message: str) -> None:
        super().__init__(f"CEL {expression!r}: {message}")
        self.expression, self.message = expression, message


@lru_cache(maxsize=4096)
def _program(expression: str) -> celpy.Runner:
    try:
        return _ENV.program(_ENV.compile(expression))
    except Exception as exc:  # CELParseError and friends: one line of the parser's report
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CelError(expression, f"does not compile: {first}") from None


def compile_error(expression: str) -> str | None:
    """Why ``expression`` does not compile, or None when it does."""
    try:
        _program(expression)
    except CelError as exc:
        return exc.message
    return None


def to_json(value: Any) -> Any:
    """A CEL value as plain JSON data (NaN and infinities as Python's json writes them)."""
    return json.loads(json.dumps(CELJSONEncoder.to_python(value), cls=CELJSONEncoder))


def _json_result(expression: str, value: Any) -> Any:
    """An expression's value as JSON, which has no NaN or infinities (CEL has: ``1.0/0.0``): such
    a value is the expression's error, not a number the store would refuse."""
    try:
        return json.loads(
            json.dumps(CELJSONEncoder.to_python(value), cls=CELJSONEncoder, allow_nan=False)
        )
    except ValueError:
        raise CelError(
            expression, "the value holds NaN or an infinity, which JSON has no number for"
        ) from None


def _activation(expression: str, variables: Mapping[str, Any]) -> dict[str, Any]:
    """The variables as CEL values. JSON that CEL cannot hold (an integer beyond 64 bits) is
    the expression's error, as any other failure to evaluate it."""
    try:
        return {name: json_to_cel(value) for name, value in variables.items()}
    except (ValueError, OverflowError) as exc:
        raise CelError(
            expression, f"a value is out of CEL's range (integers are 64-bit): {exc}"
        ) from None


def evaluate(expression: str, variables: Mapping[str, Any]) -> Any:
    """Evaluate ``expression`` over JSON ``variables``; the result as JSON data."""
    activation = _activation(expression, variables)
    try:
        result = _program(expression).evaluate(activation)
    except celpy.CELEvalError as exc:  # type: ignore[attr-defined]
        raise CelError(expression, f"evaluation failed: {exc.args[0]}") from None
    if isinstance(result, celpy.CELEvalError):  # type: ignore[attr-defined]
        raise CelError(expression, f"evaluation failed: {result.args[0]}")
    return _json_result(expression, result)


def condition(expression: str, variables: Mapping[str, Any]) -> bool:
    """Evaluate a condition; anything but a boolean is an error."""
    activation = _activation(expression, variables)
    try:
        result = _program(expression).evaluate(activation)
    except celpy.CELEvalError as exc:  # type: ignore[attr-defined]
        raise CelError(expression, f"evaluation failed: {exc.args[0]}") from None
    if not isinstance(result, celtypes.BoolType):
        raise CelError(expression, f"must be true or false, got {to_json(result)!r}")
    return bool(result)


def _whole(text: str) -> str | None:
    """The expression when ``text`` is exactly ``${expression}``."""
    if text.startswith("${") and text.endswith("}") and "${" not in text[2:]:
        return text[2:-1].strip()
    return None


def render(template: Any, variables: Mapping[str, Any]) -> Any:
    """The template with every ``${…}`` evaluated (see the module docstring)."""
    if isinstance(template, str):
        whole = _whole(template)
        if whole is not None:
            return evaluate(whole, variables)
        return _EMBEDDED.sub(lambda m: _text(evaluate(m.group(1).strip(), variables)), template)
    if isinstance(template, list):
        return [render(item, variables) for item in template]
    if isinstance(template, dict):
        return {key: render(value, variables) for key, value in template.items()}
    return template


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def expressions(template: Any, path: str) -> Iterator[tuple[str, str]]:
    """(path, expression) of every ``${…}`` in the template, for validation."""
    if isinstance(template, str):
        whole = _whole(template)
        found = [whole] if whole is not None else [m.strip() for m in _EMBEDDED.findall(template)]
        for expression in found:
            yield path, expression
    elif isinstance(template, list):
        for i, item in enumerate(template):
            yield from expressions(item, f"{path}[{i}]")
    elif isinstance(template, dict):
        for key, value in template.items():
            yield from expressions(value, f"{path}.{key}")
