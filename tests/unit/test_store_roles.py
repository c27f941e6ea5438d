"""Callers hold roles: outside the store, only the composition root holds the whole `Store`.

Every other module names the roles of store/base.py it calls (or a Protocol combining them), so
mypy proves it needs no more and a stand-in for a test need be only that role. Read from the
source's syntax tree: a name in an annotation, an import or a call counts, wherever it is.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from role_support import MemoryKeys, members, narrowed

from notifyd.core.clock import FakeClock
from notifyd.store import ClaimStore, KeyStore, OperationsStore

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "notifyd"
WHOLE = {"Store", "CoreStore", "open_store"}  # the whole store, by type or as opened
# Where the whole store may be named outside store/ and daemon/: the command line's store for
# one command, and the recovery experiment's own start (a composition root like the daemon's).
ALLOWED = {
    ("cli/base.py", "Store"): "with_store",
    ("cli/base.py", "open_store"): "with_store",
    ("experiment.py", "open_store"): "Notifyd.open",
}


def _named(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # "Store" annotations
        try:
            inner = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return None
        return _named(inner)
    return None


class _Finder(ast.NodeVisitor):
    """Each use of a WHOLE name, with the function it is in ('' at the top of the module)."""

    def __init__(self) -> None:
        self.scope: list[str] = []
        self.found: list[tuple[int, str, str, bool]] = []  # line, name, scope, an import

    def _in(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _in

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if (node.module or "").startswith("notifyd.store.core"):
            self.found.append((node.lineno, node.module or "", ".".join(self.scope), False))
        for alias in node.names:
            if alias.name in WHOLE:
                self.found.append((node.lineno, alias.name, ".".join(self.scope), True))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.startswith("notifyd.store.core"):
                self.found.append((node.lineno, alias.name, ".".join(self.scope), False))

    def generic_visit(self, node: ast.AST) -> None:
        name = _named(node)
        if name in WHOLE:
            self.found.append((getattr(node, "lineno", 0), name, ".".join(self.scope), False))
        super().generic_visit(node)


def holders(source: str, module: str) -> list[str]:
    """Where `module` (a path under notifyd/) names the whole store outside what ALLOWED
    gives it."""
    finder = _Finder()
    finder.visit(ast.parse(source))
    out = []
    for line, name, scope, imported in finder.found:
        allowed = ALLOWED.get((module, name))
        inside = allowed is not None and (scope == allowed or scope.startswith(allowed + "."))
        if inside or (allowed is not None and imported and scope == ""):
            continue
        out.append(f"notifyd/{module}:{line}: {name}" + (f" in {scope}" if scope else ""))
    return out


def outside_the_root() -> list[Path]:
    return [p for p in sorted(PACKAGE.rglob("*.py"))
            if p.relative_to(PACKAGE).parts[0] not in ("store", "daemon")]


def test_no_module_outside_the_store_and_the_daemon_holds_the_whole_store() -> None:
    found = [line for p in outside_the_root()
             for line in holders(p.read_text(), p.relative_to(PACKAGE).as_posix())]
    assert found == [], ("hold the roles of store/base.py the code calls (a Protocol of "
                         "several where it needs more than one), not the whole Store: "
                         + "; ".join(found))


def test_the_check_sees_the_whole_store_however_it_is_named() -> None:
    """The scan above is only as good as what it catches: each way of naming the store."""
    caught = {
        "from notifyd.store import Store\n": "Store",
        "import notifyd.store.base as b\ndef f(s: b.Store) -> None: ...\n": "Store",
        "def f(s: 'Store') -> None: ...\n": "Store",
        "def f(s: list['Store']) -> None: ...\n": "Store",
        "from notifyd.store.core.store import CoreStore\n": "CoreStore",
        "import notifyd.store.core.store\n": "notifyd.store.core.store",
        "async def f():\n    return await open_store('x')\n": "open_store",
    }
    for source, name in caught.items():
        found = holders(source, "engine/x.py")
        assert any(name in line for line in found), (source, found)
    assert holders("from notifyd.store import ClaimStore, StorageError\n", "engine/x.py") == []
    # what ALLOWED gives is given only where it says
    inside = "from notifyd.store import Store\ndef with_store(fn: Store) -> None: ...\n"
    assert holders(inside, "cli/base.py") == []
    assert holders("from notifyd.store import Store\ndef other(s: Store) -> None: ...\n",
                   "cli/base.py") == ["notifyd/cli/base.py:2: Store in other"]



async def test_a_store_narrowed_to_a_role_answers_for_that_role_alone() -> None:
    """role_support.narrowed, which the engine tests give the scanner and the sender pool."""
    keys = MemoryKeys(FakeClock())
    seen = narrowed(keys, KeyStore)
    assert await seen.create_tenant("acme") and await keys.find_tenant("acme") is not None
    with pytest.raises(AttributeError, match="'clock': not in KeyStore"):
        seen.clock  # noqa: B018 - reached for, and refused
    claims = narrowed(keys, ClaimStore)
    with pytest.raises(AttributeError, match="'find_key': not in ClaimStore"):
        claims.find_key  # noqa: B018
    assert {"url", "shared", "open"} <= members(OperationsStore)  # attributes and properties
