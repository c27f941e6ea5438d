"""CoreStore's events and topics (EventStore, TopicStore of store/base.py): each method one
script of store/core/events.py or topics.py in one transaction, or one read."""

from __future__ import annotations

from collections.abc import Mapping

from notifyd.core.events import (
    Backlog,
    Counts,
    EventAccepted,
    EventInput,
    EventRecord,
    Following,
    KindRoute,
    Member,
    MembersChanged,
    Routed,
    Topic,
    TopicGone,
)
from notifyd.core.records import Notification
from notifyd.store.core import events, rows, topics
from notifyd.store.core.tx import Backend


class FanoutMethods:
    backend: Backend

    # --- topics -------------------------------------------------------------------------------

    async def put_topic(self, tenant: str, name: str,
                        self_service: bool | None = None) -> tuple[Topic, bool]:
        return await self.backend.write(lambda tx: topics.put(tx, tenant, name, self_service))

    async def get_topic(self, tenant: str, name: str) -> Topic | None:
        found = await self.backend.fetch(self.backend.q.SELECT_TOPIC, (tenant, name))
        return topics.topic(found[0]) if found and found[0]["deleted_at"] is None else None

    async def delete_topic(self, tenant: str, name: str) -> TopicGone:
        return await self.backend.write(lambda tx: topics.delete(tx, tenant, name))

    async def change_members(self, tenant: str, name: str, add: tuple[str, ...],
                             remove: tuple[str, ...],
                             only_self_service: bool = False) -> MembersChanged | None:
        return await self.backend.write(lambda tx: topics.change(
            tx, tenant, name, add, remove, only_self_service))

    async def topic_members(self, tenant: str, name: str, after: str,
                            limit: int) -> list[Member]:
        found = await self.backend.fetch(self.backend.q.SELECT_MEMBERS,
                                         (tenant, name, after, limit))
        return [Member(r["user_id"], r["added_at"]) for r in found]

    async def following(self, tenant: str, user_id: str) -> list[Following]:
        found = await self.backend.fetch(self.backend.q.SELECT_FOLLOWING, (tenant, user_id))
        return [Following(r["topic"], bool(r["self_service"]), r["added_at"]) for r in found]

    # --- events -------------------------------------------------------------------------------

    async def accept_event(self, inp: EventInput, most: int | None = None) -> EventAccepted:
        return await self.backend.write(lambda tx: events.accept_event(tx, inp, most),
                                        shed=True)

    async def get_event(self, tenant: str, event_id: str) -> EventRecord | None:
        found = await self.backend.fetch(self.backend.q.GET_FANOUT_EVENT, (tenant, event_id))
        return events.record(found[0]) if found else None

    async def routing_events(self, limit: int) -> list[EventRecord]:
        return [events.record(r)
                for r in await self.backend.fetch(self.backend.q.SELECT_ROUTING, (limit,))]

    async def route_chunk(self, tenant: str, event_id: str, routes: Mapping[str, KindRoute],
                          limit: int) -> Routed:
        return await self.backend.write(lambda tx: events.route_chunk(
            tx, tenant, event_id, routes, limit))

    async def event_counts(self, tenant: str, event_id: str) -> Counts:
        return await self.backend.snapshot(lambda tx: events.counts(tx, tenant, event_id))

    async def event_notifications(self, tenant: str, event_id: str, after: tuple[str, str],
                                  limit: int) -> list[Notification]:
        return await self.backend.snapshot(lambda tx: events.page(
            tx, tenant, event_id, after, limit))

    async def routing_backlog(self) -> Backlog:
        found = await self.backend.fetch(self.backend.q.SELECT_BACKLOG)
        return Backlog(int(found[0][0]), rows.as_int(found[0][1]))
