"""What every body of the HTTP API shares: the base models (``Strict`` in, ``Out`` out), the
pattern of a name, and the problem document every refusal answers with."""

from __future__ import annotations

import datetime as dt
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from orbit_sdk.json_values import check_storable

NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"


class Strict(BaseModel):
    """A request body: unknown fields, non-JSON numbers (NaN, Infinity: also in a typed float)
    and anything the database cannot store (``orbit_sdk.json_values``) are a 422 naming the
    field."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    #: JSON fields the route checks itself (``limits.check_payload``), so that a batch refuses
    #: only its item and a completion fails its attempt instead of being refused.
    checked_by_route: ClassVar[frozenset[str]] = frozenset()

    @field_validator("*", mode="after")
    @classmethod
    def _storable(cls, value: Any, info: ValidationInfo) -> Any:
        if (
            not isinstance(value, str | dict | list | float)
            or info.field_name in cls.checked_by_route
        ):
            return value
        if isinstance(value, list) and any(isinstance(v, BaseModel) for v in value):
            return value  # a list of bodies (batch items): each checked itself
        check_storable(value, info.field_name or "")
        return value


class Out(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    @field_validator("*", mode="after")
    @classmethod
    def _utc(cls, value: Any) -> Any:
        """The store keeps naive UTC; the wire always says so (RFC 3339 with an offset)."""
        if isinstance(value, dt.datetime) and value.tzinfo is None:
            return value.replace(tzinfo=dt.UTC)
        return value


class Problem(BaseModel):
    """RFC 9457 problem details; ``type`` is stable per kind of error."""

    type: str = Field(..., examples=["https://orbit.dev/problems/lease-lost"])
    title: str
    status: int
    detail: str | None = None
    instance: str | None = None
    errors: list[dict[str, Any]] | None = None
