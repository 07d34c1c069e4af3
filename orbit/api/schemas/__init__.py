"""The HTTP API's request and response bodies (``/v1``): the wire contract the SDK
(``orbit_sdk``) mirrors; extend it, don't break it.

One module per route family (tasks, workers, identity, batches, fencing, results, schedules,
views, workflows); ``base`` holds what they share and ``mirror`` ties a body to the store's view
it shows."""
