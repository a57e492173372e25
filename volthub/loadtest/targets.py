"""Who is under test and how to drive it: volthub itself or a reference broadcast server.

A target knows how to provision channels (volthub: register users through the API, one
per channel, and use each one's token; references: invent room names, no auth) and how
to publish one chat message into a channel (volthub's chat send route, or the reference
servers' POST /publish). Clients connect the same way to all of them: the token goes in
`auth.token` and names the channel the socket hears.
"""

from __future__ import annotations

import ipaddress
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
import trio

TARGETS = ("volthub", "volthub-gateway", "python-socketio", "node")
# volthub-gateway: the same server with the Events API WebSocket on its own listener
# (`[events] gateway_port`), where the chat messages are posted too (the route's fast
# path, the port bots post to); the rest of REST stays on the main port.
VOLTHUB_TARGETS = ("volthub", "volthub-gateway")
PASSWORD = "loadtest password 123"


class RemoteTargetRefused(ValueError):
    """A URL that is not on this machine, given without --allow-remote."""


class TargetUnreachable(RuntimeError):
    """The server under test cannot be reached or does not answer as one (one line: which
    URL, and why)."""


async def reachable(*urls: str, timeout: float = 5.0) -> None:
    """A TCP connection to each URL's host and port opens, or TargetUnreachable."""
    for url in dict.fromkeys(urls):
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            with trio.fail_after(timeout):
                stream = await trio.open_tcp_stream(parts.hostname or "", port)
        except trio.TooSlowError:
            raise TargetUnreachable(f"cannot reach {url}: no answer within {timeout:g}s") from None
        except OSError as exc:
            raise TargetUnreachable(f"cannot reach {url}: {exc.strerror or exc}") from None
        await stream.aclose()


def check_url(url: str, allow_remote: bool = False) -> tuple[str, int]:
    """(host, port) of an http:// URL on loopback; anything else needs `allow_remote`.

    Only literal loopback addresses and `localhost` count: a name that merely resolves to
    127.0.0.1 today is refused, so a typo cannot aim a load test at another machine."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"--url must be http:// or https://, not {url!r}")
    host = parts.hostname
    if not host:
        raise ValueError(f"--url has no host: {url!r}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    if allow_remote or is_loopback(host):
        return host, port
    raise RemoteTargetRefused(
        f"refusing to load-test {host}: not a loopback address (pass --allow-remote to aim at another machine)"
    )


def is_loopback(host: str) -> bool:
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Channel:
    index: int
    id: str  # the channel id (volthub: the owner's user id; references: a room name)
    token: str  # what a client sends in auth.token (and a sender as its Bearer token)


class Target:
    name = "base"
    supports_sse = False

    def __init__(self, base_url: str, socket_url: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        # Where Socket.IO clients connect; the REST base unless the sockets have a port of their own.
        self.socket_url = (socket_url or base_url).rstrip("/")

    async def provision(self, http: httpx.AsyncClient, count: int, run_tag: str) -> list[Channel]:
        raise NotImplementedError

    def publish(self, channel: Channel, text: str) -> tuple[str, dict[str, Any], dict[str, str]]:
        """(URL, JSON body, headers) of the request that posts `text` into `channel`."""
        raise NotImplementedError


class VolthubTarget(Target):
    name = "volthub"
    supports_sse = True

    def __init__(self, base_url: str, socket_url: str | None = None, name: str = "volthub") -> None:
        super().__init__(base_url, socket_url)
        self.name = name

    async def provision(self, http: httpx.AsyncClient, count: int, run_tag: str) -> list[Channel]:
        """One registered user per channel: a user's id is its channel, and its
        first-party token both connects sockets (auto-subscribed to that channel) and
        posts in it."""
        channels: list[Channel | None] = [None] * count
        limiter = trio.CapacityLimiter(8)

        async def register(index: int) -> None:
            async with limiter:
                username = f"lt_{run_tag}_{index}"
                response = await http.post(
                    f"{self.base_url}/api/auth/register", json={"username": username, "password": PASSWORD}
                )
                if response.status_code != 201:
                    raise TargetUnreachable(
                        f"{self.base_url}: registering {username} was answered HTTP {response.status_code} "
                        f"{' '.join(response.text.split())[:160]}"
                    )
                body = response.json()
                channels[index] = Channel(index, body["user"]["id"], body["token"])

        async with trio.open_nursery() as nursery:
            for index in range(count):
                nursery.start_soon(register, index)
        return [channel for channel in channels if channel is not None]

    def publish(self, channel: Channel, text: str) -> tuple[str, dict[str, Any], dict[str, str]]:
        # Where the sockets connect: the gateway's port serves chat send as well, for less
        # per request than the main port (and is where a bot that posts a lot posts).
        return (
            f"{self.socket_url}/api/integrations/oauth/chat/channels/{channel.id}/messages",
            {"message": text},
            {"Authorization": f"Bearer {channel.token}"},
        )


class ReferenceTarget(Target):
    """bench/reference_python.py and bench/reference_node/server.js: no auth, no store."""

    def __init__(self, base_url: str, name: str) -> None:
        super().__init__(base_url)
        self.name = name

    async def provision(self, http: httpx.AsyncClient, count: int, run_tag: str) -> list[Channel]:
        return [Channel(index, f"room_{run_tag}_{index}", f"room_{run_tag}_{index}") for index in range(count)]

    def publish(self, channel: Channel, text: str) -> tuple[str, dict[str, Any], dict[str, str]]:
        return f"{self.base_url}/publish", {"channel": channel.id, "message": text}, {}


def make_target(name: str, base_url: str, socket_url: str | None = None) -> Target:
    """`socket_url`: where Socket.IO clients connect when not at `base_url` (the gateway)."""
    if name in VOLTHUB_TARGETS:
        return VolthubTarget(base_url, socket_url, name)
    if name in TARGETS:
        return ReferenceTarget(base_url, name)
    raise ValueError(f"unknown target {name!r} (one of {', '.join(TARGETS)})")


def new_run_tag() -> str:
    return secrets.token_hex(3)
