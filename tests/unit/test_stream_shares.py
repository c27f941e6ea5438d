"""Tenants share the inbox streams' places: free ones go to whoever asks, and once they are all
taken a tenant under its share (quotas.stream_share) takes one back from a tenant over it. Of the
decision streams one tenant holds at most its share: past it, 429 too_many_streams with
Retry-After, while another tenant still opens its own."""

from __future__ import annotations

import pytest

from notifyd.core.errors import OverQuota
from notifyd.engine.decisions import FOLLOWERS_MAX, Feed, Filter
from notifyd.engine.stream import Hub
from notifyd.http.errors import status_of
from notifyd.http.kit import error_response


def test_a_lone_tenant_takes_every_free_place() -> None:
    hub = Hub(max_open=10, per_person=8, share=0.5)
    assert all(hub.subscribe("only", f"u{i}") is not None for i in range(10))
    assert hub.open == 10
    assert hub.subscribe("only", "u10") is None  # the daemon's bound: overloaded, as ever


def test_once_full_a_tenant_under_its_share_takes_the_oldest_place_of_one_over_it() -> None:
    hub = Hub(max_open=10, per_person=8, share=0.5)
    loud = [hub.subscribe("loud", f"u{i}") for i in range(10)]  # free places: all its own
    for i in range(5):  # the other half is another tenant's to take back
        assert hub.subscribe("quiet", f"u{i}") is not None
        first = loud[i]
        assert first is not None and first.closed == "displaced"  # its page resumes later
    assert hub.open == 10
    with pytest.raises(OverQuota) as refused:  # at its share, with every place taken
        hub.subscribe("quiet", "u9")
    assert refused.value.code == "too_many_streams"
    with pytest.raises(OverQuota):  # the loud one's displaced page, coming back
        hub.subscribe("loud", "u0")
    assert hub.subscribe("third", "u1") is None  # nobody over a share: overloaded, as before


def test_with_no_share_every_place_is_first_come_first_served() -> None:
    hub = Hub(max_open=4, per_person=8, share=1.0)
    assert all(hub.subscribe("loud", f"u{i}") is not None for i in range(4))
    assert hub.subscribe("quiet", "u1") is None


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
