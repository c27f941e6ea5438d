"""Documented settings fields: every config key has a default and a one-line doc.

Config tables (config.py) and each channel type's own settings (channels/*.py) declare their keys
with these, so that validation, `notifyd init` and notifyd.example.toml read one source.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

MAX_SEC = 365 * 86400  # bound on every duration: a year


def doc(text: str, default: Any) -> Any:
    """A field with a default and the one-line doc that the example config prints above it."""
    return field(default=default, metadata={"doc": text})


def docf(text: str, factory: Any) -> Any:
    return field(default_factory=factory, metadata={"doc": text})



def sensitive(text: str, default: str = "") -> Any:
    """A documented field that holds a secret: never in the settings' repr, so a config printed
    in a log line, an error or a traceback does not show it."""
    return field(default=default, repr=False, metadata={"doc": text, "secret": True})
