"""The SQLite dialect: its statements (queries.py), migrations and committed schema, the
lifecycle of one WAL-mode file (backend.py), its group-commit writer and its lock file."""

from notifyd.store.sqlite.migrate import migrate, migrations, schema_sql

__all__ = ["migrate", "migrations", "schema_sql"]
