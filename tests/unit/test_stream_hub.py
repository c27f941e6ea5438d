"""The inbox streams' hub: one person's pages are bounded (the oldest gives way), all of them are,
and a stream that falls behind leaves at once, without the writers waiting on it."""

from __future__ import annotations

from notifyd.engine.stream import CLOSE, QUEUE_MAX, Event, Hub, Stream


def drained(stream: Stream) -> list[Event]:
    out = []
    while not stream.queue.empty():
        out.append(stream.queue.get_nowait())
    return out


async def test_a_persons_new_stream_past_the_bound_closes_their_oldest() -> None:
    hub = Hub(max_open=100, per_person=3)
    ada = [hub.subscribe("t", "ada") for _ in range(3)]
    ended: list[Stream] = []
    for s in ada:
        assert s is not None
        s.end = lambda s=s: ended.append(s)  # its handler may be waiting on a page's reads
    bob = hub.subscribe("t", "bob")
    newest = hub.subscribe("t", "ada")
    assert newest is not None and bob is not None
    assert ada[0] is not None and ada[0].closed == "displaced" and drained(ada[0]) == [CLOSE]
    assert ended == [ada[0]]
    assert [s.closed for s in ada[1:] if s is not None] == [None, None]
    assert (hub.holds("t", "ada"), hub.holds("t", "bob"), hub.open) == (3, 1, 4)
    hub.unsubscribe(ada[0])  # its handler ends: already gone, nothing counted twice
    assert hub.open == 4


async def test_past_max_open_a_new_stream_is_refused_unless_its_person_gives_one_up() -> None:
    hub = Hub(max_open=2, per_person=1, share=1.0)  # one tenant may hold every place
    first, second = hub.subscribe("t", "ada"), hub.subscribe("t", "bob")
    assert hub.subscribe("t", "cy") is None
    again = hub.subscribe("t", "ada")  # ada's own place: her older page gives way
    assert again is not None and first is not None and first.closed == "displaced"
    assert second is not None and second.closed is None and hub.open == 2


async def test_a_stream_that_falls_behind_leaves_at_once_and_the_others_still_hear() -> None:
    hub = Hub(max_open=100, per_person=8)
    slow, live = hub.subscribe("t", "ada"), hub.subscribe("t", "ada")
    assert slow is not None and live is not None
    for i in range(QUEUE_MAX):
        hub.publish("t", "ada", Event("item", {"n": i}, i + 1))
        if i % 2 == 0:
            drained(live)
    assert slow.closed == "behind" and drained(slow) == [CLOSE]
    assert (hub.open, hub.holds("t", "ada"), live.closed) == (1, 1, None)
    hub.publish("t", "ada", Event("badge", {"unread": 1}))
    assert drained(live)[-1] == Event("badge", {"unread": 1})
    assert hub.metrics.streams_closed.labels("behind")._value.get() == 1
