"""What every body shares: the base of requests and answers, ids and times, the error answer and a
batch's envelope."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import Meta

ID_MAX = 256
MAX_TTL_SEC = 30 * 86400
BATCH_MAX = 1000
# RFC 3339's date-time, as the API writes its times: 2026-09-21T14:13:20.000Z, or with an offset.
RFC3339 = (r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?"
           r"([Zz]|[+-][0-9]{2}:[0-9]{2})$")
SEND_AT_SHAPE = "an RFC 3339 date-time with its offset, such as 2026-09-21T14:13:20Z"


class Body(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A request body: a member it does not name is refused (unknown_field), never ignored."""


class Answer(msgspec.Struct, kw_only=True):
    """An answer body: every field is sent, null where it has no value."""


Id = Annotated[str, Meta(min_length=1, max_length=ID_MAX)]
Count = Annotated[int, Meta(ge=0)]
Time = Annotated[str, Meta(extra_json_schema={"format": "date-time"})] | None
# Its pattern is checked after the key and the kind (domain/validate.time_ms): a key that may not
# post the kind hears that first, whatever the time says.
SendAt = Annotated[str, Meta(extra_json_schema={"format": "date-time", "pattern": RFC3339},
                             extra={"shape": SEND_AT_SHAPE})]


def ref(name: str) -> dict[str, str]:
    """A component of the OpenAPI document, where a schema names one msgspec cannot."""
    return {"$ref": f"#/components/schemas/{name}"}


# --- errors ---------------------------------------------------------------------------------


class ErrorBody(Answer, kw_only=True):
    code: str  # the OpenAPI document lists the catalog's codes (http/errors.CATALOG)
    message: str
    field: str | None


class Error(Answer, kw_only=True):
    """Every refusal: a stable code, a message naming what was wrong, and the field it was in."""

    error: ErrorBody


class Refused(Error, kw_only=True):
    """A batch item refused: the status its single call would answer, beside its error."""

    status: Annotated[int, Meta(ge=400, le=599)]


# --- a batch's envelope -----------------------------------------------------------------------

ITEMS = Meta(min_length=1, max_length=BATCH_MAX, extra={"noun": "items"})


class AnyItems(Body, kw_only=True):
    """A batch's envelope read as JSON, for a body nested deeper than msgspec reads raw: its
    items are checked one by one all the same."""

    items: Annotated[list[Any], ITEMS]
