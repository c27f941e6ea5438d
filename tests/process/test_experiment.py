"""Seed 002's recovery experiment on the real engine: the whole output, exactly, in both variants;
and when a part of the engine is broken on purpose, the output says so."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from notifyd.cli import main as cli
from notifyd.core.models import Claim
from notifyd.domain import policy
from notifyd.experiment import main

EXPECTED = """\
route new event: True
route duplicate: False
retained intents: 4
Bo email: suppressed
Cy email: suppressed
Ada in-app: visible
Ada email: unknown
fake state after timeout: accepted=1, delivered=0
Ada email after reopen: accepted
provider calls=2, accepted records=1
delivery callback: True
duplicate callback: False
changed retry: changed provider payload
user | channel | final state | preference version
Ada | email | delivered | 1
Ada | in-app | visible | 1
Bo | email | suppressed | 1
Cy | email | suppressed | 2"""
# The provider timed out before accepting, and Ada turned email off meanwhile: her in-flight
# intent still went under its first decision (version 1), and her current version is 2.
TIMEOUT_BEFORE_ACCEPT = EXPECTED.replace(
    "fake state after timeout: accepted=1", "fake state after timeout: accepted=0").replace(
    "Ada | in-app | visible | 1", "Ada | in-app | visible | 2")
ROOT = Path(__file__).resolve().parents[2]


def test_the_experiment_prints_exactly_the_seeds_table() -> None:
    assert "\n".join(main()) == EXPECTED


def test_with_a_timeout_before_accept_the_retry_still_goes_under_its_first_decision() -> None:
    assert "\n".join(main(timeout_before_accept=True)) == TIMEOUT_BEFORE_ACCEPT


def test_the_example_script_and_the_command_print_the_same() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "recovery_experiment.py")],
                          capture_output=True, text=True, timeout=120, check=True, cwd=ROOT)
    assert done.stdout.strip() == EXPECTED and done.stderr == ""
    result = CliRunner().invoke(cli, ["experiment", "recovery", "--timeout-before-accept"])
    assert result.exit_code == 0 and result.output.strip() == TIMEOUT_BEFORE_ACCEPT


def test_a_claim_that_ignores_preferences_shows_in_the_output(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(policy, "_preference", lambda ctx, now: None)
    lines = main()
    assert "Bo email: suppressed" not in lines and "Cy email: suppressed" not in lines
    assert "\n".join(lines) != EXPECTED


def test_a_provider_key_with_the_attempt_number_shows_in_the_output(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Claim, "key", property(
        lambda c: f"{c.notification_id}:{c.step_no}:{c.attempt_no}"))
    lines = main()
    assert "provider calls=2, accepted records=2" in lines  # the retry became a second email
    assert "\n".join(lines) != EXPECTED
