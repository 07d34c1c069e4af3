"""The commands that call a server through the SDK: ``orbit task``, ``workflow``, ``schedule``,
``subscription`` and ``outbox relay``, with how tasks and their progress are shown. The settings
they share with every command (server, token, namespace, contexts) are in ``orbit.cli.remote``.
"""
