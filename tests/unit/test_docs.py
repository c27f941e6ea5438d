"""What the user docs say is what notifyd does: README's list of metrics is the registry's,
its profile fields are the ones PUT /v1/users takes, the delivery table tells the webhook
channel's 4xx as it is handled, and no user doc speaks of how the work was organised."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from notifyd.channels import webhook
from notifyd.channels.base import Failed
from notifyd.domain.recipients import USER_FIELDS
from notifyd.engine.metrics import table

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
REGENERATE = ".venv/bin/python -c 'from notifyd.engine.metrics import table; " \
             "print(table(), end=\"\")' and paste it between the metrics markers in README.md"


def test_readmes_metrics_are_the_registrys_names_types_labels_and_help() -> None:
    listed = README[README.index("<!-- metrics:"):README.index("<!-- /metrics -->")]
    assert listed.split("\n", 1)[1] == table(), f"README's metrics are stale: run {REGENERATE}"


def test_readmes_profile_fields_are_what_put_users_takes() -> None:
    [row] = [line for line in README.splitlines() if line.startswith("| `PUT /v1/users/")]
    shown = re.search(r"`\{(.*)\}`", row)
    assert shown is not None
    fields = {f.strip().split("?")[0] for f in re.sub(r"\{[^}]*\}", "", shown.group(1)).split(",")}
    assert fields == set(USER_FIELDS)


@pytest.mark.parametrize("status", [400, 409, 410, 413, 422, 451])
def test_the_webhook_channel_retries_a_4xx_as_the_delivery_table_says(status: int) -> None:
    assert isinstance(webhook.classify(status, {}, b""), Failed)
    assert "4xx, except from the `webhook` channel" in README
    assert "every 4xx from the `webhook` channel" in README


USER_DOCS = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", ROOT / "notifyd.example.toml",
             ROOT / "pyproject.toml", *sorted((ROOT / "examples").rglob("*.py")),
             *sorted((ROOT / "notifyd").rglob("*.py"))]
WORK_TALK = re.compile(r"\bseeds? \d{3}\b|\bissue \d+\b|\bissue's\b|\bfinding \d+\b", re.I)


def test_no_user_doc_speaks_of_seeds_issues_or_findings() -> None:
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
             for path in USER_DOCS for n, line in enumerate(path.read_text().splitlines(), 1)
             if WORK_TALK.search(line)]
    assert found == []
