"""The `notifyd` command: thin click commands over the same store the daemon uses, one module per
family (base.py holds what they share and the group they join)."""

from notifyd.cli import (
    events,
    keys,
    live,
    migrate,
    notifications,
    serve,
    storage,
    suppressions,
    templates,
    tenants,
    users,
)
from notifyd.cli.base import main

__all__ = ["events", "keys", "live", "main", "migrate", "notifications", "serve", "storage",
           "suppressions", "templates", "tenants", "users"]
