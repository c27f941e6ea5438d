"""Every entry point a request reaches without an API key, fuzzed with hypothesis against the real
app over a real SQLite file: a user token on a person's routes (the header, and ?token= on the
stream), unsubscribe links (GET and POST), every provider's webhook (unsigned, and signed as the
provider signs, so that the body reaches the parser behind the signature), /healthz, /readyz,
/metrics and CORS preflights. Whatever arrives, the answer is never a 5xx: it is the API's error
shape or the route's own answer. Bounded and derandomized: a few seconds, the same every run.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from keyless_support import (
    ORIGIN,
    SES_HEADERS,
    TENANT,
    USER,
    Answer,
    Site,
    b64url,
    check,
    mailgun_body,
    running,
    segment,
    ses_body,
    twilio_query,
)

from notifyd.domain import signed
from notifyd.http.app import make_app

FUZZ = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))
PROVIDERS = ["twilio", "sendgrid", "mailgun", "postmark", "resend", "ses", "delivery-receipt"]
PERSON_ROUTES = [("GET", "/preferences"), ("PUT", "/preferences"), ("GET", "/inbox"),
                 ("GET", "/inbox/badge"), ("POST", "/inbox/read-all"),
                 ("POST", "/inbox/n_1/read"), ("POST", "/inbox/n_1/archive")]

# JSON of every shape, and nesting past the API's limit (33), past orjson's (1024) and past what
# Python's own parser survives (~1000).
SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(
    max_size=12)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.text(max_size=8), inner, max_size=3), max_leaves=10)
def deep(depths: list[int]) -> st.SearchStrategy[str]:
    return st.builds(lambda n, o: o * n + "1" + {"[": "]", '{"a":': "}"}[o] * n,
                     st.sampled_from(depths), st.sampled_from(["[", '{"a":']))


TEXTS = VALUES.map(json.dumps) | deep([33, 700, 1100, 4000])
BODIES = st.binary(max_size=64) | TEXTS.map(str.encode)
# What fits in a token (2 KiB) and in a request line or header (8 KiB, aiohttp's own bound).
SHORT_TEXTS = VALUES.map(json.dumps) | deep([33, 500, 760])
PRINTABLE = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7e), max_size=40)
NUMBERS = st.integers(-1, 10**30).map(str) | PRINTABLE
HUGE = st.just("9" * 4400)  # past the digits int() reads from a string


def tokens(prefix: str) -> st.SearchStrategy[str]:
    """Text that may or may not look like a signed token of this kind, payloads of any JSON."""
    forged = st.builds(lambda payload, sig: f"{prefix}{b64url(payload)}.{sig}",
                       st.binary(max_size=32) | SHORT_TEXTS.map(str.encode), PRINTABLE)
    return PRINTABLE | forged


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    with running(tmp_path_factory.mktemp("keyless")) as s:
        yield s


@FUZZ
@given(route=st.sampled_from(PERSON_ROUTES), token=tokens(signed.USER_TOKEN), body=BODIES)
def test_user_tokens_on_a_persons_routes(site: Site, route: tuple[str, str], token: str,
                                         body: bytes) -> None:
    method, tail = route
    check(site.call(method, f"/v1/users/{USER}{tail}", {"Authorization": f"Bearer {token}"},
                    body if method != "GET" else None))


@FUZZ
@given(token=tokens(signed.USER_TOKEN), last=NUMBERS | HUGE)
def test_a_token_in_the_stream_query(site: Site, token: str, last: str) -> None:
    check(site.call("GET", f"/v1/users/{USER}/inbox/stream?token={segment(token)}",
                    {"Last-Event-ID": last}))


@FUZZ
@given(limit=NUMBERS | HUGE, before=NUMBERS.map(lambda n: b64url(f"{n}.n_1".encode())) | PRINTABLE,
       archived=PRINTABLE)
def test_inbox_pages_with_any_query(site: Site, limit: str, before: str, archived: str) -> None:
    query = f"limit={segment(limit)}&before={segment(before)}&archived={segment(archived)}"
    check(site.call("GET", f"/v1/users/{USER}/inbox?{query}",
                    {"Authorization": f"Bearer {site.token}"}), "application/json")


@FUZZ
@given(body=BODIES)
def test_a_persons_own_preferences_with_any_body(site: Site, body: bytes) -> None:
    check(site.call("PUT", f"/v1/users/{USER}/preferences",
                    {"Authorization": f"Bearer {site.token}"}, body), "application/json")


@FUZZ
@given(method=st.sampled_from(["GET", "POST"]), link=tokens(signed.LINK), body=BODIES)
def test_unsubscribe_links(site: Site, method: str, link: str, body: bytes) -> None:
    check(site.call(method, f"/v1/unsubscribe/{segment(link)}", body=body), "text/html")


@FUZZ
@given(provider=st.sampled_from(PROVIDERS), body=BODIES, query=PRINTABLE,
       headers=st.dictionaries(st.sampled_from([
           "X-Twilio-Signature", "webhook-id", "webhook-timestamp", "webhook-signature",
           "svix-id", "svix-timestamp", "svix-signature", "Authorization",
           "X-Twilio-Email-Event-Webhook-Signature", "X-Twilio-Email-Event-Webhook-Timestamp",
           "x-amz-sns-message-type", "Content-Type"]), PRINTABLE, max_size=4))
def test_unsigned_webhooks(site: Site, provider: str, body: bytes, query: str,
                           headers: dict[str, str]) -> None:
    check(site.call("POST", f"/v1/webhooks/{provider}?{segment(query)}", headers, body))


@FUZZ
@given(provider=st.sampled_from(PROVIDERS), payload=TEXTS)
def test_signed_webhooks_with_any_body(site: Site, provider: str, payload: str) -> None:
    """What a provider's signature covers reaches its parser: any JSON there is read safely."""
    if provider == "mailgun":
        answer = site.call("POST", "/v1/webhooks/mailgun", body=mailgun_body(
            site, json.loads(payload) if len(payload) < 600 else payload))
    elif provider == "ses":
        answer = site.call("POST", "/v1/webhooks/ses", SES_HEADERS, ses_body(site, payload))
    elif provider == "twilio":
        answer = site.webhook("twilio", payload.encode(), twilio_query(payload.encode()))
    else:
        answer = site.webhook(provider, payload.encode())
    check(answer, "text/plain", "text/xml")


