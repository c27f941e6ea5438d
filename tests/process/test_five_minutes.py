"""README's five-minute path, as a newcomer runs it, then Getting started in the same terminals:
the mail relay and the daemon started by README's own command lines, in the background; the
config written by `notifyd init` and edited as README says; the third terminal's blocks typed,
in order, into one shell. Between blocks the test waits for what README says to wait for (the
email at the relay, the escalation half a minute later), polling it with a deadline."""

from __future__ import annotations

import queue
import re
import secrets
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import pytest
from docs_support import README, Block, blocks_of, example, free_port, reader_folder
from engine_support import Daemon, clean_env

# The reminder is due 30 s after the first email went; this leaves room on a busy machine.
ESCALATION_DEADLINE = 120.0
DEADLINE = 30.0


class Terminal:
    """One bash, as the reader's third terminal: blocks typed into it one after another keep
    its variables; it stops at the first command that fails (set -e), and so does the test."""

    def __init__(self, folder: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(["bash", "--noprofile", "--norc"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     cwd=folder, env=env)
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True).start()
        self.run("set -e -o pipefail")

    def _read(self, out: IO[str]) -> None:
        for line in out:
            self.lines.put(line)
        self.lines.put(None)

    def run(self, code: str, timeout: float = 120.0) -> str:
        """The block's output, once it has finished; its stdin is empty, not the test's."""
        assert self.proc.stdin is not None
        done = f"__block_done_{secrets.token_hex(4)}__"
        self.proc.stdin.write(f"{{\n{code}\n}} < /dev/null\necho {done}\n")
        self.proc.stdin.flush()
        out: list[str] = []
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"still running:\n{code}\n{''.join(out)}") from None
            if line is None:
                raise AssertionError(f"this failed:\n{code}\n{''.join(out)}")
            if done in line:  # after output with no newline of its own (curl's), on its line
                return "".join([*out, line[:line.index(done)]])
            out.append(line)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)


def until(what: str, ok: Callable[[], bool], timeout: float = DEADLINE) -> None:
    """Poll `ok` until it holds, for at most `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not ok():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f} s: {what}")
        time.sleep(0.1)


def relay_messages(out: Path) -> list[str]:
    """The messages the relay printed so far, each whole."""
    text = out.read_text(errors="replace")
    return re.findall(r"^-+ MESSAGE FOLLOWS -+\n(.*?)^-+ END MESSAGE -+$", text, re.S | re.M)


def subjects(out: Path) -> list[str]:
    return [m.group(1) for msg in relay_messages(out)
            if (m := re.search(r"^Subject: (.*)$", msg, re.M))]


def sh(page: str) -> list[Block]:
    return [b for b in blocks_of(page) if b.lang == "sh"]


def _edit_config(config: Path, relay_port: int) -> None:
    """As README says: the starter's ladder of payment_failed replaced by README's, and README's
    email channel added at the end, on the relay's port."""
    text = config.read_text()
    kind = text.index("\n[kinds.payment_failed]\n")
    ladder = re.compile(r"^ladder = \[\n(?:  \{[^\n]*\},?\n)+\]\n", re.M)
    assert len(ladder.findall(text, kind)) == 1, "the starter's kind has one ladder"
    text = text[:kind] + ladder.sub(example("ladder").code, text[kind:], count=1)
    channel = example("email channel").code
    assert channel.count("port = 1025") == 1
    config.write_text(text + "\n" + channel.replace("port = 1025", f"port = {relay_port}"))


