"""`notifyd replay --dead`: after an outage ended steps dead, an operator sends them again in bulk,
picked by channel, kind and when they died, counted first with --dry-run. Each keeps its key and
frozen bytes. The engine runs on a fake clock set some hours before the real one, which the CLI
reads for --since and for where the replay stops."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from engine_support import Provider, accepted, answer, body_of, engine, provider, webhook

from notifyd.cli import main
from notifyd.config import KindConfig, LadderStep
from notifyd.core.clock import FakeClock, SystemClock
from notifyd.core.models import REPLAYED
from notifyd.core.text import iso

HOUR = 3600
YEAR = 365 * 86400


async def _cli(db: str, config: Path, *args: str) -> Result:
    """The CLI runs its own asyncio.run, so it runs on a thread beside the test's loop."""
    return await asyncio.to_thread(CliRunner().invoke, main, [
        "--config", str(config), "--db", db, "replay", *args],
        env={"NOTIFYD_DB": None, "NOTIFYD_CONFIG": None})


def _config(path: Path, mail: Provider, sms: Provider) -> Path:
    path.write_text(
        f'[channels.mail]\ntype = "webhook"\nurl = "{mail.url}"\n'
        f'[channels.sms]\ntype = "webhook"\nurl = "{sms.url}"\n'
        '[kinds.alert]\nladder = [{ channel = "mail" }]\n'
        '[kinds.news]\nladder = [{ channel = "mail" }]\n'
        '[kinds.code]\nladder = [{ channel = "sms" }]\n')
    return path


async def test_replay_dead_picks_by_channel_kind_and_time_counts_and_keeps_each_key(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # five steps: three batches, three writes
    monkeypatch.setattr("notifyd.engine.replay.BATCH", 2)
    real = SystemClock().now_ms()
    start = real - 6 * HOUR * 1000
    kinds = {name: KindConfig(ladder=(LadderStep(channel),), ttl_sec=YEAR)
             for name, channel in (("alert", "mail"), ("news", "mail"), ("code", "sms"))}
    kinds["otp"] = KindConfig(ladder=(LadderStep("mail"),), ttl_sec=60)
    async with provider(answer(503, "down")) as mail, provider(answer(503, "down")) as sms:
        channels = {"mail": webhook(mail.url, max_attempts=1),
                    "sms": webhook(sms.url, max_attempts=1)}
        config = _config(tmp_path / "n.toml", mail, sms)
        async with engine(tmp_path, channels, kinds, clock=FakeClock(start)) as e:
            old = [await e.accept("alert") for _ in range(3)]
            news, code = await e.accept("news"), await e.accept("code")
            await e.run_dry()  # six hours ago: all dead after one attempt each
            e.clock.advance(5 * HOUR)  # an hour ago: two more alerts and a code die
            recent = [await e.accept("alert") for _ in range(2)]
            otp = await e.accept("otp")
            await e.run_dry()
            assert await e.state_counts() == {"dead": 8}
            frozen = {nid: (await e.step(nid, 0))["payload"] for nid in e.ids}

            counted = await _cli(e.url, config, "--dead", "--dry-run")
            assert (counted.exit_code, counted.stdout) == (
                0, "8 dead steps match; nothing replayed (--dry-run)\n")
            picked = await _cli(e.url, config, "--dead", "--channel", "mail", "--kind", "alert",
                                "--since", "2h", "--dry-run")
            assert picked.stdout == "2 dead steps match; nothing replayed (--dry-run)\n"
            by_time = await _cli(e.url, config, "--dead", "--channel", "sms", "--since",
                                 iso(start) or "", "--dry-run")
            assert by_time.stdout == "1 dead step matches; nothing replayed (--dry-run)\n"
            none = await _cli(e.url, config, "--dead", "--kind", "code", "--since",
                              iso(start + 1) or "", "--dry-run")
            assert none.stdout == "no dead step matches; nothing replayed (--dry-run)\n"
            assert await e.state_counts() == {"dead": 8}  # a dry run changes nothing

            for wrong, says in ((["--dead", "n_x"], "give REF or --dead, not both"),
                                ([], "give REF or --dead, not both"),
                                (["n_x", "--dry-run"], "go with --dead"),
                                (["--dead", "--since", "yesterday"], "neither an ISO 8601")):
                refused = await _cli(e.url, config, *wrong)
                assert refused.exit_code == 2 and says in refused.stderr, refused.stderr

            done = await _cli(e.url, config, "--dead", "--channel", "mail", "--kind", "alert")
            assert done.exit_code == 0, done.output
            assert done.stdout == ("replayed 5 dead steps; a running daemon sends them at each "
                                   "channel's rate (notifyd inspect shows what happens)\n")
            assert "replaying" in done.stderr  # the progress bar
            for nid in old + recent:
                s = await e.step(nid, 0)
                assert (s["state"], s["reason"]) == ("pending", REPLAYED)
            for nid in (news, code, otp):
                assert (await e.step(nid, 0))["state"] == "dead"

            mail.reply = sms.reply = accepted()
            e.clock.ms = SystemClock().now_ms()  # the CLI dated the replay by the real clock
            await e.run_dry()
            assert await e.state_counts() == {"sent": 5, "dead": 3}
            for nid in old + recent:  # the same key, the same bytes, the second time
                assert mail.bodies_by_key()[f"{nid}:0"] == [body_of(frozen[nid])] * 2

            rest = await _cli(e.url, config, "--dead")
            assert rest.stdout.startswith("replayed 3 dead steps")
            assert ("warning: 1 of them belongs to a notification past its time to live: the "
                    "claim ends it expired, unsent") in rest.stderr
            e.clock.ms = SystemClock().now_ms()
            await e.run_dry()
            assert [(await e.step(n, 0))["state"] for n in (news, code, otp)] == [
                "sent", "sent", "expired"]
            assert mail.keys_seen().count(f"{otp}:0") == 1  # never sent again: its time is up
