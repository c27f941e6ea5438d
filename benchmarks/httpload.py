"""A small keep-alive HTTP/1.1 load generator for the benchmarks: raw asyncio streams, no client
library, so the client spends as little of the shared CPU as it can."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


class Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.closing = False  # the last answer said Connection: close

    @classmethod
    async def open(cls, host: str, port: int) -> Conn:
        return cls(*await asyncio.open_connection(host, port))

    async def request(self, raw: bytes) -> tuple[int, bytes]:
        self.writer.write(raw)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        length = 0
        for line in head.split(b"\r\n"):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
            elif line.lower() == b"connection: close":
                self.closing = True
        body = await self.reader.readexactly(length) if length else b""
        return status, body

    def close(self) -> None:
        self.writer.close()


def post(path: str, body: bytes, headers: dict[str, str]) -> bytes:
    head = f"POST {path} HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    head += f"Content-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


async def closed_loop(host: str, port: int, clients: int, total: int,
                      make: Callable[[int], bytes]) -> tuple[float, list[tuple[int, bytes]]]:
    """`clients` connections each sending back to back until `total` requests are answered."""
    conns = [await Conn.open(host, port) for _ in range(clients)]
    results: list[tuple[int, bytes]] = []
    counter = iter(range(total))

    async def worker(conn: Conn) -> None:
        for i in counter:
            results.append(await conn.request(make(i)))

    start = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in conns))
    elapsed = time.perf_counter() - start
    for c in conns:
        c.close()
    return len(results) / elapsed, results


async def open_loop(host: str, port: int, rate: float, seconds: float,
                    make: Callable[[int], bytes], pool: int = 32) -> list[float]:
    """Requests started on a fixed schedule (not when the last one ends); latencies in ms."""
    conns = asyncio.Queue[Conn]()
    for _ in range(pool):
        conns.put_nowait(await Conn.open(host, port))
    latencies: list[float] = []
    tasks = []

    async def one(i: int) -> None:
        began = time.perf_counter()  # includes waiting for a free connection
        conn = await conns.get()
        await conn.request(make(i))
        latencies.append((time.perf_counter() - began) * 1000)
        conns.put_nowait(conn)

    start = time.perf_counter()
    for i in range(int(rate * seconds)):
        due = start + i / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(i)))
    await asyncio.gather(*tasks)
    while not conns.empty():
        conns.get_nowait().close()
    return latencies


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]
