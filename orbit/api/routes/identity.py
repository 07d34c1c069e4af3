"""``GET /v1/whoami``: the namespace, name and roles of the caller's token, so clients holding
only a token (the CLI without ``--namespace``, a worker without one) can find their namespace."""

from __future__ import annotations

from fastapi import APIRouter

from orbit.api.routes.tasks import PROBLEMS
from orbit.api.schemas import identity as schemas
from orbit.api.transport.auth import CurrentCredential

router = APIRouter(tags=["identity"])


@router.get(
    "/v1/whoami",
    response_model=schemas.Identity,
    responses={401: PROBLEMS[401]},
    summary="The token's namespace, name and roles",
)
def whoami(credential: CurrentCredential) -> schemas.Identity:
    """Any valid token may ask; the answer is only about that token."""
    return schemas.Identity(
        namespace=credential.namespace,
        name=credential.name,
        roles=sorted(role.value for role in credential.roles),
    )
