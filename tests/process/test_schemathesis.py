"""The running daemon keeps to its OpenAPI document: schemathesis generates requests from the
document (valid and invalid), sends them to `notifyd serve` in a subprocess, and checks every
answer: no 5xx, every status and body declared, invalid input refused. Examples are bounded and
derandomized, so the run is the same every time."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from engine_support import Daemon, create_key
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from notifyd.http.openapi import spec

schema = schemathesis.openapi.from_dict(spec(["demo"], ["log"]))  # the built-in config
# A stream never ends: tests/engine/test_people.py reads it.
schema = schema.exclude(path="/v1/users/{user_id}/inbox/stream")
schema = schema.exclude(path="/v1/decisions/stream")  # tests/process/test_client.py reads it
# Not checked: that every schema-valid request is accepted. Some rules are not a schema's to
# say (fallback_chain needs timeout_sec on every step but the last; a kind may refuse overrides;
# a timezone must exist); the server refuses those with a documented 422, which is checked.
SKIPPED = [positive_data_acceptance]


# The built-in config, but for a body limit over what the document's largest body can be (a
# thousand user ids of 256 characters): a body the schema refuses is then refused for what it
# says (422), not for its size (413, which says nothing of the schema).
CONFIG = "[server]\nmax_body_bytes = 4194304\n"


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    folder = tmp_path_factory.mktemp("schemathesis")
    db, config = folder / "n.db", folder / "notifyd.toml"
    config.write_text(CONFIG)
    key = create_key(db, config)
    d = Daemon(db, config)
    try:
        yield d.url, key
    finally:
        assert d.stop() == 0, d.stderr()
        assert "Traceback" not in d.stderr()


@schema.parametrize()
@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
def test_the_daemon_keeps_to_its_document(case: schemathesis.Case,
                                          daemon: tuple[str, str]) -> None:
    url, key = daemon
    case.call_and_validate(base_url=url, headers={"Authorization": f"Bearer {key}"},
                           excluded_checks=SKIPPED)
