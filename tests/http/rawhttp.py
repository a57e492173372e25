"""A raw-socket HTTP/1.1 client for connection tests: it hides nothing (no pool, no retry),
so a connection the server forgets to answer or to close shows up as exactly that."""

from __future__ import annotations

from dataclasses import dataclass

import trio


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes


class RawConnection:
    def __init__(self, sock: trio.socket.SocketType) -> None:
        self.sock = sock
        self.buffer = b""

    @classmethod
    async def open(cls, port: int) -> RawConnection:
        sock = trio.socket.socket()
        await sock.connect(("127.0.0.1", port))
        return cls(sock)

    async def send(self, data: bytes) -> None:
        await self.sock.send(data)

    async def _fill(self) -> bool:
        chunk = await self.sock.recv(65536)
        self.buffer += chunk
        return bool(chunk)

    async def response(self) -> RawResponse:
        """The next response (Content-Length bodies only, as every volthub JSON answer)."""
        while b"\r\n\r\n" not in self.buffer:
            if not await self._fill():
                raise EOFError(f"connection closed before a response: {self.buffer!r}")
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        while len(self.buffer) < length:
            if not await self._fill():
                raise EOFError("connection closed inside a body")
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return RawResponse(status, headers, body)

    async def closed_by_server(self) -> bool:
        """True once the server has closed (EOF or reset); waits for it."""
        try:
            while await self._fill():
                pass
        except OSError:
            pass
        return True

    def close(self) -> None:
        self.sock.close()


def request(
    method: str,
    path: str,
    *,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    version: str = "1.1",
) -> bytes:
    lines = [f"{method} {path} HTTP/{version}", "Host: 127.0.0.1"]
    fields = dict(headers or {})
    if body or method in ("POST", "PUT"):
        fields.setdefault("Content-Length", str(len(body)))
    lines += [f"{name}: {value}" for name, value in fields.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
