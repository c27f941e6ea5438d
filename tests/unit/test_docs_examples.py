"""Every example in README and docs/ is run by a test or says why it cannot be: shell blocks run
beside a daemon (tests/process), the examples a test of their own runs are named in
docs_support.EXAMPLES, and the rest are checked here: each TOML example loads as a config (its
placeholders filled in), and the erasure answer decodes as the answer DELETE /v1/users gives."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import msgspec
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from docs_support import EXAMPLES, Block, all_blocks, example, named

from notifyd.channels.webpush import generate_vapid_keys
from notifyd.config import compile_catalog, load_config
from notifyd.shapes.people import Erased

CHECKED_HERE = {"toml", "sh"}  # sh: tests/process/test_doc_examples.py and test_five_minutes.py


def test_every_example_is_run_by_a_test_or_says_why_not() -> None:
    blocks = all_blocks()
    assert len(blocks) >= 40
    for name in EXAMPLES:
        example(name)  # each names a block that is there
    unclaimed = [str(b) for b in blocks
                 if b.why is None and b.lang not in CHECKED_HERE and named(b) is None]
    assert unclaimed == [], "examples no test runs: run each, or name it in EXAMPLES"
    vague = [str(b) for b in blocks if b.why is not None and len(b.why) <= 10]
    assert vague == [], "a block not run as is says why"


TOML = [b for b in all_blocks() if b.lang == "toml" and b.why is None and named(b) is None]


def _fill(code: str, folder: Path) -> str:
    """The example with its placeholders filled in (a value written with `...`, a key file's
    path) by values of the shape the config checks, so that what is checked is the tables and
    keys: "AC..." becomes "AC000...0", a VAPID key a real one, each webhook secret its own."""
    vapid, _ = generate_vapid_keys()
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    account = folder / "service-account.json"
    account.write_text(json.dumps({
        "type": "service_account", "project_id": "example",
        "client_email": "notifyd@example.iam.gserviceaccount.com",
        "private_key": key.private_bytes(serialization.Encoding.PEM,
                                         serialization.PrivateFormat.PKCS8,
                                         serialization.NoEncryption()).decode()}))
    secrets = (f"whsec_{base64.b64encode(bytes([n]) * 16).decode()}" for n in range(1, 99))
    fills = {"vapid_private_key": lambda: vapid, "secret": lambda: next(secrets),
             "service_account_file": lambda: str(account)}
    for name, value in fills.items():
        code = re.sub(rf'^({name} = )"[^"]*"', lambda m, v=value: f'{m.group(1)}"{v()}"', code,
                      flags=re.M)
    return re.sub(r'"([^"\n]*)\.\.\."', lambda m: f'"{m.group(1)}{"0" * 32}"', code)


@pytest.mark.parametrize("block", TOML, ids=str)
def test_a_toml_example_loads_as_a_config(block: Block, tmp_path: Path) -> None:
    path = tmp_path / "notifyd.toml"
    path.write_text(_fill(block.code, tmp_path))
    compile_catalog(load_config(path, {}))


def test_there_are_toml_examples_to_load() -> None:
    assert {b.page for b in TOML} >= {"docs/channels.md", "docs/concepts.md", "docs/receipts.md"}


def test_the_erasure_answer_is_one_delete_users_gives() -> None:
    answer = msgspec.json.decode(example("erasure answer").code, type=Erased)
    assert answer.user_id == "ada" and answer.removed.profile
