"""What `notifyd init` writes: the reference config, then a kind that sends through the starter
templates on the log channel, every key it sets explained; and the email channel its comments
describe, once uncommented as they say, loads and finds its templates."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

from notifyd.cli import main
from notifyd.config import Config, load_config, render_example
from notifyd.engine.render import load_templates, requirements
from notifyd.engine.starter import KIND, STARTER_CONFIG, render_starter, write_starter

KEY_LINE = re.compile(r"^(# )?[a-z_]+ = ")


def _load(tmp_path: Path, text: str) -> tuple[Config, list[str]]:
    config = tmp_path / "notifyd.toml"
    config.write_text(text)
    write_starter(tmp_path / "templates")
    cfg = load_config(config)
    return cfg, load_templates(cfg)[1]


def test_init_writes_the_starter_and_refuses_to_overwrite(tmp_path: Path) -> None:
    target = tmp_path / "notifyd.toml"
    first = CliRunner().invoke(main, ["init", str(target)])
    assert first.exit_code == 0, first.output
    assert target.read_text() == render_starter()
    assert f"a sample kind, {KIND}, sends on the log channel" in first.output
    target.write_text("# mine\n")
    again = CliRunner().invoke(main, ["init", str(target)])
    assert again.exit_code != 0 and "--force" in again.output
    assert target.read_text() == "# mine\n"
    forced = CliRunner().invoke(main, ["init", str(target), "--force"])
    assert forced.exit_code == 0, forced.output
    assert target.read_text() == render_starter()
    assert "has templates already; left as it is" in forced.output
    printed = CliRunner().invoke(main, ["init", "-"])
    assert printed.exit_code == 0 and printed.output == render_starter()


def test_the_starter_is_the_reference_then_a_kind_through_its_templates_on_the_log(
        tmp_path: Path) -> None:
    text = render_starter()
    assert text.startswith(render_example())
    cfg, problems = _load(tmp_path, text)
    assert problems == []
    assert list(cfg.kinds) == [KIND]
    assert [s.channel for s in cfg.kinds[KIND].ladder] == ["log", "log"]
    assert cfg.catalog.medium("log") == "email"
    assert requirements(cfg) == {KIND: {"email"}}


def test_every_key_the_starter_sets_says_what_it_does() -> None:
    lines = STARTER_CONFIG.splitlines()
    keys = [n for n, line in enumerate(lines) if KEY_LINE.match(line)]
    assert len(keys) >= 10  # the kind's, the log channel's and the email channel's
    for n in keys:
        above = lines[n - 1]
        said = above.startswith("# # ") if lines[n].startswith("# ") else (
            above.startswith("# ") and not KEY_LINE.match(above))
        assert said, f"{lines[n]!r} has no comment of its own above it"


def test_the_email_channel_loads_once_uncommented_as_its_comment_says(tmp_path: Path) -> None:
    block = STARTER_CONFIG[STARTER_CONFIG.index("# [channels.email]"):]
    uncommented = "\n".join(line.removeprefix("# ") for line in block.splitlines())
    starter = STARTER_CONFIG.replace(block, uncommented).replace('channel = "log"',
                                                                 'channel = "email"')
    (tmp_path / "smtp-password").write_text("app-password\n")
    cfg, problems = _load(tmp_path, render_example() + "\n" + starter)
    assert problems == []
    email = cfg.channels["email"]
    assert (email.type, email.settings.password) == ("smtp", "app-password")
    assert [s.channel for s in cfg.kinds[KIND].ladder] == ["email", "email"]
    assert requirements(cfg) == {KIND: {"email"}}