@pytest.mark.parametrize("depth", [40, 2000])
def test_a_mailgun_body_nested_past_the_limit_is_refused_before_verifying(
        site: Site, depth: int) -> None:
    """Mailgun's signature sits in the body beside event-data, which it does not cover: the
    whole body is read before anything is verified, by anyone."""
    body = b'{"signature": {}, "event-data": ' + b"[" * depth + b"]" * depth + b"}"
    answer = site.call("POST", "/v1/webhooks/mailgun", body=body)
    assert answer.status == 401, answer
    assert json.loads(answer.body)["error"]["code"] == "bad_signature"


def nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


def test_a_signed_token_or_link_nesting_past_the_limit_is_malformed(site: Site) -> None:
    """The API's limits hold inside what notifyd signed too: 32 levels, like a request body."""
    exp = site.now_sec() + 600
    token = site.signed(signed.USER_TOKEN, {"t": TENANT, "u": USER, "exp": exp,
                                            "x": nested(40)})
    answer = site.call("GET", f"/v1/users/{USER}/inbox/badge", {"Authorization": f"Bearer {token}"})
    assert answer.status == 401 and b"user token: malformed" in answer.body, answer
    fine = site.signed(signed.USER_TOKEN, {"t": TENANT, "u": USER, "exp": exp, "x": nested(20)})
    assert site.call("GET", f"/v1/users/{USER}/inbox/badge",
                     {"Authorization": f"Bearer {fine}"}).status == 200
    link = site.signed(signed.LINK, {"t": TENANT, "u": USER, "c": "news", "x": nested(40)})
    answer = site.call("GET", f"/v1/unsubscribe/{link}")
    assert (answer.status, answer.content_type) == (404, "text/html"), answer


@pytest.mark.parametrize(("target", "header", "field"), [
    (f"/v1/users/{USER}/inbox?limit={'9' * 4400}", {}, "limit"),
    (f"/v1/users/{USER}/inbox?before={b64url(b'9' * 40 + b'.n_1')}", {}, "before"),
    (f"/v1/users/{USER}/inbox?before={b64url(str(2**63).encode() + b'.n_1')}", {}, "before"),
    (f"/v1/users/{USER}/inbox/stream", {"Last-Event-ID": "9" * 4400}, "Last-Event-ID"),
    (f"/v1/users/{USER}/inbox/stream", {"Last-Event-ID": str(10**30)}, "Last-Event-ID"),
    (f"/v1/suppressions?limit={'9' * 4400}", {}, "limit"),
])
def test_numbers_past_what_int_or_sqlite_read_are_refused_naming_the_parameter(
        site: Site, target: str, header: dict[str, str], field: str) -> None:
    key = site.key if target.startswith("/v1/suppressions") else site.token
    answer = site.call("GET", target, {"Authorization": f"Bearer {key}", **header})
    assert answer.status == 422, answer
    assert json.loads(answer.body)["error"] | {"message": ""} == {
        "code": "invalid_field", "field": field, "message": ""}


