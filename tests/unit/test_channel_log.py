"""The log channel: ids and parameter names only by default; with a medium, the stand-in for a
channel of that medium, whose templates it renders and whose rendered text it logs on one line.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from notifyd.channels.base import Limits, Message, RenderInput, Sent
from notifyd.channels.log import TYPE, LogSettings
from notifyd.config import Config, load_config
from notifyd.core.errors import ConfigError
from notifyd.engine.render import requirements

CODE = "493817"  # a param's value: a one-time code, say
CONTENT = {"subject": "Your code", "text": f"Hello,\n\nyour code is {CODE}.",
           "html": f"<p>your code is <b>{CODE}</b></p>"}


def _step(content: dict[str, str] | None = None) -> RenderInput:
    return RenderInput("n_1", 0, "log", "login_code", "u_42", {"code": CODE}, 0, 60_000, None,
                       None, content=content or {})


def _sent(settings: LogSettings, step: RenderInput, caplog: pytest.LogCaptureFixture) -> str:
    channel = TYPE.build("log", settings, Limits(timeout_sec=1.0, max_connections=1))
    rendered = channel.render(step)
    with caplog.at_level(logging.INFO, logger="notifyd.channel.log"):
        outcome = asyncio.run(channel.send(Message("n_1:0", rendered.destination,
                                                   rendered.payload)))
    assert outcome == Sent("log:n_1:0")
    [line] = [r.getMessage() for r in caplog.records if r.name == "notifyd.channel.log"]
    return line


def test_without_a_medium_it_logs_ids_and_param_names_never_values(
        caplog: pytest.LogCaptureFixture) -> None:
    assert TYPE.medium_for(LogSettings()) is None
    line = _sent(LogSettings(), _step(), caplog)
    assert line == "log: n_1:0 kind=login_code user=u_42 params=['code']"


def test_with_a_medium_it_logs_the_rendered_text_on_one_line_without_the_html(
        caplog: pytest.LogCaptureFixture) -> None:
    settings = LogSettings(medium="email")
    assert TYPE.medium_for(settings) == "email"
    line = _sent(settings, _step(CONTENT), caplog)
    assert line == ("log: n_1:0 kind=login_code user=u_42 params=['code'] "
                    f'subject="Your code" text="Hello,\\n\\nyour code is {CODE}."')
    assert "\n" not in line and "<p>" not in line


def test_the_medium_is_the_channels_for_templates_preferences_and_limits(tmp_path: Path) -> None:
    assert Config().catalog.medium("log") is None  # the built-in log renders nothing
    config = tmp_path / "n.toml"
    config.write_text('[channels.log]\ntype = "log"\nmedium = "sms"\n\n'
                      '[kinds.k]\nladder = [{ channel = "log" }]\n\n'
                      '[[limits]]\ncount = 1\nmedium = "sms"\n')
    cfg = load_config(config)
    assert cfg.catalog.medium("log") == "sms"
    assert requirements(cfg) == {"k": {"sms"}}
    assert [lim.channels for lim in cfg.catalog.kinds["k"].limits] == [("log",)]


def test_a_medium_that_is_none_of_the_four_is_named(tmp_path: Path) -> None:
    config = tmp_path / "n.toml"
    config.write_text('[channels.log]\ntype = "log"\nmedium = "inbox"\n')
    with pytest.raises(ConfigError, match=r"^channels\.log\.medium: must be one of email, sms, "
                                          r"push, chat, or empty$"):
        load_config(config)
