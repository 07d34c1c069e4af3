"""The WorkflowDefinition spec (the DSL, docs/concepts/workflows.md): a pydantic model plus the
checks a schema cannot express — unknown steps in ``dependsOn``, cycles, ``goto`` targets, CEL
that does not compile, an input schema that is not JSON Schema. Every problem names its field.

The canonical form (defaults filled in, camelCase keys, sorted) is what gets published and
digested, so two specs that mean the same thing have the same digest.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any, Literal

import jsonschema
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from orbit_store.errors import InvalidRequest

from . import cel

#: Step and signal names are CEL identifiers, so expressions can say ``steps.reserve.result``.
IDENTIFIER = r"^[a-z][a-z0-9_]{0,62}$"
QUEUE_OR_TEMPLATE = r"^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?|.*\$\{.+\}.*)$"
MAX_STEPS = 100

StepKind = Literal["task", "wait", "sleep", "poll"]


class Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True
    )


class TaskTemplate(Model):
    """The Pulse task a step (or each poll round) creates; strings may hold ``${CEL}``."""

    handler: str = Field(..., min_length=1, max_length=255)
    queue: str = Field("default", min_length=1, max_length=255, pattern=QUEUE_OR_TEMPLATE)
    params: Any = Field(default_factory=dict)
    max_attempts: int | None = Field(None, ge=1, le=1000)
    safety: Literal["safe", "unsafe"] | None = None
    priority: int | None = Field(None, ge=-1000, le=1000)


class WaitSpec(Model):
    """Wait for the named signal; ``onTimeout`` is ``fail``, ``continue`` or ``goto <step>``."""

    signal: str = Field(..., pattern=IDENTIFIER)
    timeout_seconds: float | None = Field(None, gt=0, le=366 * 86_400)
    on_timeout: str = Field("fail", pattern=r"^(fail|continue|goto [a-z][a-z0-9_]{0,62})$")

    @property
    def goto(self) -> str | None:
        return self.on_timeout[5:] if self.on_timeout.startswith("goto ") else None


class SleepSpec(Model):
    """Sleep for ``seconds``, or until the RFC 3339 instant ``until`` (a template)."""

    seconds: float | None = Field(None, ge=0, le=366 * 86_400)
    until: str | None = Field(None, min_length=1, max_length=1024)

    @model_validator(mode="after")
    def _one_of(self) -> SleepSpec:
        if (self.seconds is None) == (self.until is None):
            raise ValueError("give exactly one of seconds or until")
        return self


class PollSpec(TaskTemplate):
    """A task per round until ``until`` holds, at most ``maxRounds`` rounds and ``deadlineSeconds``
    after the first; ``intervalSeconds`` between a round's result and the next round."""

    until: str = Field(..., min_length=1, max_length=4096)
    interval_seconds: float = Field(..., ge=0, le=86_400)
    max_rounds: int = Field(..., ge=1, le=10_000)
    deadline_seconds: float | None = Field(None, gt=0, le=366 * 86_400)


class Step(Model):
    name: str = Field(..., pattern=IDENTIFIER)
    depends_on: list[str] = Field(default_factory=list, max_length=MAX_STEPS)
    when: str | None = Field(None, min_length=1, max_length=4096)
    on_failure: Literal["fail", "continue"] = "fail"
    task: TaskTemplate | None = None
    wait: WaitSpec | None = None
    sleep: SleepSpec | None = None
    poll: PollSpec | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> Step:
        given = [k for k in ("task", "wait", "sleep", "poll") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                "a step is exactly one of task, wait, sleep or poll"
                + (f" (this one has {', '.join(given)})" if given else "")
            )
        return self

    @property
    def kind(self) -> StepKind:
        for kind in ("task", "wait", "sleep", "poll"):
            if getattr(self, kind) is not None:
                return kind
        raise AssertionError("validated: one kind")


class WorkflowSpec(Model):
    description: str | None = Field(None, max_length=4096)
    input_schema: dict[str, Any] | None = None
    steps: list[Step] = Field(..., min_length=1, max_length=MAX_STEPS)
    output: Any = None


@dataclass(frozen=True)
class SpecProblem:
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class InvalidDefinition(InvalidRequest):
    """The spec is not a valid workflow definition; ``problems`` name each field."""

    def __init__(self, problems: list[SpecProblem]) -> None:
        super().__init__("; ".join(str(p) for p in problems))
        self.problems = problems


def _path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def parse(document: Any) -> WorkflowSpec:
    """Validate a spec document; raise :class:`InvalidDefinition` listing every problem."""
    try:
        spec = WorkflowSpec.model_validate(document)
    except ValidationError as exc:
        problems = [SpecProblem(_path(tuple(e["loc"])), _message(e)) for e in exc.errors()]
        raise InvalidDefinition(problems) from None
    problems = _graph_problems(spec) + _cel_problems(spec) + _schema_problems(spec)
    if problems:
        raise InvalidDefinition(problems)
    return spec


def _message(error: Any) -> str:
    field = error["loc"][-1] if error["loc"] else ""
    if error["type"] == "string_pattern_mismatch" and field in ("name", "signal"):
        return (
            f"{error['input']!r} is not a lowercase CEL identifier (a letter, then letters, "
            "digits or _), which CEL needs to read it as steps.<name> or signals.<name>"
        )
    return str(error["msg"]).removeprefix("Value error, ")


