"""Response bodies made from the store's read models, so that a shape has one definition.

The store's frozen dataclass (``orbit_store.overview.Overview``, ``…SessionView``) names the
fields, their order and their types; :func:`mirrors` gives them to the response body, and the
API adds only what the wire says beyond the store: a description, a narrower type (a ``Literal``
of states), a field the wire leaves out, or fields declared in the class body (the wire's own,
or store fields with a default), which follow the others unless the body gives the wire's
order. A field renamed or dropped in the store then fails at import, naming it, never silently
on the wire.

Every mirrored field is required unless the API gives it a default: a response always carries
it, whatever default the store's constructor has.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import types as runtime_types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, Field, create_model
from pydantic.fields import FieldInfo

M = TypeVar("M", bound=BaseModel)

#: What the API says about one store field: its description, or a whole ``Field(...)``.
Said = str | FieldInfo

#: The store view each body mirrors (to swap nested views for their bodies).
_VIEW_OF: dict[type, type] = {}


def mirrors(
    view: type,
    *,
    said: Mapping[str, Said] | None = None,
    types: Mapping[str, Any] | None = None,
    nested: Iterable[type[BaseModel]] = (),
    omit: Iterable[str] = (),
    order: Sequence[str] = (),
) -> Callable[[type[M]], type[M]]:
    """Decorates a body whose class declares fields only: the body gets ``view``'s fields in
    the store's order, typed as in the store unless ``types`` narrows them, described by
    ``said``; a store view nested in a field (``list[…]``, ``… | None``) becomes its body from
    ``nested``; ``omit`` leaves store fields out. The fields the class declares (the wire's
    own, or store fields redeclared with a default) follow the others, in the class's order —
    or ``order`` names every field of the body in the wire's order, when the wire sets its own
    fields among the store's."""

    def build(declared: type[M]) -> type[M]:
        hints = typing.get_type_hints(view)
        stored = [f.name for f in dataclasses.fields(view)]
        unknown = (set(said or {}) | set(types or {}) | set(omit)) - set(stored)
        if unknown:
            raise TypeError(f"{view.__qualname__} has no field {', '.join(sorted(unknown))}")
        inherited = {n for base in declared.__bases__ for n in getattr(base, "model_fields", {})}
        own = [n for n in declared.model_fields if n not in inherited]
        bodies = {_VIEW_OF[body]: body for body in nested}
        definitions: dict[str, Any] = {}
        for name in stored:
            if name in omit or name in own:
                continue
            spoken = (said or {}).get(name)
            info = spoken if isinstance(spoken, FieldInfo) else Field(..., description=spoken)
            definitions[name] = ((types or {}).get(name, _swap(hints[name], bodies)), info)
        for name in own:  # declared in the body: the wire's own, or a store field redeclared
            field = declared.model_fields[name]
            definitions[name] = (field.annotation, field)
        body: type[BaseModel] = create_model(
            declared.__name__,
            __base__=declared.__bases__,
            __doc__=declared.__doc__,
            __module__=declared.__module__,
            **_in_order(declared.__name__, definitions, order),
        )
        _VIEW_OF[body] = view
        return typing.cast("type[M]", body)

    return build


def _in_order(body: str, definitions: dict[str, Any], order: Sequence[str]) -> dict[str, Any]:
    """``definitions`` in ``order`` when one is given; it must name each field once, so a
    field the store adds or drops fails at import here too."""
    if not order:
        return definitions
    if sorted(order) != sorted(definitions):
        missing, extra = set(definitions) - set(order), set(order) - set(definitions)
        raise TypeError(
            f"{body}'s order must name each field once: missing {sorted(missing)}, "
            f"unknown {sorted(extra)}"
        )
    return {name: definitions[name] for name in order}


def _swap(hint: Any, bodies: Mapping[type, type[BaseModel]]) -> Any:
    """``hint`` with each store view in ``bodies`` replaced by its body, at any depth."""
    if isinstance(hint, type) and hint in bodies:
        return bodies[hint]
    args = typing.get_args(hint)
    if not args:
        return hint
    swapped = tuple(_swap(arg, bodies) for arg in args)
    if isinstance(hint, runtime_types.UnionType):  # X | None
        return functools.reduce(operator.or_, swapped)
    return typing.get_origin(hint)[swapped]
