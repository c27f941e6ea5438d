"""The names a person reads for kinds and categories (core/names.py) as the running generation
has them: the templates folder's names files, read again at a reload. Without a templates
folder every name is its identifier made readable."""

from __future__ import annotations

from notifyd.core.names import Names
from notifyd.http.kit import Context


def names_of(ctx: Context) -> Names:
    templates = ctx.ingest.templates
    if templates is not None:
        return templates.names
    return Names(default_locale=ctx.cfg.templates.default_locale)
