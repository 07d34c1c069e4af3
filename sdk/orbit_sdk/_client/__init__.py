"""Parts of ``Client`` and ``AsyncClient`` kept out of client.py: the bulk and schedule method
groups (mixins) and the coalescer that sends concurrent submissions together."""
