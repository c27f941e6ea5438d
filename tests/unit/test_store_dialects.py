"""The dialects' statements: each names every statement the store core uses, with every fragment
the shared ones leave to it filled in, and those of each feature it declares and of no other; a
statement both dialects write alike is written once (store/core/sql.py), not in each."""

from __future__ import annotations

import ast
import inspect
import re
from types import ModuleType

import pytest

from notifyd.store.core import sql
from notifyd.store.core.sql import (
    Features,
    JoinedWrites,
    Notifies,
    Queries,
    RowLocks,
    SharedBuckets,
)
from notifyd.store.postgres import backend as pg_backend
from notifyd.store.postgres import queries as pg
from notifyd.store.postgres.tx import number
from notifyd.store.sqlite import queries as lite
from notifyd.store.sqlite import tx as lite_tx

DIALECTS = {"sqlite": (lite, lite_tx.FEATURES), "postgres": (pg, pg_backend.FEATURES)}
FEATURES = {"row_locks": RowLocks, "shared_buckets": SharedBuckets, "notifies": Notifies,
            "joined_writes": JoinedWrites}


def _names(protocol: type) -> list[str]:
    return [n for n in protocol.__annotations__ if n.isupper()]


def _own(module: ModuleType) -> set[str]:
    """The names a module assigns itself (not those it takes from store/core/sql.py)."""
    tree = ast.parse(inspect.getsource(module))
    return {t.id for node in tree.body if isinstance(node, ast.Assign)
            for t in node.targets if isinstance(t, ast.Name)}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_dialect_names_every_statement_with_its_fragments_filled(dialect: str) -> None:
    module, _ = DIALECTS[dialect]
    names = _names(Queries)
    assert len(names) > 150
    for name in names:
        text = getattr(module, name)
        assert isinstance(text, str) and text.strip(), name
        assert not re.search(r"\{[A-Z_]+\}", text), f"{name} has a fragment left unfilled"
        if dialect == "postgres":
            assert "INDEXED BY" not in text and "?" not in text, name


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_dialect_writes_the_statements_of_its_features_and_of_no_other(dialect: str) -> None:
    module, features = DIALECTS[dialect]
    for flag, protocol in FEATURES.items():
        has = getattr(features, flag)
        for name in _names(protocol):
            if has:
                assert getattr(has, name).strip(), f"{dialect} has {flag} but no {name}"
            else:
                assert not hasattr(module, name), f"{dialect} lacks {flag} yet writes {name}"


def test_sqlite_has_no_feature_and_postgresql_has_each() -> None:
    assert not any(vars(lite_tx.FEATURES).values()) and not any(vars(Features()).values())
    assert all(getattr(pg_backend.FEATURES, flag) is pg for flag in FEATURES)


def test_a_statement_lives_once_where_the_dialects_agree() -> None:
    """A dialect writes only what it says its own way: none of the shared statements again, and
    none that the other dialect writes alike (PostgreSQL's read as SQLite's would be after its
    placeholders are numbered and its index hints dropped)."""
    shared = {n for n in _own(sql) if n.isupper()} - set(sql.FRAGMENTS)
    both = {n for n in _own(lite) & _own(pg) if n.isupper() and not n.startswith("_")}
    again = sorted((_own(lite) | _own(pg)) & shared)
    assert again == [], "shared statements written again in a dialect"
    assert len(shared) > 100 and len(both) > 20

    def spoken(text: str) -> str:
        return " ".join(number(re.sub(r"\s+INDEXED BY\s+\w+", "", text)).split())

    alike = [n for n in sorted(both) if spoken(getattr(lite, n)) == spoken(getattr(pg, n))]
    assert alike == [], "written alike in both dialects: move them to store/core/sql.py"


def test_a_dialect_that_leaves_out_a_fragment_is_told_which() -> None:
    names: dict[str, object] = {"__name__": "mydialect", "JSON_VALUES": "j", "OF_KINDS": "k",
                                "DEAD_MATCHING": sql.DEAD_MATCHING, "SELECT_X": sql.READ_ALL}
    with pytest.raises(TypeError, match="mydialect does not supply the fragment DEAD_MATCHING"):
        sql.fill(names)
    names["DEAD_MATCHING"] = "d"
    sql.fill(names)
    assert "{" not in str(names["SELECT_X"]) and " k" in str(names["SELECT_X"])


def test_the_contract_names_each_statement_once() -> None:
    every = _names(Queries) + [n for p in FEATURES.values() for n in _names(p)]
    assert len(every) == len(set(every))
