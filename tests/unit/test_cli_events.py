"""Events from the command line: `inspect --event` lists an event's recipients and each ladder,
`events show` prints its document, and with --follow waits until it is routed."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from click.testing import CliRunner, Result
from store_support import plan

from notifyd.cli import main
from notifyd.core.clock import SystemClock
from notifyd.core.events import Audience, EventInput, KindRoute
from notifyd.store import open_store


def run(db: Path, *args: str) -> Result:
    return CliRunner().invoke(main, list(args), env={"NOTIFYD_DB": str(db),
                                                     "NOTIFYD_CONFIG": None})


async def seed(db: Path, route: bool) -> None:
    """Events to a list of three, routed (or not) by the store as the fan-out routes it:
    launch-1, and (routed) launch:1."""
    store = await open_store(str(db), SystemClock())
    try:
        for event_id, routed in (("launch-1", route), ("launch:1", True)):
            e = EventInput("acme", event_id, "launch", ("demo",), Audience.USERS, {"v": 2},
                           "release:2", "h", "key", None, ("ada", "bo", "cy"))
            await store.accept_event(e)
            while routed and not (await store.route_chunk(
                    "acme", event_id, {"demo": KindRoute(plan("log", "log"), 3600)}, 2)).done:
                pass
    finally:
        await store.close()


def test_inspect_event_lists_each_recipient_with_its_ladder(tmp_path: Path) -> None:
    db = tmp_path / "n.db"
    asyncio.run(seed(db, route=True))
    shown = run(db, "inspect", "--event", "launch-1", "--tenant", "acme")
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert lines[0] == "event launch-1  tenant=acme type=launch subject=release:2"
    assert "a list of users: 3 recipients, 3 routed (cursor cy)" in lines[1]
    assert "notifications: 3 pending" in lines[3]
    assert [ln.split("  ")[:2] for ln in lines[4:]] == [["ada", "demo"], ["bo", "demo"],
                                                        ["cy", "demo"]]
    assert all(ln.endswith("log_pending  0 log pending; 1 log pending") for ln in lines[4:])
    missing = run(db, "inspect", "--event", "launch-1")
    assert missing.exit_code == 1 and "no event 'launch-1' in tenant 'default'" in missing.output
    assert run(db, "inspect").exit_code == 2
    assert run(db, "inspect", "n_x", "--event", "launch-1").exit_code == 2


def test_inspect_an_event_id_lists_its_recipients_as_the_support_lookup_asks(
        tmp_path: Path) -> None:
    """`notifyd inspect ID` as support types it: not a notification, so the event of that id
    in --tenant, printed as --event prints it; a clear refusal when nothing matches."""
    db = tmp_path / "n.db"
    asyncio.run(seed(db, route=True))
    for ref in ("launch-1", "launch:1"):  # an event id may look like user_id:dedup_key
        shown = run(db, "inspect", ref, "--tenant", "acme")
        assert shown.exit_code == 0, shown.output
        assert shown.output == run(db, "inspect", "--event", ref, "--tenant", "acme").output
        lines = shown.output.splitlines()
        assert lines[0] == f"event {ref}  tenant=acme type=launch subject=release:2"
        assert [ln.split("  ")[0] for ln in lines[4:]] == ["ada", "bo", "cy"]
    missing = run(db, "inspect", "launch-1")
    assert missing.exit_code == 1
    assert ("no notification or event 'launch-1' in tenant 'default' (--tenant); REF is a "
            "notification id (n_ and 18 letters or digits), user_id:dedup_key, or an event's "
            "id") in missing.output
    by_id = run(db, "inspect", "n_0000000000000000zz")
    assert by_id.exit_code == 1 and ("no notification 'n_0000000000000000zz', and no event of "
                                     "that id in tenant 'default' (--tenant)") in by_id.output
    typo = run(db, "inspect", "launch-1", "--tenant", "acme-typo")
    assert typo.exit_code == 1 and "no tenant 'acme-typo'" in typo.output
    as_json = run(db, "inspect", "launch-1", "--tenant", "acme", "--json")
    assert as_json.exit_code == 2 and "notifyd events show ID" in as_json.output


def test_events_show_prints_the_document_and_follows_until_routed(tmp_path: Path) -> None:
    db = tmp_path / "n.db"
    asyncio.run(seed(db, route=False))
    shown = run(db, "events", "show", "launch-1", "--tenant", "acme")
    assert shown.exit_code == 0, shown.output
    doc = json.loads(shown.output)
    assert (doc["state"], doc["routed"], doc["audience_size"], doc["audience"]) == (
        "routing", 0, 3, {"kind": "user_ids"})

    async def follow_while_routing() -> Result:
        """--follow in a thread while the store routes a chunk at a time beside it."""
        following = asyncio.create_task(asyncio.to_thread(
            run, db, "events", "show", "launch-1", "--tenant", "acme", "--follow"))
        store = await open_store(str(db), SystemClock())
        try:
            while not (await store.route_chunk(
                    "acme", "launch-1", {"demo": KindRoute(plan("log"), 3600)}, 1)).done:
                await asyncio.sleep(0.05)
        finally:
            await store.close()
        return await following

    followed = asyncio.run(follow_while_routing())
    assert followed.exit_code == 0, followed.output
    doc = json.loads(followed.output[followed.output.index("{"):])
    assert (doc["state"], doc["routed"]) == ("routed", 3)
    assert doc["notifications"]["pending"] == 3
