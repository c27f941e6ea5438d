"""The Python client against the real daemon in a subprocess, sync and async: every call it
makes answers as the API says, a refusal is one NotifydError with the API's code, message and
field, a user token (minted, or signed with the tenant's key) reads that user's own inbox and
preferences; and `notifyd send` and `notifyd tail` work an operator's loop: post a test
notification, follow its decisions as they happen. Every wait has a deadline."""

from __future__ import annotations

import asyncio
import queue
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from engine_support import Daemon, clean_env, create_key, inbox_config, notifyd_cmd
from jsonschema import Draft202012Validator

from notifyd.client import Client, Event, NotifydError, sign_user_token
from notifyd.client.aio import AsyncClient
from notifyd.http.openapi import spec

PING = """
[kinds.ping]
ladder = [{ channel = "log", timeout_sec = 600 }, { channel = "log" }]
"""
TIMEOUT = 30.0
FCM = {"type": "fcm", "token": "fcm-token-of-adas-phone"}


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Daemon, str, Path]]:
    folder = tmp_path_factory.mktemp("client")
    inbox_config(folder, "Note for {{ name }}", PING)
    db = folder / "n.db"
    key = create_key(db, folder / "n.toml")
    d = Daemon(db, folder / "n.toml")
    try:
        yield d, key, folder
    finally:
        assert d.stop() == 0, d.stderr()
        assert "Traceback" not in d.stderr()


