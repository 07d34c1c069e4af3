"""The system namespace is reserved. An admin credential in ``orbit-system``
(:data:`orbit_store.fencing.SYSTEM_NAMESPACE`) is the database's administrator: it fences dispatch
after a restore and reopens it (orbit/api/routes/admin.py). So declaring anything there through
manifests is not for whoever happens to be able to create a Kubernetes namespace of that name:

- **the operator** reconciles resources in ``orbit-system`` only when it runs in that Kubernetes
  namespace itself (the chart installs it in its release namespace; ``orbit-system`` is the
  documented one), where only the cluster's Orbit administrators can create objects. Anywhere
  else it refuses them (Ready=False, InvalidSpec naming ``metadata.namespace``) and deleting one
  never touches the system namespace's rows;
- **`orbit apply`** refuses them unless ``--allow-system-namespace`` says this folder is meant
  for it;
- ``orbit admin token create -n orbit-system`` (direct database access) stays the way to make a
  system admin token without a cluster.
"""

from __future__ import annotations

from orbit_store.fencing import SYSTEM_NAMESPACE

from .resource import InvalidSpec

FIELD = "metadata.namespace"


def refusal(namespace: str, *, trusted: bool, how: str) -> InvalidSpec | None:
    """Why a resource in ``namespace`` may not be declared (``how`` says what would allow it),
    or None."""
    if namespace != SYSTEM_NAMESPACE or trusted:
        return None
    return InvalidSpec(
        FIELD,
        f"{SYSTEM_NAMESPACE!r} is Orbit's reserved system namespace (its admins fence and "
        f"reopen dispatch for the whole database); {how}",
    )


#: What the operator says when it runs elsewhere.
OPERATOR_HOW = (
    f"this operator declares resources there only when it runs in namespace {SYSTEM_NAMESPACE!r} "
    "itself; use another namespace, or `orbit admin token create -n orbit-system` for a system "
    "admin token"
)
#: What `orbit apply` says.
APPLY_HOW = "pass --allow-system-namespace if these manifests are meant for it"
