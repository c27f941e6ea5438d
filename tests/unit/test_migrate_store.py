"""`notifyd migrate-store`: a SQLite file copied whole into an empty PostgreSQL database, every
table counted and checksummed, the file untouched; the copy is a working store (sequences past
the copied seqs, steps in flight counted) and a second copy into it is refused."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pg_support
from click.testing import CliRunner
from store_support import NOW, accept, claim, opened

from notifyd.cli import main
from notifyd.core.clock import FakeClock
from notifyd.core.records import InboxEntry


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def test_a_sqlite_file_moves_to_postgresql_whole(tmp_path: Path) -> None:
    db, clock = tmp_path / "n.db", FakeClock(NOW)
    async with opened(f"sqlite:///{db}", clock) as s:
        for i in range(30):
            await accept(s, f"n_{i:02d}", "a", "a", user=f"u{i % 3}", gap=0,
                         inbox=InboxEntry("t", "b"))
        await s.put_topic("acme", "news", True)
        await s.signing_key("links")
        assert len(await claim(s, n=5)) == 5  # five in flight: their siblings wait
        await s.replay("n_29", None)  # an event row
        before = await s.get_notification("n_03")
        key = await s.find_signing_key("suppressions")  # its hashes are under this one
    source = _digest(db)
    url = pg_support.fresh_url()

    out = CliRunner().invoke(main, ["migrate-store", "--from", f"sqlite:///{db}", "--to", url])
    assert out.exit_code == 0, out.output
    assert "notifications           30 rows" in out.output and f'url = "{url}"' in out.output
    assert _digest(db) == source  # the file as it was

    async with opened(url, clock) as pg:
        assert await pg.get_notification("n_03") == before
        assert await pg.find_signing_key("suppressions") == key
        assert (await pg.get_topic("acme", "news")).self_service is True
        seqs = [i.seq for i in await pg.inbox_since("acme", "u1", 0, 100)]
        assert len(seqs) == 10
        await accept(pg, "n_new", "a", user="u1", inbox=InboxEntry("t", "b"))
        assert (await pg.inbox_since("acme", "u1", max(seqs), 10))[0].notification_id == "n_new"
        clock.ms += 2_000  # the siblings postponed behind the five are due again
        claimed = {c.notification_id for c in await claim(pg, n=100)}
        assert claimed and not claimed & {f"n_{i:02d}" for i in range(5)}  # one at a time

    again = CliRunner().invoke(main, ["migrate-store", "--from", f"sqlite:///{db}", "--to", url])
    assert again.exit_code == 1 and "already holds" in again.output
