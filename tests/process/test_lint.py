"""The house rules that tools can check: ruff (style, complexity), mypy --strict on notifyd/, and
the layering of ARCHITECTURE.md (import-linter's contracts in pyproject.toml)."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True)


def test_ruff_is_clean() -> None:
    result = run("ruff", "check", "notifyd", "tests", "benchmarks")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_is_clean() -> None:
    result = run("mypy")
    assert result.returncode == 0, result.stdout + result.stderr


def test_imports_keep_to_the_layers() -> None:
    result = subprocess.run([str(Path(sys.executable).parent / "lint-imports"), "--no-cache"],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def _layers_in_pyproject() -> list[set[str]]:
    contract = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    [layers] = [c["layers"] for c in contract["contracts"] if c["type"] == "layers"]
    return [{name.strip() for name in line.split("|")} for line in layers]


def _layers_in_architecture() -> list[set[str]]:
    text = (ROOT / "ARCHITECTURE.md").read_text()
    table = text[text.index("| layer | package | job |"):].split("\n\n")[0]
    rows = [line.split("|") for line in table.splitlines()[2:]]
    return [{f"notifyd.{name}" for name in re.findall(r"`([a-z_]+)`", row[2])} for row in rows]


def test_the_layer_table_of_architecture_md_is_the_contract() -> None:
    assert _layers_in_architecture() == _layers_in_pyproject()


PURE = ("notifyd.core", "notifyd.domain", "notifyd.shapes")
IMPURE = ("notifyd.channels", "notifyd.receipts", "notifyd.config", "notifyd.store",
          "notifyd.engine", "notifyd.http", "aiohttp", "sqlite3", "_sqlite3", "aiosqlite",
          "jinja2", "asyncio", "socket")


def _loaded_by(packages: tuple[str, ...], children: bool = True) -> list[str]:
    """Every module a fresh interpreter holds after importing `packages` (and, with
    `children`, each module in them)."""
    script = (f"import importlib, pkgutil, sys\nfor name in {list(packages)!r}:\n"
              "    pkg = importlib.import_module(name)\n"
              f"    for m in pkgutil.iter_modules(pkg.__path__) if {children} else ():\n"
              "        importlib.import_module(f'{name}.{m.name}')\n"
              "print('\\n'.join(sorted(sys.modules)))\n")
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                            text=True, check=True)
    return result.stdout.split()


def test_pure_modules_load_no_adapter_parser_store_aiohttp_or_sqlite() -> None:
    loaded = _loaded_by(PURE)
    assert "notifyd.domain.policy" in loaded
    assert [m for m in loaded if m.split(".")[0] in IMPURE or m.startswith(IMPURE)] == []


def test_the_store_loads_no_aiohttp_channel_or_parser_nor_a_dialect_until_asked() -> None:
    loaded = _loaded_by(("notifyd.store",), children=False)
    assert [m for m in loaded if m.startswith(("aiohttp", "notifyd.channels",
                                               "notifyd.receipts", "notifyd.http",
                                               "notifyd.engine", "notifyd.config"))] == []
    assert [m for m in loaded if m.startswith(("notifyd.store.sqlite", "sqlite3",
                                               "aiosqlite"))] == []


def test_the_client_loads_nothing_of_the_daemon_nor_aiohttp_until_its_async_half() -> None:
    """A producer's script imports the sync client without the server's parts or aiohttp."""
    loaded = _loaded_by(("notifyd.client",), children=False)
    assert "notifyd.client.sync" in loaded
    server = ("notifyd.store", "notifyd.engine", "notifyd.http", "notifyd.daemon",
              "notifyd.config", "notifyd.channels", "notifyd.receipts", "aiohttp", "sqlite3")
    assert [m for m in loaded if m.startswith(server)] == []
