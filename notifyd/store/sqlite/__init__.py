"""The SQLite dialect: its statements (queries.py), migrations and committed schema (migrate.py),
the lifecycle of one WAL-mode file (backend.py), its group-commit writer, its lock file and its
settings. Nothing is imported here: open_store imports the backend when a URL names SQLite."""
