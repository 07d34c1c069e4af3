"""Test-only: Kopf connects to the emulated API server (tests/operator/conftest.py sets the URL).

Loaded by path next to ``-m orbit_operator``; the operator's own API client reads $KUBECONFIG."""

from __future__ import annotations

import os
from typing import Any

import kopf


@kopf.on.login()
def login_to_emulator(**_: Any) -> kopf.ConnectionInfo:
    return kopf.ConnectionInfo(
        server=os.environ["ORBIT_TEST_KUBE_URL"], insecure=True, default_namespace="default"
    )