def _graph_problems(spec: WorkflowSpec) -> list[SpecProblem]:
    problems: list[SpecProblem] = []
    names = [s.name for s in spec.steps]
    known = ", ".join(names)
    for i, step in enumerate(spec.steps):
        if names.index(step.name) != i:
            problems.append(
                SpecProblem(f"steps[{i}].name", f"step {step.name!r} is declared twice")
            )
        for j, dep in enumerate(step.depends_on):
            where = f"steps[{i}].dependsOn[{j}]"
            if dep == step.name:
                problems.append(SpecProblem(where, "a step cannot depend on itself"))
            elif dep not in names:
                problems.append(SpecProblem(where, f"unknown step {dep!r} (steps are: {known})"))
        if step.wait is not None and step.wait.goto is not None:
            target = step.wait.goto
            where = f"steps[{i}].wait.onTimeout"
            owner = next((s for s in spec.steps if s.name == target), None)
            if owner is None:
                problems.append(SpecProblem(where, f"unknown step {target!r} (steps are: {known})"))
            elif step.name not in owner.depends_on:
                problems.append(
                    SpecProblem(
                        where,
                        f"the goto target {target!r} must list {step.name!r} in its dependsOn "
                        "(it is the branch taken when this wait times out)",
                    )
                )
    if not problems:
        cycle = _find_cycle(spec)
        if cycle:
            problems.append(SpecProblem("steps", "dependsOn forms a cycle: " + " → ".join(cycle)))
    return problems


def _find_cycle(spec: WorkflowSpec) -> list[str]:
    """A dependency cycle as a path (``a → b → a`` reads "a depends on b, b on a"), or []."""
    deps = {s.name: s.depends_on for s in spec.steps}
    state: dict[str, int] = {}  # 1 on the current path, 2 done

    def visit(name: str, path: list[str]) -> list[str]:
        state[name] = 1
        path.append(name)
        for dep in deps[name]:
            if state.get(dep) == 1:
                return [*path[path.index(dep) :], dep]
            if dep not in state:
                found = visit(dep, path)
                if found:
                    return found
        path.pop()
        state[name] = 2
        return []

    for name in deps:
        if name not in state:
            found = visit(name, [])
            if found:
                return found
    return []


def _cel_problems(spec: WorkflowSpec) -> list[SpecProblem]:
    found: list[tuple[str, str]] = []
    for i, step in enumerate(spec.steps):
        base = f"steps[{i}]"
        if step.when is not None:
            found.append((f"{base}.when", step.when))
        template = step.task or step.poll
        if template is not None:
            field = "task" if step.task is not None else "poll"
            for name in ("handler", "queue", "params"):
                found += cel.expressions(getattr(template, name), f"{base}.{field}.{name}")
        if step.poll is not None:
            found.append((f"{base}.poll.until", step.poll.until))
        if step.sleep is not None and step.sleep.until is not None:
            found += cel.expressions(step.sleep.until, f"{base}.sleep.until")
    found += cel.expressions(spec.output, "output")
    problems = []
    for path, expression in found:
        error = cel.compile_error(expression)
        if error is not None:
            problems.append(SpecProblem(path, f"CEL {expression!r} {error}"))
    return problems


def _schema_problems(spec: WorkflowSpec) -> list[SpecProblem]:
    if spec.input_schema is None:
        return []
    try:
        jsonschema.Draft202012Validator.check_schema(spec.input_schema)
    except jsonschema.SchemaError as exc:
        return [SpecProblem("inputSchema", f"not a valid JSON Schema: {exc.message}")]
    return []


def canonical(spec: WorkflowSpec) -> dict[str, Any]:
    """The spec as published: defaults filled in, camelCase, absent optionals left out."""
    return spec.model_dump(mode="json", by_alias=True, exclude_none=True)


def digest_of(document: dict[str, Any]) -> str:
    text = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Definition:
    """A published spec ready to run: steps by name, in an order where dependencies come first."""

    spec: WorkflowSpec
    order: tuple[str, ...]

    def step(self, name: str) -> Step:
        return self._by_name[name]

    @cached_property
    def _by_name(self) -> dict[str, Step]:
        return {s.name: s for s in self.spec.steps}

    @cached_property
    def signal_names(self) -> frozenset[str]:
        return frozenset(s.wait.signal for s in self.spec.steps if s.wait is not None)

    def goto_edge(self, dependency: str, step: str) -> bool | None:
        """For a dependency that is a wait with ``goto``: True when ``step`` is its timeout
        branch, False when it is a normal successor; None when the dependency has no goto."""
        wait = self.step(dependency).wait
        if wait is None or wait.goto is None:
            return None
        return wait.goto == step


@lru_cache(maxsize=512)
def _definition(text: str) -> Definition:
    spec = WorkflowSpec.model_validate(json.loads(text))
    done: list[str] = []
    pending = list(spec.steps)
    while pending:  # validated acyclic: each sweep places at least one step
        for step in list(pending):
            if all(dep in done for dep in step.depends_on):
                done.append(step.name)
                pending.remove(step)
    return Definition(spec, tuple(done))


def load(document: dict[str, Any]) -> Definition:
    """The runnable form of a stored (already validated) spec; cached by content."""
    return _definition(json.dumps(document, sort_keys=True, separators=(",", ":")))