def _cli(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(notifyd_cmd(folder / "n.db", *args, config=folder / "n.toml"),
                          capture_output=True, text=True, env=clean_env(), cwd=folder,
                          timeout=60, check=False)


def test_a_producer_posts_resolves_and_keeps_profiles(running: tuple[Daemon, str, Path]) -> None:
    d, key, _ = running
    api = Client(d.url, key)
    first = api.post("ada", "ping", {"n": 1}, dedup_key="p-1")
    assert (first["created"], first["state"]) == (True, "log_pending")
    assert api.post("ada", "ping", {"n": 1}, dedup_key="p-1")["created"] is False
    assert api.status(first["notification_id"])["kind"] == "ping"
    assert api.resolve_key("ada", "p-1", "done")["changed"] is True
    assert api.resolve(first["notification_id"])["resolution"] == "done"  # the first wins
    results = api.post_batch([{"user_id": "bo", "kind": "ping", "dedup_key": "p-2"},
                              {"user_id": "bo", "kind": "nope"}])
    assert [r["status"] for r in results] == [202, 422]
    assert [r["status"] for r in api.resolve_batch([
        {"user_id": "bo", "dedup_key": "p-2"}, {"user_id": "bo", "dedup_key": "p-9"}])] == [
        200, 404]
    shown = api.put_user("ada", email="ada@example.com", telegram_chat_id="4242",
                         timezone="Europe/Paris")
    assert (shown["email"], shown["telegram_chat_id"]) == ("ada@example.com", "4242")
    assert api.get_user("ada")["timezone"] == "Europe/Paris"
    device = api.add_device("ada", FCM)
    assert [x["device_id"] for x in api.devices("ada")] == [device["device_id"]]
    api.remove_device("ada", device["device_id"])
    assert api.devices("ada") == []


def test_a_refusal_is_one_error_with_the_apis_code_message_and_field(
        running: tuple[Daemon, str, Path]) -> None:
    d, key, _ = running
    with pytest.raises(NotifydError) as unknown:
        Client(d.url, key).post("ada", "nope")
    assert (unknown.value.status, unknown.value.code, unknown.value.field) == (
        422, "unknown_kind", "kind")
    assert "nope" in unknown.value.message
    with pytest.raises(NotifydError) as missing:
        Client(d.url, key).get_user("nobody-here")
    assert (missing.value.status, missing.value.code, missing.value.field) == (
        404, "not_found", "user_id")
    with pytest.raises(NotifydError) as unauthorized:
        Client(d.url, "nfy_not-a-key").status("n_1")
    assert (unauthorized.value.status, unauthorized.value.code) == (401, "unauthorized")
    with pytest.raises(NotifydError) as away:
        Client("http://127.0.0.1:9", key, timeout=5).status("n_1")
    assert (away.value.status, away.value.code) == (None, "unreachable")


def test_a_person_reads_their_inbox_with_a_user_token_minted_or_signed(
        running: tuple[Daemon, str, Path]) -> None:
    d, key, folder = running
    api = Client(d.url, key)
    for n in range(3):
        api.post("cy", "note", {"name": f"Cy {n}"})
    minted = Client(d.url, api.user_token("cy", ttl_sec=600)["token"])
    page = minted.inbox("cy", limit=2)
    assert [i["title"] for i in page["items"]] == ["Note for Cy 2", "Note for Cy 1"]
    assert page["next"] is not None
    assert [i["title"] for i in minted.inbox("cy", before=page["next"])["items"]] == [
        "Note for Cy 0"]
    assert minted.badge("cy") == 3
    newest = page["items"][0]["id"]
    assert minted.read("cy", newest)["unread"] == 2
    assert minted.archive("cy", newest)["archived"] is True
    assert minted.read_all("cy")["unread"] == 0
    secret = _cli(folder, "tokens", "secret").stdout.strip()
    own = Client(d.url, sign_user_token(secret, "default", "cy", ttl_sec=600))
    prefs = own.set_preferences("cy", categories={"note": {"email": False}})
    assert prefs["categories"]["note"]["email"] is False
    assert own.preferences("cy")["version"] == prefs["version"]
    assert own.names("cy")["categories"]["note"]["title"]  # a name a page shows, never empty
    with pytest.raises(NotifydError) as other:
        own.inbox("ada")
    assert other.value.code == "wrong_user"


def _follow(api: Client, **picks: str) -> tuple[queue.Queue[Event], threading.Thread]:
    """The decisions stream read on a thread into a queue; the caller waits for "open"."""
    events: queue.Queue[Event] = queue.Queue()

    def read() -> None:
        for event in api.decisions(**picks):
            events.put(event)
            if event.name == "decision" and event.data["decision"] == "sent":
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return events, reader


def _until_sent(events: queue.Queue[Event]) -> list[dict[str, Any]]:
    seen = []
    while not seen or seen[-1]["decision"] != "sent":
        event = events.get(timeout=TIMEOUT)
        if event.name == "decision":
            seen.append(event.data)
    return seen


def test_the_decisions_of_one_user_as_they_happen(running: tuple[Daemon, str, Path]) -> None:
    d, key, _ = running
    api = Client(d.url, key)
    events, reader = _follow(api, user_id="dee", kind="note")
    assert events.get(timeout=TIMEOUT) == Event("open", {"kind": "note", "channel": None,
                                                         "user_id": "dee"})
    api.post("eve", "note", {"name": "Eve"})  # another user's: not this stream's
    nid = api.post("dee", "note", {"name": "Dee"})["notification_id"]
    seen = _until_sent(events)
    reader.join(TIMEOUT)
    assert [(s["decision"], s["notification_id"], s["step_no"]) for s in seen] == [
        ("accepted", nid, None), ("sending", nid, 0), ("sent", nid, 0)]
    assert {(s["kind"], s["user_id"]) for s in seen} == {("note", "dee")}
    doc = spec()
    schema = {"components": doc["components"], "$ref": "#/components/schemas/Decision"}
    for s in seen:  # what the stream says is what the document says it says
        Draft202012Validator(schema).validate(s)


async def test_the_async_client_makes_the_same_calls(running: tuple[Daemon, str, Path]) -> None:
    d, key, _ = running
    async with AsyncClient(d.url, key) as api:
        stream = api.decisions(user_id="fay")
        assert (await anext(stream)).name == "open"
        accepted = await api.post("fay", "note", {"name": "Fay"}, dedup_key="f-1")
        decided = [e.data["decision"] async for e in _first(stream, 3)]
        assert decided == ["accepted", "sending", "sent"]
        assert (await api.status(accepted["notification_id"]))["current_state"] == "sent"
        assert [r["status"] for r in await api.post_batch([
            {"user_id": "fay", "kind": "ping", "dedup_key": "f-2"}])] == [202]
        assert (await api.resolve_key("fay", "f-2"))["changed"] is True
        assert [r["status"] for r in await api.resolve_batch([
            {"user_id": "fay", "dedup_key": "f-2"}])] == [200]
        assert (await api.resolve(accepted["notification_id"], "read"))["changed"] is True
        assert (await api.put_user("fay", phone="+14155550100"))["phone"] == "+14155550100"
        assert (await api.get_user("fay"))["phone"] == "+14155550100"
        device = await api.add_device("fay", FCM)
        assert len(await api.devices("fay")) == 1
        await api.remove_device("fay", device["device_id"])
        token = (await api.user_token("fay"))["token"]
        assert (await api.set_preferences("fay", opt_out=True))["opt_out"] is True
    async with AsyncClient(d.url, token) as own:
        assert (await own.preferences("fay"))["opt_out"] is True
        [item] = (await own.inbox("fay"))["items"]
        assert await own.badge("fay") == 1
        assert (await own.read("fay", item["id"]))["unread"] == 0
        assert (await own.archive("fay", item["id"]))["archived"] is True
        assert (await own.read_all("fay"))["unread"] == 0
        with pytest.raises(NotifydError) as refused:
            await own.status(accepted["notification_id"])  # a user token is no API key
        assert (refused.value.status, refused.value.code) == (401, "unauthorized")


async def _first(stream: Any, n: int) -> Any:
    """The first `n` decision events of a stream, within the deadline each."""
    for _ in range(n):
        while (event := await asyncio.wait_for(anext(stream), TIMEOUT)).name != "decision":
            pass
        yield event


def test_every_call_the_client_makes_is_in_the_openapi_document() -> None:
    """The client and the document agree: each method's path and verb is an operation."""
    from notifyd.client import calls

    made = [calls.post("u", "k", None, {}), calls.post_batch([]), calls.status("n"),
            calls.resolve("n", None), calls.resolve_key("u", "d", None), calls.resolve_batch([]),
            calls.put_user("u", {}), calls.get_user("u"), calls.add_device("u", {}),
            calls.devices("u"), calls.remove_device("u", "d"), calls.user_token("u", None),
            calls.preferences("u"), calls.names("u"), calls.set_preferences("u", None, None),
            calls.inbox("u", None, None, False), calls.badge("u"), calls.read("u", "i"),
            calls.read_all("u"), calls.archive("u", "i"), calls.inbox_events("u"),
            calls.decisions(None, None, None)]
    paths = spec()["paths"]
    templates = {(method, path) for path, ops in paths.items() for method in ops}
    for call in made:
        assert any(method == call.method.lower() and _matches(path, call.path)
                   for method, path in templates), (call.method, call.path)


def _matches(template: str, path: str) -> bool:
    t, p = template.split("/"), path.split("/")
    return len(t) == len(p) and all(a == b or a.startswith("{") for a, b in zip(t, p,
                                                                                  strict=True))


def test_send_and_tail_work_an_operators_loop(running: tuple[Daemon, str, Path]) -> None:
    d, key, folder = running
    tail = subprocess.Popen(
        notifyd_cmd(folder / "n.db", "tail", "--user", "gus", "--count", "3", "--url", d.url,
                    config=folder / "n.toml"),
        env=clean_env(NOTIFYD_KEY=key), cwd=folder, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        assert tail.stderr is not None
        assert tail.stderr.readline().startswith(f"(following the decisions at {d.url}")
        sent = _cli(folder, "send", "note", "gus", "--param", "name=Gus", "--dedup-key", "g-1",
                    "--key", key, "--url", d.url)
        assert sent.returncode == 0, sent.stderr
        nid, said = sent.stdout.split(" ", 1)
        assert said == "accepted; state log_pending\n"
        out, err = tail.communicate(timeout=TIMEOUT)
    finally:
        if tail.poll() is None:
            tail.kill()
    assert tail.returncode == 0, err
    lines = out.splitlines()
    assert [line.split(" ", 2)[1] for line in lines] == ["accepted:", "sending:", "sent:"]
    assert lines[2].endswith(f"sent: {nid}:0 channel=log kind=note user=gus")
    again = _cli(folder, "send", "note", "gus", "-p", "name=Gus", "--dedup-key", "g-1",
                 "--key", key, "--url", d.url)
    assert again.stdout == f"{nid} already accepted (the same dedup key); state sent\n"
    wrong = _cli(folder, "send", "nope", "gus", "--key", key, "--url", d.url)
    assert wrong.returncode == 1 and "Error: unknown_kind: unknown kind 'nope'" in wrong.stderr
    keyless = _cli(folder, "send", "note", "gus", "--url", d.url)
    assert keyless.returncode == 1 and "an API key is needed" in keyless.stderr
    bad = _cli(folder, "send", "note", "gus", "-p", "name", "--key", key, "--url", d.url)
    assert bad.returncode == 2 and "'name' is not NAME=VALUE" in bad.stderr


def test_tail_follows_again_when_the_daemon_restarts(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = inbox_config(tmp_path, "Note", f"\n[server]\nport = {port}\n")
    db = tmp_path / "n.db"
    key = create_key(db, config)
    first = Daemon(db, config, port=None)
    tail = subprocess.Popen(notifyd_cmd(db, "tail", "--count", "1", config=config),
                            env=clean_env(NOTIFYD_KEY=key), cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    second = None
    try:
        assert tail.stderr is not None
        assert tail.stderr.readline().startswith("(following the decisions at http://127.0.0.1")
        assert first.stop() == 0
        assert "ended; following again in 1 s" in tail.stderr.readline()
        second = Daemon(db, config, port=None)
        while "(following the decisions" not in (line := tail.stderr.readline()):
            assert "following again" in line, line  # it waits, then tries once more
        nid = Client(second.url, key).post("hal", "note")["notification_id"]
        out, _ = tail.communicate(timeout=TIMEOUT)
    finally:
        if tail.poll() is None:
            tail.kill()
        if second is not None:
            assert second.stop() == 0
    assert tail.returncode == 0
    assert out.split(" ", 3)[1:3] == ["accepted:", nid]
