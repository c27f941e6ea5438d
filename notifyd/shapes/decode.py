"""A body decoded straight into its Struct (msgspec, in C), and a refusal told as the rules tell it:
a DomainError with a stable code, the field's path, and a message made from what the field
declares: its type, bounds and length, or the `shape` its Meta names where no bound says it.
Written once here for every body the API takes; the checks that need the config or the key
(a kind known, a send_at not too far) stay the domain's, after the decode.

How msgspec's errors map, as every hand-written check answered before:
  not JSON, or nested past orjson's 1,024 levels     invalid_json
  the body (at its root) not an object                body_not_object
  a member the struct does not name                   unknown_field  "unknown field 'x'; known: ..."
  a required member left out, or null                 missing_field  "x is required"
  any other wrong value                               invalid_field  "x must be <its shape>"
A value whose Meta says `whole` is one shape: whatever is wrong inside it (a member missing, one
unknown, one wrong) is reported at it, in its own words.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Iterator
from typing import Annotated, Any, Literal, TypeVar, Union

import msgspec
import orjson

from notifyd.core.errors import DomainError

T = TypeVar("T")
NOT_JSON = "the request body is not valid JSON"
NOT_OBJECT = "the request body must be a JSON object"
_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]|\[\.\.\.\]")


def decode(body: bytes | msgspec.Raw, shape: type[T], deep: Any = None) -> T:
    """`body` as `shape`, or the DomainError naming what is wrong with it. JSON nested deeper
    than msgspec reads on this stack (orjson reads 1,024 levels) is read by orjson and checked
    as `deep` (a shape with no raw parts: a batch's items as JSON), or else as `shape`."""
    decoder = _DECODERS.get(shape) or _decoder(shape)
    try:
        decoded: T = decoder.decode(body)
        return decoded
    except msgspec.ValidationError as e:
        raise refusal(e, shape, _json(body)) from None
    except msgspec.DecodeError:
        raise DomainError("invalid_json", NOT_JSON) from None
    except RecursionError:
        return typing.cast(T, convert(_json(body), deep or shape))


def convert(data: Any, shape: Any, where: str | None = None) -> Any:
    """JSON already read (a merged patch, a form, a path's segment) checked as `shape`;
    `where` names it when it is not a body (a path parameter)."""
    try:
        return msgspec.convert(data, shape)
    except msgspec.ValidationError as e:
        raise refusal(e, shape, data, where) from None


_DECODERS: dict[Any, msgspec.json.Decoder[Any]] = {}


def _decoder(shape: Any) -> msgspec.json.Decoder[Any]:
    """The shape's decoder, made once (msgspec reads its type once, there)."""
    return _DECODERS.setdefault(shape, msgspec.json.Decoder(shape))


def _json(body: bytes | msgspec.Raw) -> Any:
    """The body as JSON, for the slow path a refusal takes: a body that is not JSON at all is
    refused for that first, wherever msgspec stopped."""
    try:
        return orjson.loads(memoryview(body))
    except orjson.JSONDecodeError:
        raise DomainError("invalid_json", NOT_JSON) from None


# --- msgspec's error, told in the API's words ---------------------------------------------------


def refusal(e: msgspec.ValidationError, shape: Any, data: Any,
            where: str | None = None) -> DomainError:
    """The DomainError for msgspec's `e` on `data` decoded as `shape`."""
    text, _, at = str(e).partition(" - at `")
    path = _path(at.rstrip("`") or "$", shape, data)
    if not path and where is None and text.startswith("Expected `object`"):
        return DomainError("body_not_object", NOT_OBJECT)
    name = re.search(r"field `([^`]*)`", text)
    member = name.group(1) if name and text.startswith("Object ") else None
    walked = list(_walk(shape, path))
    for i, (_, tp) in enumerate(walked):  # a whole value holds whatever is wrong inside it
        if _extra(tp, "whole"):
            field = _name(where, path[:i])
            return DomainError("invalid_field", f"{field} must be {describe(tp)}", field)
    declared = walked[-1][1]
    if member is not None and text.startswith("Object missing"):
        field = _name(where, [*path, "." + member])
        return DomainError("missing_field", f"{field} is required", field)
    if member is not None:
        field, known = _name(where, [*path, "." + member]), _members(declared)
        return DomainError("unknown_field", f"unknown field {member!r}; known: "
                           f"{', '.join(sorted(known))}", field)
    field = _name(where, path)
    if text.endswith("got `null`") and path and walked[-1][0]:
        return DomainError("missing_field", f"{field} is required", field)
    return DomainError("invalid_field", f"{field} must be {describe(declared)}", field)


def _path(at: str, shape: Any, data: Any) -> list[str]:
    """msgspec's `$.a[0].b` as segments (.a, [0], .b); a dict's key, which msgspec writes as
    [...], found in `data` as the first value that is not its declared type."""
    path: list[str] = []
    tp = shape
    for m in _STEP.finditer(at[1:]):
        seg = m.group(0)
        if seg == "[...]" and isinstance(data, dict):
            value_type = _child(tp, seg)
            key = next((k for k, v in data.items() if not _fits(v, value_type)), "...")
            seg = f".{key}"
        tp = _child(tp, seg)
        data = _into(data, seg)
        path.append(seg)
    return path


def _fits(value: Any, tp: Any) -> bool:
    try:
        msgspec.convert(value, tp)
    except msgspec.ValidationError:
        return False
    return True


def _into(data: Any, seg: str) -> Any:
    if isinstance(data, dict):
        return data.get(seg[1:])
    if isinstance(data, list) and seg.startswith("[") and seg[1:-1].isdigit():
        i = int(seg[1:-1])
        return data[i] if i < len(data) else None
    return None


def _walk(shape: Any, path: list[str]) -> Iterator[tuple[bool, Any]]:
    """(required in its object, declared type) for the body and each segment of the path."""
    yield True, shape
    tp = shape
    for seg in path:
        required, tp = _member(tp, seg)
        yield required, tp


def _child(tp: Any, seg: str) -> Any:
    return _member(tp, seg)[1]


def _member(tp: Any, seg: str) -> tuple[bool, Any]:
    """The type a segment reaches from `tp`, and whether its object requires it."""
    base, _ = _unwrap(tp)
    if isinstance(base, type) and issubclass(base, msgspec.Struct):
        for f in msgspec.structs.fields(base):
            if "." + f.encode_name == seg:
                return f.required, f.type
        return False, Any
    origin, args = typing.get_origin(base), typing.get_args(base)
    if origin is list and args:
        return True, args[0]
    if origin is dict and len(args) == 2:
        return True, args[1]
    return False, Any


def _name(where: str | None, path: list[str]) -> str:
    text = "".join(path).lstrip(".")
    if where is None:
        return text
    return f"{where}{'' if not text or text.startswith('[') else '.'}{text}"


def _members(tp: Any) -> list[str]:
    base, _ = _unwrap(tp)
    if isinstance(base, type) and issubclass(base, msgspec.Struct):
        return [f.encode_name for f in msgspec.structs.fields(base)]
    return []


# --- what a declared type says it takes ----------------------------------------------------------


def _unwrap(tp: Any) -> tuple[Any, list[msgspec.Meta]]:
    """The type without its Meta and without None or UNSET (what null or absence mean is the
    decoder's business, not the message's), and the Meta it carried."""
    metas: list[msgspec.Meta] = []
    while True:
        if typing.get_origin(tp) is Annotated:
            metas += [m for m in tp.__metadata__ if isinstance(m, msgspec.Meta)]
            tp = tp.__origin__
            continue
        if typing.get_origin(tp) in (Union, types.UnionType):
            kept = [a for a in typing.get_args(tp)
                    if a not in (type(None), msgspec.UnsetType)]
            if len(kept) == 1:
                tp = kept[0]
                continue
            return Union[tuple(kept)], metas  # noqa: UP007 - built at run time
        return tp, metas


def _extra(tp: Any, name: str) -> Any:
    """What the type's Meta says in `extra` under `name`: `shape`, the words for a value no
    bound describes; `whole`, that errors inside it are reported at it."""
    _, metas = _unwrap(tp)
    return next((m.extra[name] for m in metas if m.extra and name in m.extra), None)


def describe(tp: Any) -> str:
    """What a field of type `tp` must be, in the words error messages use: 'a non-empty string
    of at most 256 characters', 'an integer 1..2592000', 'a list of 1..16 steps'."""
    shape = _extra(tp, "shape")
    if shape is not None:
        return str(shape)
    base, metas = _unwrap(tp)
    meta = _merged(metas)
    origin = typing.get_origin(base)
    if origin in (Union, types.UnionType):
        return " or ".join(describe(a) for a in typing.get_args(base))
    if origin is Literal:
        values = typing.get_args(base)
        return "true" if values == (True,) else f"one of {', '.join(map(str, values))}"
    if base is str:
        return _text(meta)
    if base is bool:
        return "true or false"
    if base in (int, float):
        return _bounded("an integer" if base is int else "a number", meta)
    if origin is list:
        noun = (meta.get("extra") or {}).get("noun", "items")
        if meta.get("min_length") == 1 and meta.get("max_length") is None:
            return f"a non-empty list of {noun}"
        return f"a list of {_count(meta, noun)}"
    if origin is dict or base is dict or (isinstance(base, type)
                                           and issubclass(base, msgspec.Struct)):
        return "an object"
    return "JSON"


def _merged(metas: list[msgspec.Meta]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for m in metas:
        for name in ("ge", "le", "gt", "lt", "min_length", "max_length", "pattern", "extra"):
            value = getattr(m, name)
            if value is not None:
                out[name] = value
    return out


def _text(meta: dict[str, Any]) -> str:
    least, most = meta.get("min_length"), meta.get("max_length")
    kind = "a non-empty string" if least == 1 else "a string"
    return kind if most is None else f"{kind} of at most {most} characters"


def _bounded(kind: str, meta: dict[str, Any]) -> str:
    low, high = meta.get("ge", meta.get("gt")), meta.get("le", meta.get("lt"))
    if low is not None and high is not None:
        return f"{kind} {low}..{high}"
    if low is not None:
        return f"{kind} of at least {low}"
    return kind if high is None else f"{kind} of at most {high}"


def _count(meta: dict[str, Any], noun: str) -> str:
    least, most = meta.get("min_length"), meta.get("max_length")
    if least is not None and most is not None:
        return f"{least}..{most} {noun}"
    return noun if most is None else f"at most {most} {noun}"
