"""AWS Signature Version 4 for one request: the canonical request, the string to sign and the
HMAC-SHA256 key chain, written here so the ses channel needs no AWS SDK.

Relied on: https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-create-signed-request.html
(the steps: canonical request = method, URI-encoded path, sorted query, lower-case headers with
trimmed values each ending in a newline, the signed header names, the hex SHA-256 of the body;
string to sign = "AWS4-HMAC-SHA256", the X-Amz-Date time, the scope date/region/service/
aws4_request, the canonical request's hex SHA-256; the key = HMAC("AWS4" + secret, date) then
region, service, "aws4_request"), and .../reference_sigv-signing-elements.html (a session
token travels as X-Amz-Security-Token and is signed). botocore's SigV4Auth recomputes what
this signs in the tests (tests/fake_ses.py).
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import quote

ALGORITHM = "AWS4-HMAC-SHA256"


@dataclass(frozen=True)
class Credentials:
    access_key_id: str
    secret_access_key: str = field(repr=False)
    session_token: str = field(default="", repr=False)


def amz_date(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y%m%dT%H%M%SZ")


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    key = _hmac(f"AWS4{secret}".encode(), date)
    for part in (region, service, "aws4_request"):
        key = _hmac(key, part)
    return key


def canonical_request(method: str, path: str, query: str, headers: dict[str, str],
                      body: bytes) -> tuple[str, str]:
    """The canonical request and its signed header names. `headers`: lower-case names; every
    one is signed. The path's segments are URI-encoded once (every service but S3)."""
    names = sorted(headers)
    lines = "".join(f"{n}:{' '.join(headers[n].split())}\n" for n in names)
    pairs = sorted(tuple(p.partition("=")[::2]) for p in query.split("&") if p)
    signed = ";".join(names)
    return "\n".join([method.upper(), quote(path or "/", safe="/~"),
                      "&".join(f"{k}={v}" for k, v in pairs), lines, signed,
                      hashlib.sha256(body).hexdigest()]), signed


def sign(method: str, host: str, path: str, headers: dict[str, str], body: bytes, *,
         credentials: Credentials, region: str, service: str, now: float) -> dict[str, str]:
    """The headers to add to the request (X-Amz-Date, X-Amz-Security-Token when there is a
    session token, Authorization). `host` is the Host header as it goes on the wire; `headers`
    are the request's other headers that are signed (Content-Type); the query is in `path`."""
    when = amz_date(now)
    added = {"X-Amz-Date": when}
    if credentials.session_token:
        added["X-Amz-Security-Token"] = credentials.session_token
    signed_headers = {k.lower(): v for k, v in {**headers, **added, "host": host}.items()}
    path, _, query = path.partition("?")
    request, names = canonical_request(method, path, query, signed_headers, body)
    scope = f"{when[:8]}/{region}/{service}/aws4_request"
    to_sign = "\n".join([ALGORITHM, when, scope,
                         hashlib.sha256(request.encode()).hexdigest()])
    key = signing_key(credentials.secret_access_key, when[:8], region, service)
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    added["Authorization"] = (f"{ALGORITHM} Credential={credentials.access_key_id}/{scope}, "
                              f"SignedHeaders={names}, Signature={signature}")
    return added
