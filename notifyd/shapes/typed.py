"""The Python client's types, made from the Structs: notifyd/client/types.py is this module's
`render()`, a TypedDict per body the client sends or reads (a client call answers the JSON as
dicts, so a caller indexes them as before). tests/unit/test_client_types.py says when it is
stale and how to make it again."""

from __future__ import annotations

import enum
import inspect
import json
import types
import typing
from typing import Annotated, Any, Literal, Union

import msgspec

from notifyd.shapes.common import Refused
from notifyd.shapes.notifications import (
    Accepted,
    AcceptedItem,
    AcceptRequest,
    ChainStep,
    NotificationOptions,
    ResolutionRequest,
    Resolved,
    ResolvedItem,
    Status,
)
from notifyd.shapes.people import (
    Device,
    InboxChange,
    InboxItem,
    InboxPage,
    Names,
    Preferences,
    Token,
    User,
    UserView,
)

REGENERATE = (".venv/bin/python -c 'from notifyd.shapes.typed import render; "
              "print(render(), end=\"\")' > notifyd/client/types.py")
# The client's name for each, and the Structs it is made from (several: each one's fields, none
# of them required: a batch's item answers one way or the other).
CLIENT: list[tuple[str, tuple[type[msgspec.Struct], ...]]] = [
    ("Step", (ChainStep,)),
    ("NotificationOptions", (NotificationOptions,)),
    ("NotificationIn", (AcceptRequest,)),
    ("ResolutionIn", (ResolutionRequest,)),
    ("Profile", (User,)),
    ("Accepted", (Accepted,)),
    ("ItemResult", (AcceptedItem, ResolvedItem, Refused)),
    ("Resolved", (Resolved,)),
    ("Status", (Status,)),
    ("Device", (Device,)),
    ("UserView", (UserView,)),
    ("Preferences", (Preferences,)),
    ("Names", (Names,)),
    ("InboxItem", (InboxItem,)),
    ("InboxPage", (InboxPage,)),
    ("InboxChange", (InboxChange,)),
    ("Token", (Token,)),
]
RENAMED = {"Step": "StatusStep"}  # a Struct's name the client gives to another
HEAD = '''"""The shapes the API takes and answers, as the client's methods type them: made from the
API's Structs (notifyd/shapes) by notifyd/shapes/typed.py; do not edit by hand. GET
/v1/openapi.json is the whole truth."""

from __future__ import annotations

'''


class _Writer:
    def __init__(self) -> None:
        self.named = {structs[0]: name for name, structs in CLIENT if len(structs) == 1}
        self.todo: list[type[msgspec.Struct]] = []
        self.used: set[str] = {"TypedDict"}

    def name(self, struct: type[msgspec.Struct]) -> str:
        if struct not in self.named:
            self.named[struct] = RENAMED.get(struct.__name__, struct.__name__)
            self.todo.append(struct)
        return self.named[struct]

    def annotation(self, tp: Any) -> str:
        """A field's type as the client writes it (what JSON carries: an enum is its str)."""
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin is Annotated:
            return self.annotation(args[0])
        if origin in (Union, types.UnionType):
            return " | ".join(self.annotation(a) for a in args if a is not msgspec.UnsetType)
        if origin is Literal:
            self.used.add("Literal")
            return f"Literal[{', '.join(json.dumps(a) for a in args)}]"
        if origin in (list, dict):
            return f"{origin.__name__}[{', '.join(self.annotation(a) for a in args)}]"
        if tp is type(None):
            return "None"
        if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
            return self.name(tp)
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            return "str"
        if tp in (str, int, float, bool):
            return str(tp.__name__)
        self.used.add("Any")
        return "Any"

    def typed_dict(self, name: str, structs: tuple[type[msgspec.Struct], ...]) -> str:
        doc = inspect.getdoc(structs[0]) if len(structs) == 1 else (
            "One item's answer in a batch: " + ", ".join(s.__name__ for s in structs) + ".")
        lines = [f"class {name}(TypedDict{', total=False' if len(structs) > 1 else ''}):"]
        if doc and structs[0].__doc__:
            lines += [f'    """{_wrapped(doc)}"""', ""]
        fields: dict[str, list[str]] = {}  # a field several have: any of their types
        for struct in structs:
            for f in msgspec.structs.fields(struct):
                kind = self.annotation(f.type)
                if not f.required and len(structs) == 1:
                    self.used.add("NotRequired")
                    kind = f"NotRequired[{kind}]"
                kinds = fields.setdefault(f.encode_name, [])
                kinds += [] if kind in kinds else [kind]
        lines += [f"    {field}: {' | '.join(kinds)}" for field, kinds in fields.items()]
        return "\n".join(lines)


def _wrapped(doc: str, width: int = 96) -> str:
    words, lines, line = doc.split(), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return "\n    ".join([*lines, line])


def render() -> str:
    """notifyd/client/types.py as it must read."""
    out = _Writer()
    blocks = [out.typed_dict(name, structs) for name, structs in CLIENT]
    while out.todo:  # the Structs those hold, under their own names
        struct = out.todo.pop(0)
        blocks.append(out.typed_dict(out.named[struct], (struct,)))
    typing_names = ", ".join(sorted(out.used))
    return (HEAD + f"from typing import {typing_names}\n\n"
            "from notifyd.client.calls import Event  # noqa: F401 - its name here, as before\n\n\n"
            + "\n\n\n".join(blocks) + "\n")
