"""Every engine test runs on every store backend of store_support.BACKENDS: engine() and
stack() open the backend this fixture names, and the tests read the rows through the store."""

from __future__ import annotations

from collections.abc import Iterator

import engine_support
import pytest
from store_support import BACKENDS


@pytest.fixture(autouse=True, params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest) -> Iterator[str]:
    engine_support.BACKEND = request.param
    try:
        yield request.param
    finally:
        engine_support.BACKEND = "sqlite"
