"""The preview both `notifyd templates render` and the console show: which medium a channel
renders, the params read, and each problem worded once, naming the input at fault."""

from __future__ import annotations

import pytest

from notifyd.core.catalog import Catalog, ChannelInfo
from notifyd.engine.preview import PreviewError, medium_of, parse_params

CATALOG = Catalog(channels={
    "mail": ChannelInfo("mail", "smtp", None, "email"),
    "wa": ChannelInfo("wa", "whatsapp", None, "chat", templates=False),
    "hook": ChannelInfo("hook", "webhook", None, None)})


def test_a_channel_renders_its_mediums_templates_and_a_medium_may_be_named() -> None:
    assert medium_of(CATALOG, "mail") == "email"
    assert medium_of(CATALOG, "inbox") == "inbox"
    assert medium_of(CATALOG, "sms") == "sms"


@pytest.mark.parametrize(("channel", "said"), [
    ("wa", "'wa' is a whatsapp channel, which renders no templates"),
    ("hook", "'hook' is a webhook channel, which renders no templates"),
    ("fax", "'fax' is neither a channel with templates nor a medium (email, sms, push, chat, "
            "inbox)")])
def test_a_channel_without_templates_is_named(channel: str, said: str) -> None:
    with pytest.raises(PreviewError) as e:
        medium_of(CATALOG, channel)
    assert (str(e.value), e.value.field) == (said, "channel")


@pytest.mark.parametrize(("text", "said"), [
    ("{", "not JSON (Expecting property name enclosed in double quotes: line 1 column 2 "
          "(char 1))"),
    ("[1]", "must be a JSON object"), ('"x"', "must be a JSON object")])
def test_params_must_be_a_json_object(text: str, said: str) -> None:
    with pytest.raises(PreviewError) as e:
        parse_params(text)
    assert (str(e.value), e.value.field) == (said, "params")
    assert parse_params('{"a": [1]}') == {"a": [1]}
