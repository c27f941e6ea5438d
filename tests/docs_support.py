"""The user docs' pages (README.md and docs/*.md) and their fenced examples, for the tests that
run them: each block with its page, line, language, the heading it sits under, and the reason
it is not run as it is (an HTML comment just above it: `<!-- not run as is: why -->`)."""

from __future__ import annotations

import os
import re
import socket
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = "README.md"
NOT_RUN = re.compile(r"<!-- not run as is: (.*?) -->")
# Where README's five-minute path runs, and the page that goes on from it in the same terminals:
# their shell blocks run in order (tests/process/test_five_minutes.py); every other page's run
# one by one beside a daemon without a config file (tests/process/test_doc_examples.py).
WALKTHROUGH_PAGES = (README, "docs/getting-started.md")
FIVE_MINUTES = "Five minutes to a first email"
# The examples a test of their own runs, by name: (page, the heading they sit under, language,
# which of that language under that heading). Each test finds its example here, and
# tests/unit/test_docs_examples.py checks that every block that is neither shell nor TOML is one.
EXAMPLES = {
    "relay output": (README, FIVE_MINUTES, "text", 0),
    "ladder": (README, FIVE_MINUTES, "toml", 0),
    "email channel": (README, FIVE_MINUTES, "toml", 1),
    "batches": ("docs/api.md", "Batches", "python", 0),
    "python client": ("docs/clients.md", "Python", "python", 0),
    "browser": ("docs/clients.md", "The browser", "js", 0),
    "user token in python": ("docs/people.md", "User tokens", "python", 0),
    "user token in javascript": ("docs/people.md", "User tokens", "js", 0),
    "erasure answer": ("docs/people.md", "Erasure", "json", 0),
    "inbox widget": ("docs/people.md", "The inbox widget", "html", 0),
    "names file": ("docs/people.md", "Names a person reads", "toml", 0),
    "recovery output": ("docs/recovery.md", "What it prints", "text", 0),
    "recovery output, timeout before accept": ("docs/recovery.md", "With a timeout before accept",
                                               "text", 0),
    "events config": ("docs/events.md", "An event type", "toml", 0),
    "events commands": ("docs/events.md", "Posting an event", "sh", 0),
}


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository's root
    line: int  # of the code's first line, from 1
    lang: str
    heading: str
    why: str | None
    code: str

    def __str__(self) -> str:
        return f"{self.page} line {self.line} ({self.lang or 'no language'})"


def pages() -> list[str]:
    return [README, *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))]


@cache
def text(page: str) -> str:
    return (ROOT / page).read_text()


@cache
def blocks_of(page: str) -> tuple[Block, ...]:
    """Every fenced block of the page, in order. A heading is a line starting with `#` outside a
    block; the comment that says why a block is not run is the line just above its fence."""
    found: list[Block] = []
    heading, fence, why = "", None, None
    lines = text(page).split("\n")
    for n, line in enumerate(lines, 1):
        if fence is not None:
            if line == "```":
                lang, start, reason = fence
                found.append(Block(page, start, lang, heading, reason,
                                   "\n".join(lines[start - 1:n - 1]) + "\n"))
                fence = None
        elif line.startswith("```"):
            above = NOT_RUN.fullmatch(lines[n - 2]) if n > 1 else None
            why = above.group(1) if above else None
            fence = (line[3:].strip(), n + 1, why)
        elif re.match(r"#{1,6} ", line):
            heading = line.lstrip("#").strip()
    assert fence is None, f"{page}: a block that never closes"
    return tuple(found)


def all_blocks() -> list[Block]:
    return [b for page in pages() for b in blocks_of(page)]


def example(name: str) -> Block:
    """The example of that name (EXAMPLES), where it sits now."""
    page, heading, lang, nth = EXAMPLES[name]
    there = [b for b in blocks_of(page) if (b.heading, b.lang) == (heading, lang)]
    assert len(there) > nth, f"{name}: no {lang} block #{nth} under '{heading}' in {page}"
    return there[nth]


def named(block: Block) -> str | None:
    """The name EXAMPLES gives this block, if any."""
    return next((name for name in EXAMPLES if example(name) == block), None)



# --- the reader's machine ----------------------------------------------------------------------


def reader_folder(folder: Path, curl: str) -> str:
    """`.venv/bin/notifyd` and `.venv/bin/python` in `folder`, as the docs' reader has them after
    installing this checkout, and a bin/ with `notifyd`, `python` and `curl` (which fails on an
    error status, as the reader would notice one); the PATH that puts that bin/ first."""
    notifyd = f"{sys.executable} -m notifyd"
    shim(folder / ".venv" / "bin" / "notifyd", notifyd)
    shim(folder / ".venv" / "bin" / "python", sys.executable)
    shim(folder / "bin" / "notifyd", notifyd)
    shim(folder / "bin" / "python", sys.executable)
    shim(folder / "bin" / "curl", f"{curl} --fail-with-body --silent --show-error")
    return f"{folder / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"


def shim(path: Path, command: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\nexec {command} \"$@\"\n")
    path.chmod(0o755)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
