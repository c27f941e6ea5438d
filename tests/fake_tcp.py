"""A TCP proxy on 127.0.0.1 in front of a server (PostgreSQL, in the tests that use it): every
chunk of bytes is passed on `delay` seconds after it arrived, in order, each way, as a network
with that latency would; `pause()` closes every session and refuses new ones (the server is
unreachable) until `resume()`. It runs on the test's event loop when the code under test keeps
its round trips off that loop, or in a process of its own (`Process`) when the code may block it.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import sys
import time
from urllib.parse import urlsplit, urlunsplit


class DelayProxy:
    def __init__(self, target: tuple[str, int], delay: float = 0.0) -> None:
        self.target = target
        self.delay = delay
        self.port = 0
        self.sessions = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    def url(self, url: str) -> str:
        """`url` (host and port of `target`) sent through this proxy instead."""
        parts = urlsplit(url)
        auth = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
        return urlunsplit(parts._replace(netloc=f"{auth}127.0.0.1:{self.port}"))

    async def start(self) -> DelayProxy:
        self._server = await asyncio.start_server(self._session, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def pause(self) -> None:
        """Unreachable: listening stops and every open session is cut."""
        if self._server is not None:
            self._server.close()
            self._server = None
        for w in list(self._writers):
            w.close()
        if self._tasks:  # each ends as its connections close
            await asyncio.wait(set(self._tasks), timeout=2)

    async def resume(self) -> None:
        await self.start()  # the same port again

    async def _session(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.sessions += 1
        self._writers.add(writer)
        me = asyncio.current_task()
        assert me is not None
        self._tasks.add(me)  # type: ignore[arg-type]
        me.add_done_callback(self._tasks.discard)  # type: ignore[arg-type]
        try:
            up_r, up_w = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self._writers.add(up_w)
        pipes = [asyncio.create_task(self._pipe(reader, up_w)),
                 asyncio.create_task(self._pipe(up_r, writer))]
        try:
            await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for p in pipes:
                p.cancel()
            await asyncio.gather(*pipes, return_exceptions=True)
        for w in (writer, up_w):
            w.close()
            self._writers.discard(w)

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        """Bytes from src to dst, each chunk `delay` after it came (a queue keeps the order
        without holding the next chunk back behind the last one's wait)."""
        chunks: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def send() -> None:
            while True:
                at, data = await chunks.get()
                if not data:
                    return
                wait = at - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                dst.write(data)
                await dst.drain()

        sender = asyncio.create_task(send())
        try:
            while True:
                data = await src.read(65536)
                await chunks.put((time.monotonic() + self.delay, data))
                if not data:
                    break
            await sender
        except (ConnectionError, OSError):
            pass
        finally:
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, ConnectionError, OSError):
                await sender


class Process:
    """A DelayProxy in a process of its own: its delays keep going while the test's loop is held
    (what a test of blocking round trips must see), and it takes none of the test process's
    GIL. SIGUSR1 pauses it, SIGUSR2 resumes it."""

    def __init__(self, target: tuple[str, int], delay: float) -> None:
        self.target, self.delay = target, delay
        self.port = 0
        self._proc: subprocess.Popen[str] | None = None

    def url(self, url: str) -> str:
        return DelayProxy.url(self, url)  # type: ignore[arg-type]

    def pause(self) -> None:
        assert self._proc is not None
        self._proc.send_signal(signal.SIGUSR1)
        assert self._proc.stdout is not None and self._proc.stdout.readline().strip() == "paused"

    def resume(self) -> None:
        assert self._proc is not None
        self._proc.send_signal(signal.SIGUSR2)
        assert self._proc.stdout is not None and self._proc.stdout.readline().strip() == "resumed"

    def __enter__(self) -> Process:
        self._proc = subprocess.Popen(
            [sys.executable, __file__, self.target[0], str(self.target[1]), str(self.delay)],
            stdout=subprocess.PIPE, text=True)
        assert self._proc.stdout is not None
        self.port = int(self._proc.stdout.readline())
        return self

    def __exit__(self, *_: object) -> None:
        assert self._proc is not None
        self._proc.terminate()
        self._proc.wait(10)


async def _main(host: str, port: int, delay: float) -> None:
    proxy = await DelayProxy((host, port), delay).start()
    print(proxy.port, flush=True)
    loop = asyncio.get_running_loop()
    asks: asyncio.Queue[str] = asyncio.Queue()
    loop.add_signal_handler(signal.SIGUSR1, asks.put_nowait, "pause")
    loop.add_signal_handler(signal.SIGUSR2, asks.put_nowait, "resume")
    loop.add_signal_handler(signal.SIGTERM, asks.put_nowait, "stop")
    while (ask := await asks.get()) != "stop":
        await (proxy.pause() if ask == "pause" else proxy.resume())
        print("paused" if ask == "pause" else "resumed", flush=True)
    await proxy.pause()


if __name__ == "__main__":
    asyncio.run(_main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3])))
