"""The HTTP routes, one module per resource family (``/v1``): each parses its request, calls
the store's engine-level functions (``orbit_store``) and answers with ``orbit.api.schemas``
bodies or an RFC 9457 problem. ``orbit.api.app`` mounts them all.
"""
