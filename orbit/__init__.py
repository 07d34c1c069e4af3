"""Orbit: the server, engine loops and CLI. The store lives in ``orbit_store``, the SDK in
``orbit_sdk``, the operator in ``orbit_operator``."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("orbit")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+source"
