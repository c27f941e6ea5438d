"""`notifyd users delete`: the erasure DELETE /v1/users/{user_id} does, for an operator, with
what it did printed; an unknown tenant is refused."""

from __future__ import annotations

import asyncio
from pathlib import Path

from click.testing import CliRunner, Result

from notifyd.cli import main
from notifyd.core.clock import FakeClock
from notifyd.core.models import Recipient
from notifyd.store import open_store


def run(db: Path, *args: str) -> Result:
    return CliRunner().invoke(main, list(args), env={"NOTIFYD_DB": str(db),
                                                     "NOTIFYD_CONFIG": None})


async def seed(db: Path) -> None:
    store = await open_store(f"sqlite:///{db}", FakeClock(1_790_000_000_000))
    try:
        await store.put_recipient(Recipient("default", "ada", contacts={"email": "a@x.example"}))
        await store.put_preferences("default", "ada", {"opt_out": True})
        await store.suppress("default", "email", "a@x.example", "bounced", "test")
    finally:
        await store.close()


def test_users_delete_erases_and_says_what_it_did(tmp_path: Path) -> None:
    db = tmp_path / "n.db"
    asyncio.run(seed(db))
    typo = run(db, "users", "delete", "ada", "--tenant", "defualt")
    assert typo.exit_code == 1 and "no tenant 'defualt'" in typo.output
    done = run(db, "users", "delete", "ada")
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    assert lines[0].startswith("erased ada of tenant default at ")
    assert lines[1:] == [
        "  removed: profile and contacts, preferences, 0 devices, 0 inbox items, 0 topic "
        "memberships",
        "  cancelled: 0 open notifications (0 steps that had not gone)",
        "  scrubbed: the params of 0 notifications, 0 frozen messages, the addresses of 0 "
        "receipts, their email and phone in 0 events",
        "  suppressions: 1 kept as a one-way hash, 0 left as they were (another person has "
        "the address)",
        "  user tokens made before now are refused"]
    listed = run(db, "suppressions", "list").stdout
    assert "a@x.example" not in listed and "hmac:" in listed