@pytest.fixture
def reader(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    curl = shutil.which("curl")
    if curl is None:
        pytest.skip("curl is not installed here")
    env = clean_env(PATH=reader_folder(tmp_path, curl), PYTHONUNBUFFERED="1")
    yield tmp_path, env


def test_the_five_minute_path_and_getting_started_run_as_written(
        reader: tuple[Path, dict[str, str]]) -> None:
    folder, env = reader
    port, relay_port = free_port(), free_port()
    env["NOTIFYD_SERVER_PORT"] = str(port)  # the reader's 7726, wherever it is free here
    install, relay, init, serve, *third, tests = sh(README)
    assert (install.why, relay.why, serve.why, tests.why) != (None, None, None, None)
    assert "aiosmtpd" in relay.code and relay.code.count("127.0.0.1:1025") == 1
    assert serve.code == ".venv/bin/notifyd --config notifyd.toml serve\n"
    assert init.why is None and all(b.why is None for b in third) and len(third) == 4
    post, inspect_first, resolve_in_time, inspect_again = (b.code.replace(":7726", f":{port}")
                                                           for b in third)

    out = folder / "relay.out"
    with out.open("w") as relay_out:
        smtp = subprocess.Popen(["bash", "-c", "exec " + relay.code.replace(
            "127.0.0.1:1025", f"127.0.0.1:{relay_port}")], cwd=folder, env=env,
            stdout=relay_out, stderr=subprocess.STDOUT)
    terminal = Terminal(folder, env)
    daemon = None
    try:
        terminal.run(init.code)
        _edit_config(folder / "notifyd.toml", relay_port)
        daemon = Daemon(folder / "notifyd.db", env=env, argv=["bash", "-c", "exec " + serve.code])
        assert "channels email (smtp)" in daemon.stderr()

        said = terminal.run(post)
        assert "payment_failed: email ok" in said and '"created":true' in said
        until("the first email at the relay", lambda: subjects(out) == [
            "Payment failed: invoice 1009"])
        _the_relay_printed_what_readme_shows(relay_messages(out)[0])
        # README's reader runs inspect after the email shows; notifyd notes the send a moment
        # after the relay has it, so the test asks again until it does.
        until("step 0 noted sent", lambda: "step 0 email: sent" in terminal.run(inspect_first))
        timeline = terminal.run(inspect_first)
        assert "step 1 email: planned for" in timeline and "window restarted" in timeline
        assert "state now: email_pending" in timeline

        said = terminal.run(resolve_in_time)
        assert "step 1 email: cancelled: resolved: paid" in said and "state now: resolved" in said
        until("the escalation: a second email for invoice 1009",
              lambda: subjects(out).count("Payment failed: invoice 1009") == 2,
              ESCALATION_DEADLINE)
        until("step 1 noted sent", lambda: "state now: sent" in terminal.run(inspect_again))
        assert "step 1 email: sent" in terminal.run(inspect_again)
        assert subjects(out).count("Payment failed: invoice 1010") <= 1  # never its reminder

        _getting_started_goes_on(terminal, port, out)
    finally:
        terminal.close()
        smtp.terminate()
        smtp.wait(timeout=30)
        if daemon is not None:
            assert daemon.stop() == 0, daemon.stderr()


def _the_relay_printed_what_readme_shows(message: str) -> None:
    """Each line of README's sample of the relay's output is a line the relay printed (a line
    with `...` stands for what differs: an id, what was left out)."""
    shown = example("relay output").code.splitlines()
    printed = set(message.splitlines())
    missing = [line for line in shown[1:] if "..." not in line and line and line not in printed]
    assert shown[0].startswith("-") and missing == [], message


def _getting_started_goes_on(terminal: Terminal, port: int, out: Path) -> None:
    german, resolve, send = (b.code.replace(":7726", f":{port}")
                             for b in sh("docs/getting-started.md") if b.why is None)
    said = terminal.run(german)
    assert "Zahlung fehlgeschlagen: Rechnung 1011" in said  # the preview
    assert '"locale":"de"' in said and '"created":true' in said
    until("the German email", lambda: "Zahlung fehlgeschlagen: Rechnung 1011" in subjects(out))
    assert "resolved: paid; cancelled 1 step" in terminal.run(resolve)
    said = terminal.run(send)
    assert "already accepted (the same dedup key)" in said
    until("notifyd send's email", lambda: "Zahlung fehlgeschlagen: Rechnung 1012" in subjects(out))
