"""What the rules refuse, and a config that cannot be used: errors that know nothing of HTTP."""

from __future__ import annotations


class DomainError(Exception):
    """A request the rules refuse: a stable code (http/errors.CATALOG gives its status), a
    message naming what was wrong, and the field it was in."""

    def __init__(self, code: str, message: str, field: str | None = None) -> None:
        self.code = code
        self.message = message
        self.field = field
        super().__init__(f"{code}: {message}")


class ConfigError(Exception):
    """Invalid configuration; the message names the key."""


class OverQuota(DomainError):
    """A refusal that passes with time (a quota, a share): when to try again, whole seconds."""

    def __init__(self, code: str, message: str, retry_after_sec: int,
                 field: str | None = None) -> None:
        super().__init__(code, message, field)
        self.retry_after_sec = max(1, retry_after_sec)