@FUZZ
@given(path=st.sampled_from(["/healthz", "/readyz", "/metrics"]), query=PRINTABLE,
       headers=st.dictionaries(st.sampled_from(["Accept", "Origin", "Authorization"]),
                               PRINTABLE, max_size=2))
def test_health_and_metrics(site: Site, path: str, query: str, headers: dict[str, str]) -> None:
    check(site.call("GET", f"{path}?{segment(query)}", headers), "application/json",
          "text/plain")


@FUZZ
@given(route=st.sampled_from([tail for _, tail in PERSON_ROUTES] + ["/inbox/stream"]),
       origin=st.just(ORIGIN) | PRINTABLE, method=PRINTABLE, wanted=PRINTABLE)
def test_cors_preflights(site: Site, route: str, origin: str, method: str, wanted: str) -> None:
    answer = site.call("OPTIONS", f"/v1/users/{USER}{route}", {
        "Origin": origin, "Access-Control-Request-Method": method,
        "Access-Control-Request-Headers": wanted})
    if answer.status == 204:
        assert origin == ORIGIN, answer
        return
    check(answer)


def test_a_preflight_from_an_unlisted_origin_is_refused_in_the_error_shape(site: Site) -> None:
    answer = site.call("OPTIONS", f"/v1/users/{USER}/inbox", {
        "Origin": "https://evil.example", "Access-Control-Request-Method": "GET"})
    assert (answer.status, answer.content_type) == (403, "application/json")
    assert json.loads(answer.body)["error"]["code"] == "origin_not_allowed"


def _bad_requests(site: Site) -> list[Answer]:
    """The requests that once answered 500 with a traceback each: nesting past the parsers'
    reach in bodies that need no key, and numbers past what int() or SQLite take."""
    deep = b"[" * 3000 + b"]" * 3000
    user = {"Authorization": f"Bearer {site.token}"}
    return [
        site.call("POST", "/v1/webhooks/mailgun", body=b'{"event-data": ' + deep + b"}"),
        site.webhook("sendgrid", deep),
        site.call("GET", f"/v1/users/{USER}/inbox?limit={'9' * 5000}", user),
        site.call("GET", f"/v1/users/{USER}/inbox?before={b64url(b'9' * 40 + b'.n_1')}", user),
    ]


def logged(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """Lines at INFO and above, but for the access log (one a request, when it is on)."""
    return [r for r in caplog.records if r.levelno >= logging.INFO and r.name != "aiohttp.access"]


def test_an_unexpected_error_is_a_500_in_the_error_shape_and_one_line_now_and_then(
        site: Site, caplog: pytest.LogCaptureFixture) -> None:
    async def boom(request: web.Request) -> web.Response:
        raise RuntimeError("a message that may quote input: nut1.secret")

    app = make_app(site.ctx)
    app.router.add_get("/boom", boom)

    async def call(client: TestClient[Any, Any]) -> tuple[int, Any]:
        async with client.get("/boom") as r:
            return r.status, await r.json()

    async def burst(n: int) -> list[tuple[int, Any]]:
        async with TestClient(TestServer(app)) as client:
            return [await call(client) for _ in range(n)]

    caplog.set_level(logging.INFO)
    answers = site.loop.run_until_complete(burst(200))
    assert set((s, b["error"]["code"]) for s, b in answers) == {(500, "internal")}
    site.clock.advance(10)
    site.loop.run_until_complete(burst(1))
    lines = [r.getMessage() for r in logged(caplog)]
    assert len(lines) == 2 and not any(r.exc_info for r in caplog.records), lines
    assert lines[0].startswith("unhandled error on GET /boom: RuntimeError at ")
    assert "test_keyless.py" in lines[0] and "(boom)" in lines[0]
    assert lines[1].endswith("(199 more since the last such line)")
    assert "nut1" not in caplog.text


def test_two_hundred_bad_requests_leave_at_most_a_few_log_lines(
        site: Site, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    answers = [a for _ in range(50) for a in _bad_requests(site)]
    assert len(answers) == 200
    for answer in answers:
        check(answer)
    lines = logged(caplog)
    assert len(lines) <= 3, [r.getMessage() for r in lines[:5]]
    assert not any(r.exc_info for r in lines)
