"""Once an erasure has answered, nothing of the person is left in the SQLite database's files:
not in the tables, and not in the bytes either (deleted and overwritten content zeroed by
secure_delete, the WAL's older page images checkpointed and truncated away). The files are read
while the store is still open, as a daemon that answered DELETE /v1/users/{id} holds them."""

from __future__ import annotations

from pathlib import Path

from store_support import NOW, RULES, claim, fresh_sqlite, opened, plan

from notifyd.core.clock import FakeClock
from notifyd.core.events import Audience, EventInput, KindRoute
from notifyd.core.models import (
    AcceptInput,
    Completion,
    Device,
    Evidence,
    Freeze,
    Outcome,
    Receipt,
    Recipient,
    StepState,
)
from notifyd.core.records import InboxEntry

EMAIL, PHONE = "grace.hopper.7731@erased.example", "+14155559731"


def traces(db: Path) -> list[str]:
    """Which of the person's addresses the database's files hold, and where."""
    found = []
    for f in (db, db.with_name(db.name + "-wal")):
        data = f.read_bytes() if f.exists() else b""
        found += [f"{a} in {f.name}" for a in (EMAIL, PHONE, EMAIL.upper())
                  if a.encode() in data]
    return found


async def test_after_an_erasure_no_byte_of_the_person_is_left_in_the_files(
        tmp_path: Path) -> None:
    url = fresh_sqlite(tmp_path, "bytes.db")
    db = Path(url.removeprefix("sqlite:///"))
    said = {"who": EMAIL, "call": PHONE}
    async with opened(url, FakeClock(NOW)) as store:
        await store.put_recipient(Recipient("acme", "u1", contacts={"email": EMAIL,
                                                                    "phone": PHONE}))
        await store.put_recipient(Recipient("acme", "u2", contacts={"email": "u2@x.example"}))
        await store.put_device("acme", "u1", Device("d_a", "fcm", "token-a"))
        for i in range(40):  # enough rows for pages to be freed and rewritten
            inp = AcceptInput("acme", "u1", "k", {**said, "i": i}, f"d{i}", None, None, "h",
                              "key")
            await store.accept(inp, f"n_{i:03d}", plan("a"), 3600,
                               InboxEntry(f"for {EMAIL}", f"call {PHONE}"))
        for c in await claim(store, n=20):
            assert await store.freeze([Freeze(c, EMAIL, f'{{"to": "{EMAIL}"}}', None)]) == [True]
            await store.complete(c, Completion(Outcome.SENT, StepState.SENT,
                                               provider_ref=f"p{c.notification_id}"), RULES)
        await store.record_receipts([
            Receipt("resend", "r1", Evidence.DELIVERED, None, key="n_000:0", address=EMAIL),
            Receipt("resend", "r2", Evidence.BOUNCED, None, provider_ref="gone", address=EMAIL)],
            RULES)
        assert await store.suppress("acme", "email", EMAIL, "bounced", "test")
        assert await store.suppress("acme", "sms", PHONE, "stop", "twilio")
        await store.put_topic("acme", "t")
        await store.change_members("acme", "t", ("u1", "u2"), ())
        await store.accept_event(EventInput("acme", "e1", "news", ("k",), Audience.USERS, said,
                                            f"user:{EMAIL}", "h1", "key", None, ("u2",)))
        route = KindRoute(plan("a"), 3600, lambda u, n, loc: InboxEntry(f"{EMAIL} joined", None))
        assert (await store.route_chunk("acme", "e1", {"k": route}, 10)).done
        assert traces(db)  # the test sees them while they are there

        await store.erase_user("acme", "u1", "cli")
        assert traces(db) == []
        # ... and the person's id is out of the topic's rows (it stays where it is the key of
        # what is kept: the notifications' identities, the erasure's time).
        assert [m.user_id for m in await store.topic_members("acme", "t", "", 10)] == ["u2"]
