"""The release installs: the sdist and the wheel built as a release builds them (`python -m
build`, the wheel from the sdist), checked by `twine check --strict`, the wheel installed into a
clean venv, and the installed `notifyd` run from a folder far from this checkout: it prints the
version written in notifyd/__init__.py, writes a starter config and templates that it then loads
and checks, and finds its SQLite migrations, its pages and their static files in the installed
package. One build for the module."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import pytest
from engine_support import clean_env

from notifyd import __version__

ROOT = Path(__file__).resolve().parents[2]
DIST = "notifyd_server"  # the distribution's name as its files spell it
# What never goes into a release: the checkout's own environment, caches and outputs.
NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__",
                                    ".*_cache", ".hypothesis", "*.db", "*.db-*")


@dataclass
class Release:
    source: Path  # the copy it was built from
    sdist: Path
    wheel: Path
    venv: Path  # a clean venv with the wheel installed
    folder: Path  # where the installed command runs: nothing of this checkout in reach

    def run(self, program: str, *args: str) -> str:
        env = {k: v for k, v in clean_env().items() if k != "PYTHONPATH"}
        done = subprocess.run([str(self.venv / "bin" / program), *args], cwd=self.folder,
                              env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"{program} {' '.join(args)}:\n{done.stdout}{done.stderr}"
        return done.stdout


def _run(*args: str | Path, cwd: Path) -> None:
    done = subprocess.run([str(a) for a in args], cwd=cwd, env=clean_env(), capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, f"{' '.join(map(str, args))}:\n{done.stdout}{done.stderr}"


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Release]:
    """Built from a copy of the checkout, so the build writes nothing into it."""
    top = tmp_path_factory.mktemp("release")
    source = top / "source"
    shutil.copytree(ROOT, source, ignore=NOT_SOURCE)
    _run(sys.executable, "-m", "build", "--outdir", top / "dist", source, cwd=top)
    [sdist] = (top / "dist").glob("*.tar.gz")
    [wheel] = (top / "dist").glob("*.whl")
    _run(sys.executable, "-m", "venv", top / "venv", cwd=top)
    _run(top / "venv" / "bin" / "python", "-m", "pip", "install", "-q", wheel, cwd=top)
    folder = top / "site"
    folder.mkdir()
    yield Release(source, sdist, wheel, top / "venv", folder)


def test_the_dists_are_named_for_the_version_and_pass_twine_check(release: Release) -> None:
    assert release.sdist.name == f"{DIST}-{__version__}.tar.gz"
    assert release.wheel.name == f"{DIST}-{__version__}-py3-none-any.whl"
    _run(sys.executable, "-m", "twine", "check", "--strict", release.sdist, release.wheel,
         cwd=release.folder)


def test_the_wheel_and_the_sdist_carry_every_file_of_the_package(release: Release) -> None:
    """Code and package data alike (migrations, schemas, pages, static files, py.typed): a file
    added under notifyd/ ships, or this names it."""
    package = release.source / "notifyd"
    files = {p.relative_to(release.source).as_posix() for p in package.rglob("*")
             if p.is_file() and "__pycache__" not in p.parts}
    assert any(f.endswith(".sql") for f in files) and any(f.endswith(".j2") for f in files)
    with zipfile.ZipFile(release.wheel) as whl:
        assert files - set(whl.namelist()) == set()
    with tarfile.open(release.sdist) as sdist:
        top = f"{DIST}-{__version__}/"
        assert {top + f for f in files | {"README.md", "LICENSE", "pyproject.toml"}} - set(
            sdist.getnames()) == set()


def test_the_installed_command_says_its_version_and_starts_a_folder(release: Release) -> None:
    imported = release.run("python", "-c", "import notifyd; print(notifyd.__file__)")
    assert Path(imported.strip()).is_relative_to(release.venv)  # not this checkout's package
    assert release.run("notifyd", "--version") == f"notifyd, version {__version__}\n"
    release.run("notifyd", "init")
    assert (release.folder / "notifyd.toml").is_file()
    assert any((release.folder / "templates").rglob("*.j2"))
    release.run("notifyd", "--config", "notifyd.toml", "templates", "check")
    # The starter config loads, and a new database is made by the migrations the wheel carries.
    key = release.run("notifyd", "--config", "notifyd.toml", "--db", "release.db", "keys",
                      "create", "--name", "release")
    assert key.strip()
    latest = max(int(p.name.split("_", 1)[0]) for p in
                 (release.source / "notifyd" / "store" / "sqlite" / "migrations").glob("*.sql"))
    with closing(sqlite3.connect(release.folder / "release.db")) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == latest


def test_the_installed_package_finds_its_pages_and_their_static_files(
        release: Release) -> None:
    pages = release.source / "notifyd" / "http" / "pages"
    found = release.run("python", "-c", """if True:
        from notifyd.http.console.pages import environment, static_file
        env = environment()
        for name in env.list_templates(extensions=["j2"]):
            env.get_template(name)  # parsed, its base found
            print(name)
        import sys
        for name in sys.argv[1:]:
            assert static_file(name), name
            print("static/" + name)
        """, *sorted(p.name for p in (pages / "static").iterdir()))
    assert sorted(found.split()) == sorted(
        p.relative_to(pages).as_posix() for p in pages.rglob("*") if p.is_file())
