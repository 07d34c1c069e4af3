"""The SDK's HTTP wire: the transport that sends a request (retries, problems as typed errors)
and the builders of each request the client and the worker make."""
