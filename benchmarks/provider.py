"""A webhook provider for the benchmarks that answers 200 at once and records every call.
Each answer names a message id of its own ({"id": "prov-N"}), as a real provider's does: notifyd
records it as the step's provider_ref, and on PostgreSQL a send's answer takes a lock on that id
(so a receipt about it and the answer see each other); one id for every message would make every
completion of every process wait for the one before.

Run: python benchmarks/provider.py PORT  (ladder.py starts it as a subprocess)
Raw asyncio protocol, no framework, so it takes as little of the shared CPU as it can. For each
POST it records the wall-clock arrival of the request's first byte (ns) and its Idempotency-Key.
Control: GET /_count answers the number recorded; POST /_dump with a file path as the body
writes "arrival_ns key" lines there and answers the count; POST /_reset forgets everything.
Loopback only.
"""

from __future__ import annotations

import asyncio
import sys
import time

records: list[tuple[int, str]] = []
MAX_HEAD = 65536


def sent(n: int) -> bytes:
    """The 200 naming message id prov-N."""
    body = b'{"id":"prov-%d"}' % n
    return (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
            + str(len(body)).encode() + b"\r\n\r\n" + body)


def reply(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body


class Provider(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.buf = b""
        self.started = 0  # arrival of the first byte of the request at the front of buf

    def data_received(self, data: bytes) -> None:
        now = time.time_ns()
        if not self.buf:
            self.started = now
        self.buf += data
        for _ in range(10_000):  # bounded: at most this many pipelined requests per chunk
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buf) > MAX_HEAD:
                    self.transport.close()
                return
            lines = self.buf[:end].split(b"\r\n")
            length, key = 0, ""
            for line in lines[1:]:
                name, _, value = line.partition(b":")
                name = name.strip().lower()
                if name == b"content-length":
                    length = int(value)
                elif name == b"idempotency-key":
                    key = value.strip().decode()
            if len(self.buf) < end + 4 + length:
                return
            body = self.buf[end + 4:end + 4 + length]
            self.buf = self.buf[end + 4 + length:]
            self.transport.write(self.answer(lines[0], key, body, self.started))
            self.started = now

    @staticmethod
    def answer(request_line: bytes, key: str, body: bytes, started: int) -> bytes:
        method, _, rest = request_line.partition(b" ")
        path = rest.partition(b" ")[0]
        if path == b"/_count":
            return reply(str(len(records)).encode())
        if path == b"/_dump":
            with open(body.decode(), "w") as f:
                f.writelines(f"{t} {k}\n" for t, k in records)
            return reply(str(len(records)).encode())
        if path == b"/_reset":
            records.clear()
            return reply(b"0")
        records.append((started, key))
        return sent(len(records))


async def main(port: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(Provider, "127.0.0.1", port, backlog=1024)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
