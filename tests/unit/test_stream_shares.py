"""One tenant holds at most its share (quotas.stream_share) of the inbox streams' places and of
the decision streams': past it, 429 too_many_streams with Retry-After, while another tenant
still opens its own."""

from __future__ import annotations

import pytest

from notifyd.core.errors import OverQuota
from notifyd.engine.decisions import FOLLOWERS_MAX, Feed, Filter
from notifyd.engine.stream import Hub
from notifyd.http.errors import status_of
from notifyd.http.kit import error_response


def test_one_tenant_holds_at_most_its_share_of_the_inbox_streams() -> None:
    hub = Hub(max_open=10, per_person=8, share=0.5)
    mine = [hub.subscribe("loud", f"u{i}") for i in range(5)]
    with pytest.raises(OverQuota) as refused:
        hub.subscribe("loud", "u9")
    assert refused.value.code == "too_many_streams"
    for i in range(5):  # the other half is another tenant's to take
        assert hub.subscribe("quiet", f"u{i}") is not None
    assert hub.subscribe("third", "u1") is None  # every place taken: as before, overloaded
    first = mine[0]
    assert first is not None
    hub.unsubscribe(first)
    assert hub.subscribe("loud", "u9") is not None  # a place of its own share came back


def test_a_person_reopening_within_the_share_displaces_their_oldest() -> None:
    hub = Hub(max_open=10, per_person=1, share=0.2)
    assert hub.subscribe("t", "a") is not None
    assert hub.subscribe("t", "b") is not None
    assert hub.subscribe("t", "b") is not None  # b's first gives way: still two
    assert hub.open == 2


def test_one_tenant_follows_at_most_its_share_of_the_decision_streams() -> None:
    feed = Feed()
    most = FOLLOWERS_MAX // 2
    for _ in range(most):
        assert feed.follow(Filter("loud"), 0.5) is not None
    with pytest.raises(OverQuota) as refused:
        feed.follow(Filter("loud"), 0.5)
    answer = error_response(refused.value)
    assert status_of(refused.value) == answer.status == 429
    assert answer.headers["Retry-After"] == "10"
    assert feed.follow(Filter("quiet"), 0.5) is not None
