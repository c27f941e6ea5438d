"""Topics over HTTP: a producer's key with the `topics` scope makes and describes them and adds
and removes members in bulk; a person, with their own user token, follows or leaves a topic that
is self-service (a producer's key may do it for any topic) and lists the topics they follow.
"""

from __future__ import annotations

from aiohttp import web

from notifyd.core.events import TopicGone
from notifyd.core.text import is_digits
from notifyd.domain import signed
from notifyd.domain.events import check_topic
from notifyd.domain.topics import (
    change_view,
    following_view,
    member_view,
    parse_change,
    topic_view,
)
from notifyd.http.errors import ApiError
from notifyd.http.kit import CTX, Handler, answer, authorise, read_as, user_id_of
from notifyd.http.people import person
from notifyd.shapes import events as shapes
from notifyd.store import TopicStore

PAGE_MAX = 1000
PAGE_DEFAULT = 100


def _topic(request: web.Request) -> str:
    return check_topic(request.match_info["topic"])


async def _managed(request: web.Request) -> tuple[TopicStore, str, str]:
    """(the store, the key's tenant, the path's topic) for a key with the topics scope."""
    key = await authorise(request, "topics")
    return request.app[CTX].store, key.tenant, _topic(request)


def _no_topic(name: str) -> ApiError:
    return ApiError("not_found", f"no topic {name!r}", "topic")


async def put_topic(request: web.Request) -> web.Response:
    """Make a topic (201) or change whether people may follow it themselves (200)."""
    store, tenant, name = await _managed(request)
    wanted = (await read_as(request, shapes.TopicRequest)).self_service
    found, made = await store.put_topic(tenant, name, wanted)
    return answer(topic_view(found), status=201 if made else 200)


async def get_topic(request: web.Request) -> web.Response:
    store, tenant, name = await _managed(request)
    found = await store.get_topic(tenant, name)
    if found is None:
        raise _no_topic(name)
    return answer(topic_view(found))


async def delete_topic(request: web.Request) -> web.Response:
    store, tenant, name = await _managed(request)
    gone = await store.delete_topic(tenant, name)
    if gone is TopicGone.MISSING:
        raise _no_topic(name)
    if gone is TopicGone.NOT_EMPTY:
        raise ApiError("topic_not_empty", f"topic {name!r} has members: remove them first "
                       f"(POST /v1/topics/{name}/members with remove)", "topic")
    return web.Response(status=204)


async def post_members(request: web.Request) -> web.Response:
    """Add and remove members as one change: the answer names the topic's new version (an
    event accepted from now on pins it)."""
    store, tenant, name = await _managed(request)
    add, remove = parse_change(await read_as(request, shapes.MembersRequest))
    changed = await store.change_members(tenant, name, add, remove)
    if changed is None:
        raise _no_topic(name)
    return answer(change_view(changed))


async def get_members(request: web.Request) -> web.Response:
    """Members by user_id, a page at a time: `next` is the `after` of the next page."""
    store, tenant, name = await _managed(request)
    unknown = sorted(set(request.query) - {"after", "limit"})
    if unknown:
        raise ApiError("unknown_field", f"unknown query parameter {unknown[0]!r} (known: "
                       "after, limit)", unknown[0])
    text = request.query.get("limit", str(PAGE_DEFAULT))
    if not is_digits(text) or not 1 <= int(text) <= PAGE_MAX:
        raise ApiError("invalid_field", f"limit must be 1..{PAGE_MAX}", "limit")
    limit = int(text)
    if await store.get_topic(tenant, name) is None:
        raise _no_topic(name)
    found = await store.topic_members(tenant, name, request.query.get("after", ""), limit + 1)
    page = found[:limit]
    return answer(shapes.Members(members=[member_view(m) for m in page],
                                 next=page[-1].user_id if len(found) > limit else None))


# --- a person's own topics ----------------------------------------------------------------------


def _has_user_token(request: web.Request) -> bool:
    header = request.headers.get("Authorization", "")
    token = header[7:].strip() if header[:7].lower() == "bearer " else ""
    return (token or request.query.get("token", "")).startswith(signed.USER_TOKEN)


async def _who(request: web.Request) -> tuple[str, str, bool]:
    """(tenant, user_id, only self-service topics): the person with their own user token, or
    a producer's key with the `topics` scope for any user of its tenant."""
    if _has_user_token(request):
        tenant, user_id = await person(request)
        return tenant, user_id, True
    key = await authorise(request, "topics")
    return key.tenant, user_id_of(request), False


async def _follow(request: web.Request, on: bool) -> web.Response:
    ctx = request.app[CTX]
    tenant, user_id, own = await _who(request)
    name = _topic(request)
    users = (user_id,)
    changed = await ctx.store.change_members(tenant, name, users if on else (),
                                             () if on else users, only_self_service=own)
    if changed is None:
        raise _no_topic(name)
    if changed.refused:
        raise ApiError("not_self_service", f"topic {name!r} is not self-service: only the "
                       "producer changes its members", "topic")
    return answer(shapes.Following(topic=name, following=on,
                                   changed=bool(changed.added or changed.removed),
                                   version=changed.topic.version))


async def put_following(request: web.Request) -> web.Response:
    return await _follow(request, True)


async def delete_following(request: web.Request) -> web.Response:
    return await _follow(request, False)


async def get_following(request: web.Request) -> web.Response:
    ctx = request.app[CTX]
    tenant, user_id, _ = await _who(request)
    return answer(shapes.Followed(topics=[following_view(f)
                                          for f in await ctx.store.following(tenant, user_id)]))


ROUTES: list[tuple[str, str, Handler]] = [
    ("PUT", "/v1/topics/{topic}", put_topic),
    ("GET", "/v1/topics/{topic}", get_topic),
    ("DELETE", "/v1/topics/{topic}", delete_topic),
    ("POST", "/v1/topics/{topic}/members", post_members),
    ("GET", "/v1/topics/{topic}/members", get_members),
    ("GET", "/v1/users/{user_id}/topics", get_following),
    ("PUT", "/v1/users/{user_id}/topics/{topic}", put_following),
    ("DELETE", "/v1/users/{user_id}/topics/{topic}", delete_following),
]
