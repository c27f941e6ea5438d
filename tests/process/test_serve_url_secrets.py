"""`notifyd serve` on a PostgreSQL URL that holds its password (user:password@, or ?password=):
the start line names the database, and nothing the daemon writes shows the password."""

from __future__ import annotations

import sys
from pathlib import Path

import pg_support
import pytest
from engine_support import Daemon

SECRET = "Pw-9f3kq7"


@pytest.mark.skipif(pg_support.SERVER == "off", reason="no PostgreSQL for this run")
def test_the_start_line_names_the_database_without_its_password(tmp_path: Path) -> None:
    url = pg_support.migrated_url(tmp_path)
    user, rest = url.split("@", 1)
    for given in (f"{user}:{SECRET}@{rest}", f"{url}&password={SECRET}"):
        d = Daemon(tmp_path / "n.db", argv=[sys.executable, "-m", "notifyd", "--db", given,
                                            "serve", "--port", "0"])
        assert d.stop() == 0
        start = next(line for line in d.lines if "listening on" in line)
        assert "database postgresql://root" in start, start
        assert SECRET not in d.stderr()
