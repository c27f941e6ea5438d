"""A PostgreSQL URL's password, written as user:password@ or as ?password= (or sslpassword=), is
never shown: not in an error (a server that cannot be reached, a URL the driver cannot read and
quotes), not in what a command that writes prints, not in what migrate-store tells to set."""

from __future__ import annotations

from pathlib import Path

import pg_support
import pytest
from click.testing import CliRunner

from notifyd.cli import main
from notifyd.core.clock import FakeClock
from notifyd.core.text import redact_in, redact_url, url_secrets
from notifyd.store import StoreUnavailable, open_store

SECRET, OTHER = "Pw-9f3kq7", "Qw-2m8zt4"
needs_pg = pytest.mark.skipif(pg_support.SERVER == "off", reason="no PostgreSQL for this run")


def with_passwords(url: str) -> list[str]:
    """`url` (postgresql://user@host/db?options=...) with a password in each of its forms."""
    user, rest = url.split("@", 1)
    return [f"{user}:{SECRET}@{rest}", f"{url}&password={SECRET}",
            f"{user}:{SECRET}@{rest}&sslpassword={OTHER}"]


def test_the_url_is_shown_without_its_secrets() -> None:
    url = f"postgresql://n:{SECRET}%40x@db:5432/n?sslmode=require&password={OTHER}&sslpassword=z9"
    assert redact_url(url) == ("postgresql://n:***@db:5432/n?sslmode=require&password=***"
                               "&sslpassword=***")
    assert set(url_secrets(url)) == {f"{SECRET}%40x", f"{SECRET}@x", OTHER, "z9"}
    assert redact_in(f'invalid percent-encoded token: "{SECRET}%40x" {OTHER}', url) == \
        'invalid percent-encoded token: "***" ***'
    for plain in ("postgresql://n@db/n?sslmode=require", "sqlite:////var/n.db", "n.db"):
        assert redact_url(plain) == plain and url_secrets(plain) == []


UNREACHABLE = [
    f"postgresql://n:{SECRET}@127.0.0.1:1/n",  # nothing listens on port 1
    f"postgresql://n@127.0.0.1:1/n?password={SECRET}",
    f"postgresql://n:{SECRET}%zz@127.0.0.1:1/n",  # the driver refuses it, quoting the password
    f"postgresql://n@127.0.0.1:1/n?password={SECRET}&bogus=1",
]


@pytest.mark.parametrize("url", UNREACHABLE)
async def test_a_failed_connection_does_not_show_the_password(url: str) -> None:
    with pytest.raises(StoreUnavailable) as failed:
        await open_store(url, FakeClock(0))
    assert SECRET not in str(failed.value) and "127.0.0.1" in str(failed.value)


@pytest.mark.parametrize("url", UNREACHABLE)
def test_a_command_that_cannot_connect_does_not_show_the_password(url: str) -> None:
    out = CliRunner().invoke(main, ["--db", url, "tenants", "create", "acme"])
    assert out.exit_code == 1 and "cannot connect" in out.output, out.output
    assert SECRET not in out.output


@needs_pg
def test_a_command_that_writes_names_the_database_without_its_password(tmp_path: Path) -> None:
    for url in with_passwords(pg_support.migrated_url(tmp_path)):
        out = CliRunner().invoke(main, ["--db", url, "tenants", "create", f"t{len(url)}"])
        assert out.exit_code == 0, out.output
        assert "(database postgresql://root" in out.output
        assert SECRET not in out.output and OTHER not in out.output


@needs_pg
def test_migrate_store_does_not_print_the_password(tmp_path: Path) -> None:
    db = tmp_path / "n.db"
    assert CliRunner().invoke(main, ["--db", str(db), "tenants", "create", "acme"]).exit_code == 0
    for url in with_passwords(pg_support.fresh_url())[:2]:
        out = CliRunner().invoke(main, ["migrate-store", "--from", f"sqlite:///{db}", "--to", url])
        assert out.exit_code == 0, out.output
        assert 'url = "postgresql://root' in out.output and "the password you gave" in out.output
        assert SECRET not in out.output
