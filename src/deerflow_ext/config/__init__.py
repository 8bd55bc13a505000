"""Configuration: ``config.yaml`` (operator-edited, startup-only) and ``DEERFLOW_*`` settings."""
