"""The body of ``GET /v1/whoami``: who a token is and the one namespace it may act in."""

from __future__ import annotations

from pydantic import Field

from orbit.api.schemas.base import Out


class Identity(Out):
    namespace: str = Field(..., description="The one namespace this token may act in.")
    name: str
    roles: list[str] = Field(..., examples=[["submit", "review"]])
