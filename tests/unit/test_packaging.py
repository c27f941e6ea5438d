"""How people install notifyd: the distribution's name is free on the package index (`notifyd`
there is another project), the command and the import package are still `notifyd`, every place
that names the distribution names the same one, and the license is declared and shipped."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

from click.testing import CliRunner

from notifyd import __version__
from notifyd.cli import main

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
DISTRIBUTION = "notifyd-server"


def test_the_distribution_is_not_the_unrelated_notifyd_on_the_index() -> None:
    assert PROJECT["name"] == DISTRIBUTION
    dist = importlib.metadata.distribution(DISTRIBUTION)  # installed under this name
    [script] = [e for e in dist.entry_points if e.group == "console_scripts"]
    assert (script.name, script.value) == ("notifyd", "notifyd.cli:main")


def test_the_version_is_written_once_in_the_package() -> None:
    """pyproject.toml reads it from notifyd/__init__.py: a release bumps one line."""
    assert "version" not in PROJECT and PROJECT["dynamic"] == ["version"]
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert setuptools["dynamic"]["version"] == {"attr": "notifyd.__version__"}
    assert importlib.metadata.version(DISTRIBUTION) == __version__, \
        "the installed metadata is older than the source: pip install -e '.[dev]' again"


def test_notifyd_version_reads_the_installed_distribution() -> None:
    done = CliRunner().invoke(main, ["--version"], prog_name="notifyd")
    assert done.exit_code == 0, done.output
    assert done.output == f"notifyd, version {__version__}\n"


def test_readme_installs_this_distribution_never_the_index_notifyd() -> None:
    readme = (ROOT / "README.md").read_text()
    assert re.findall(r"pip install notifyd(?![-\w])", readme) == []
    assert f"`{DISTRIBUTION}`" in readme


def test_ci_runs_exactly_the_test_command_readme_gives() -> None:
    """CI ends with README's test block, as written there: what a newcomer pastes is what runs,
    system packages included."""
    section = (ROOT / "README.md").read_text().split("## Run the tests\n", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    assert "pip install -e '.[dev]'" in block and "pytest -q" in block
    assert "apt-get" in block and "chromium" in block and "faketime" in block
    ci = (ROOT / ".ci" / "run").read_text()
    assert ci.endswith("\n" + block), f".ci/run must end with README's test block:\n{block}"


def test_the_license_is_declared_and_shipped() -> None:
    assert PROJECT["license"] == "Apache-2.0"
    assert PROJECT["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    metadata = importlib.metadata.metadata(DISTRIBUTION)
    assert metadata["License-Expression"] == "Apache-2.0"
