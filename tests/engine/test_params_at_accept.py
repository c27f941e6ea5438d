"""Params checked at accept for every kind, over the real engine and templates: a request whose
params a template of its ladder cannot render is a 422 naming the variable and the template
(in the recipient's locale), nothing written; a step that still fails at the send names the
variable in its reason."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from stack_support import TEMPLATES, Stack, stack

from notifyd.engine import paramcheck

SETTINGS: dict[str, Any] = {
    "kinds": {
        "alert": {"allow_override": True, "ladder": [{"channel": "sms", "timeout_sec": 60},
                                                     {"channel": "email"}]},
        "branchy": {"ladder": [{"channel": "sms"}]},
    },
}
BRANCHY = {"sms.text.j2": "{{ what }}{% if n > 1 %} and {{ more }}{% endif %}"}
GERMAN = {"sms.text.j2": "{{ was }}", "email.subject.j2": "Über {{ was }}",
          "email.text.j2": "{{ was }}"}


@asynccontextmanager
async def checking(tmp_path: Path) -> AsyncIterator[Stack]:
    german = tmp_path / "templates" / "alert" / "de"
    german.mkdir(parents=True)
    for name, text in GERMAN.items():
        (german / name).write_text(text)
    async with stack(tmp_path, SETTINGS, {"alert": TEMPLATES, "branchy": BRANCHY}) as s:
        await s.user("ada")
        yield s


def auth(s: Stack) -> dict[str, str]:
    return {"Authorization": f"Bearer {s.key}"}


async def post(s: Stack, params: dict[str, Any], user: str = "ada", kind: str = "alert",
               **more: Any) -> tuple[int, dict[str, Any]]:
    r = await s.client.post("/v1/notifications", headers=auth(s), json={
        "user_id": user, "kind": kind, "params": params, **more})
    return r.status, await r.json()


async def test_params_a_template_cannot_render_are_a_422_naming_the_variable(
        tmp_path: Path) -> None:
    async with checking(tmp_path) as s:
        status, body = await post(s, {})
        assert (status, body["error"]["code"], body["error"]["field"]) == (
            422, "invalid_field", "params")
        assert body["error"]["message"] == ("params: the template alert/en/sms.text.j2 cannot "
                                            "render them (UndefinedError: 'what' is undefined)")
        assert await s.e.state_counts() == {}  # nothing was written
        assert (await post(s, {"what": "disk full"}))[0] == 202


async def test_a_fallback_chain_is_checked_by_its_own_channels(tmp_path: Path) -> None:
    async with checking(tmp_path) as s:
        status, _ = await post(s, {}, fallback_chain=[{"channel": "log"}])
        assert status == 202  # a ladder of the log channel renders no template
        status, body = await post(s, {}, fallback_chain=[{"channel": "email"}])
        assert status == 422 and "alert/en/email.subject.j2" in body["error"]["message"]


async def test_the_recipients_locale_decides_which_templates_are_checked(
        tmp_path: Path) -> None:
    async with checking(tmp_path) as s:
        r = await s.client.patch("/v1/users/ada", headers=auth(s), json={"locale": "de-AT"})
        assert r.status == 200
        status, body = await post(s, {"what": "x"})
        assert status == 422 and body["error"]["message"].startswith(
            "params: the template alert/de/sms.text.j2 cannot render them (UndefinedError: "
            "'was' is undefined")
        assert (await post(s, {"was": "x"}))[0] == 202
        assert (await post(s, {"what": "x"}, user="bob"))[0] == 202  # no profile: the default


async def test_a_batch_refuses_such_an_item_in_its_place(tmp_path: Path) -> None:
    async with checking(tmp_path) as s:
        r = await s.client.post("/v1/notifications/batch", headers=auth(s), json={"items": [
            {"user_id": "bob", "kind": "alert", "params": {"what": "a"}},
            {"user_id": "bob", "kind": "alert", "params": {"other": "b"}}]})
        results = (await r.json())["results"]
        assert [x["status"] for x in results] == [202, 422]
        assert "'what' is undefined" in results[1]["error"]["message"]


async def test_a_step_that_still_cannot_render_names_the_variable(tmp_path: Path) -> None:
    """A branch on a value is what the check, remembering shapes that rendered, can miss."""
    async with checking(tmp_path) as s:
        assert (await post(s, {"what": "x", "n": 1}, kind="branchy"))[0] == 202
        status, body = await post(s, {"what": "y", "n": 2}, kind="branchy")  # the same shape
        assert status == 202
        await s.e.run_dry()
        doc = await s.status(body["notification_id"])
        assert doc["steps"][0]["status"] == "dead"
        assert doc["steps"][0]["reason"] == ("render failed: branchy/en/sms.text.j2: "
                                             "UndefinedError: 'more' is undefined")
        assert (await post(s, {"what": "z", "n": 2.5}, kind="branchy"))[0] == 422  # new shape


async def test_the_shapes_remembered_are_bounded(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(paramcheck, "PASSED_MAX", 3)
    async with checking(tmp_path) as s:
        for i in range(10):
            assert (await post(s, {"what": "x", f"extra{i}": i}))[0] == 202
        assert len(s.e.ingest.params._passed) == 3
