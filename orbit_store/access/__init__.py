"""Who may do what: API credentials (namespace-scoped tokens with roles) and the grants of the
application's own database user."""
