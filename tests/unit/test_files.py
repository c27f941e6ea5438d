"""The daemon's open files shared out: connections and inbox streams fit beside the providers'
sockets, the database and an accept burst; producers keep their share; a configured value that
does not fit is lowered and named."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from notifyd.config import Config, ServerConfig
from notifyd.daemon.files import FD_BASE, STREAMS_DEFAULT, budget


def config(**server: Any) -> Config:
    return Config(server=dataclasses.replace(ServerConfig(), **server))


@pytest.mark.parametrize("files", [256, 1024, 4096])
def test_everything_fits_in_the_open_files_limit(files: int) -> None:
    fit = budget(config(), files)
    assert fit.connections + fit.streams + fit.providers + FD_BASE <= files
    room = files - FD_BASE - fit.providers
    assert fit.connections == 1000 or fit.connections >= room // 2  # producers keep their share
    assert fit.streams > 0
    lowered = ["server.max_connections"] if fit.connections < 1000 else []
    assert [line.split(" ")[0] for line in fit.lowered] == lowered


def test_a_large_limit_serves_the_config_as_it_is() -> None:
    fit = budget(config(), 65536)
    assert (fit.connections, fit.streams, fit.lowered) == (1000, STREAMS_DEFAULT, ())


def test_a_configured_stream_bound_over_the_limit_is_lowered_and_named() -> None:
    fit = budget(config(max_connections=100, max_streams=5000), 1024)
    assert fit.connections == 100
    assert fit.streams == 1024 - FD_BASE - fit.providers - 100
    [line] = fit.lowered
    assert line.startswith("server.max_streams 5000 is over what 1024 open files allow")
    assert f"at most {fit.streams} inbox streams" in line


def test_streams_the_config_leaves_unset_take_what_the_connections_leave() -> None:
    fit = budget(config(max_connections=100), 1024)
    assert fit.connections == 100 and fit.lowered == ()
    assert fit.streams == 1024 - FD_BASE - fit.providers - 100
