"""The dialects' statements: each names every statement the store core uses, and those of each
feature it declares and of no other."""

from __future__ import annotations

import pytest

from notifyd.store.core.queries import Features, Notifies, Queries, RowLocks, SharedBuckets
from notifyd.store.postgres import backend as pg_backend
from notifyd.store.postgres import queries as pg
from notifyd.store.sqlite import queries as lite
from notifyd.store.sqlite import tx as lite_tx

DIALECTS = {"sqlite": (lite, lite_tx.FEATURES), "postgres": (pg, pg_backend.FEATURES)}
FEATURES = {"row_locks": RowLocks, "shared_buckets": SharedBuckets, "notifies": Notifies}


def _names(protocol: type) -> list[str]:
    return [n for n in protocol.__annotations__ if n.isupper()]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_dialect_names_every_statement_the_core_uses(dialect: str) -> None:
    module, _ = DIALECTS[dialect]
    names = _names(Queries)
    assert len(names) > 150 and callable(module.next_due_sql)
    for name in names:
        text = getattr(module, name)
        assert isinstance(text, str) and text.strip(), name
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


def test_the_contract_names_each_statement_once() -> None:
    every = _names(Queries) + [n for p in FEATURES.values() for n in _names(p)]
    assert len(every) == len(set(every))
