"""The namespace-locality check: every store transaction touches one namespace (``watch``),
judged from the SQL itself (``shapes``), over the store and API suites (``plugin``)."""
