"""Webhook test support: an HTTPS receiver and a fake DNS resolver.

Used by tests/services/webhooks/ and by the HTTP tests of the webhook routes (tests/http/),
so tests/conftest.py loads this module as a pytest plugin: its fixtures (`receiver_tls`,
`webhook_receiver`) are available everywhere; import the helpers from here.
"""

from __future__ import annotations

import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.event_payloads import note_delivery
from volthub.http.events.asgi import answer_lifespan


@dataclass
class ReceivedDelivery:
    at: float  # receiver clock, epoch seconds
    headers: dict[str, str]  # lower-cased names
    body: bytes
    verified: bool
    problem: str | None


class WebhookReceiver:
    """A TLS endpoint (trustme certificate for localhost and 127.0.0.1, on Hypercorn) that
    verifies every delivery with `volthub.protocol.webhooks.verify` against `secret` and answers
    with `respond(delivery) -> (status, headers)` (which may sleep, to hang)."""

    def __init__(self, ca_file: Path, port: int, now: Any) -> None:
        self.ca_file = ca_file
        self.port = port
        self.now = now
        self.secret: str | list[str] | None = None
        self.received: list[ReceivedDelivery] = []
        self._changed = trio.Event()
        self.respond: Any = lambda delivery: (204, {})

    def url(self, host: str = "127.0.0.1", path: str = "/hooks") -> str:
        return f"https://{host}:{self.port}{path}"

    async def wait_for(self, count: int) -> list[ReceivedDelivery]:
        while len(self.received) < count:
            await self._changed.wait()
        return self.received

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await answer_lifespan(receive, send)
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        delivery = ReceivedDelivery(self.now(), headers, body, False, None)
        note_delivery(headers, body)
        from volthub.protocol.webhooks import WebhookVerificationError, verify

        try:
            verify(self.secret or "unset", headers, body, now=delivery.at)
            delivery.verified = True
        except WebhookVerificationError as exc:
            delivery.problem = str(exc)
        self.received.append(delivery)
        self._changed.set()
        self._changed = trio.Event()
        status, extra = await _maybe_await(self.respond(delivery))
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(k.encode(), str(v).encode()) for k, v in extra.items()],
            }
        )
        await send({"type": "http.response.body", "body": b""})


async def _maybe_await(value: Any) -> Any:
    return await value if hasattr(value, "__await__") else value


@pytest.fixture
def receiver_tls(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(CA file, certificate chain, key) for a receiver on localhost and 127.0.0.1."""
    import trustme

    ca = trustme.CA()
    leaf = ca.issue_cert("localhost", "127.0.0.1")
    ca_file, cert_file, key_file = tmp_path / "ca.pem", tmp_path / "cert.pem", tmp_path / "key.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    leaf.cert_chain_pems[0].write_to_path(str(cert_file))
    for extra in leaf.cert_chain_pems[1:]:
        extra.write_to_path(str(cert_file), append=True)
    leaf.private_key_pem.write_to_path(str(key_file))
    return ca_file, cert_file, key_file


async def start_receiver(
    nursery: trio.Nursery, tls: tuple[Path, Path, Path], now: Any = time.time, port: int = 0
) -> tuple[WebhookReceiver, trio.Event]:
    """Serve a WebhookReceiver in `nursery`; set the returned event to stop it."""
    from hypercorn.config import Config
    from hypercorn.trio import serve

    ca_file, cert_file, key_file = tls
    receiver = WebhookReceiver(ca_file, port, now)
    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.certfile, config.keyfile = str(cert_file), str(key_file)
    config.accesslog = None
    config.graceful_timeout = 0.5
    stop = trio.Event()
    binds = await nursery.start(
        lambda task_status: serve(receiver, config, shutdown_trigger=stop.wait, task_status=task_status)
    )
    receiver.port = int(binds[0].rsplit(":", 1)[1])
    return receiver, stop


@pytest.fixture
async def webhook_receiver(
    nursery: trio.Nursery, receiver_tls: tuple[Path, Path, Path]
) -> AsyncIterator[WebhookReceiver]:
    receiver, stop = await start_receiver(nursery, receiver_tls)
    yield receiver
    stop.set()


class FakeResolver:
    """getaddrinfo stand-in: name -> addresses, so tests never touch real DNS."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        self.asked.append(host)
        if host not in self.table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [
            (socket.AF_INET6 if ":" in ip else socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port))
            for ip in self.table[host]
        ]
