"""The host's alembic environment; located through the package path, no alembic.ini needed."""
