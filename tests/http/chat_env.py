"""Chat test support: the app with rate limits off, on TrioClock, with its events captured.

Listeners: chat send is served on the main port (Quart) and on the Events API gateway (the
bots' fast path, volthub/http/chat_send.py). A `ChatEnv` made with `listener="gateway"`
posts every chat send through the gateway's real socket (`gateway_request`) and every other
request through the app's test client, so a test of the route runs unchanged on both.

Time: the app reads `TrioClock(start=CHAT_EPOCH)`, which follows Trio's clock. A test that
moves time takes pytest-trio's `mock_clock` fixture (pytest-trio installs only a clock the
test itself names) and calls `mock_clock.jump(seconds)`; the app's time jumps with it.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import h11
import orjson
import trio
from quart import Quart
from werkzeug.datastructures import Headers

from tests.conftest import RegisteredUser, insert_subscription, make_settings, register
from volthub.config import Settings
from volthub.hub.clock import Clock, TrioClock

# The app's wall time when a test starts: fixed, so timestamps read the same on every run.
CHAT_EPOCH = 1_800_000_000.0


def chat_test_settings(database_url: str, **sections: dict[str, Any]) -> Settings:
    """Rate limits off (when the key exists), so chat tests can send freely."""
    ratelimit = Settings.model_fields["ratelimit"].annotation
    if ratelimit is not None and "enabled" in getattr(ratelimit, "model_fields", {}):
        sections = {"ratelimit": {"enabled": False}, **sections}
    return make_settings(database_url, **sections)


def chat_app(database_url: str, clock: Clock | None = None, **sections: dict[str, Any]) -> Quart:
    """The app for chat tests; pass one `clock` to apps that must share a timeline."""
    from volthub.http.app import create_app

    return create_app(chat_test_settings(database_url, **sections), clock=clock or TrioClock(start=CHAT_EPOCH))


# The listeners that serve chat send: the main port (Quart) and the Events API gateway.
LISTENERS = ["main", "gateway"]


class GatewayResponse:
    """A gateway's answer, read like the test client's responses."""

    def __init__(self, status: int, headers: Headers, body: bytes) -> None:
        self.status_code = status
        self.headers = headers
        self.body = body

    async def get_json(self) -> Any:
        return orjson.loads(self.body)

    async def get_data(self, as_text: bool = False) -> Any:
        return self.body.decode() if as_text else self.body


async def gateway_request(
    base_url: str,
    method: str,
    path: str,
    *,
    json: Any = None,
    data: bytes | str | None = None,
    headers: dict[str, str] | None = None,
) -> GatewayResponse:
    """One request on a connection of its own (no pool between tests and clocks)."""
    address = urlsplit(base_url)
    body = orjson.dumps(json) if json is not None else (data.encode() if isinstance(data, str) else data or b"")
    fields = {"Host": address.netloc, "Content-Length": str(len(body)), "Connection": "close"}
    if json is not None:
        fields["Content-Type"] = "application/json"
    fields.update(headers or {})
    http = h11.Connection(h11.CLIENT)
    wire = http.send(h11.Request(method=method, target=path, headers=list(fields.items())))
    wire += http.send(h11.Data(data=body)) if body else b""
    wire += http.send(h11.EndOfMessage())
    stream = await trio.open_tcp_stream(address.hostname or "127.0.0.1", address.port or 80)
    async with stream:
        await stream.send_all(wire)
        answer: Any = None
        chunks: list[bytes] = []
        while True:
            event = http.next_event()
            if event is h11.NEED_DATA:
                http.receive_data(await stream.receive_some(65536))
            elif isinstance(event, h11.Response):
                answer = event
            elif isinstance(event, h11.Data):
                chunks.append(bytes(event.data))
            elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                break
    assert answer is not None, "the gateway closed without an answer"
    found = Headers([(name.decode("latin-1"), value.decode("latin-1")) for name, value in answer.headers])
    return GatewayResponse(answer.status_code, found, b"".join(chunks))


def is_chat_send(path: str) -> bool:
    from volthub.http.chat_send import matches

    return matches(path.partition("?")[0])


class _SettlingClient:
    """The app's test client, which after each request waits until the events it caused
    reached the bus's listeners: on PostgreSQL they come back through the relay's NOTIFY.
    With `listener="gateway"` chat sends go to the gateway's socket instead."""

    def __init__(self, app: Any, listener: str = "main") -> None:
        self._client = app.test_client()
        self._app = app
        self.listener = listener

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    async def _settled(self, response: Any) -> Any:
        caught_up = getattr(self._app.extensions["volthub"].bus, "caught_up", None)
        if caught_up is not None:  # no timeout: under MockClock it would fire at once
            await caught_up()
        return response

    async def _send(self, method: str, *args: Any, **kwargs: Any) -> Any:
        # An event published before the relay's LISTEN is in effect reaches this process only
        # as history, not as a delivery to the test's listener. The app waits for the relay at
        # start, but for at most 10 s of Trio's clock, which an autojumping MockClock passes
        # at once while the LISTEN connection opens in its thread: wait here without a bound.
        wait_connected = getattr(self._app.extensions["volthub"].bus, "wait_connected", None)
        if wait_connected is not None:
            await wait_connected()
        if self.listener == "gateway" and method == "post" and is_chat_send(args[0]):
            gateway = self._app.extensions["volthub"].gateway
            return await self._settled(await gateway_request(gateway.url, "POST", *args, **kwargs))
        return await self._settled(await getattr(self._client, method)(*args, **kwargs))

    async def get(self, *args: Any, **kwargs: Any) -> Any:
        return await self._send("get", *args, **kwargs)

    async def post(self, *args: Any, **kwargs: Any) -> Any:
        return await self._send("post", *args, **kwargs)

    async def put(self, *args: Any, **kwargs: Any) -> Any:
        return await self._send("put", *args, **kwargs)

    async def patch(self, *args: Any, **kwargs: Any) -> Any:
        return await self._send("patch", *args, **kwargs)

    async def delete(self, *args: Any, **kwargs: Any) -> Any:
        return await self._send("delete", *args, **kwargs)


class ChatEnv:
    def __init__(self, app: Any, listener: str = "main") -> None:
        self.app = app
        self.listener = listener
        self.client = _SettlingClient(app, listener)
        self.events: list[Any] = []
        self.rt.bus.subscribe(self.events.append)

    @property
    def rt(self) -> Any:
        return self.app.extensions["volthub"]

    @property
    def clock(self) -> Clock:
        """The app's clock (read it; move it with the test's `mock_clock`)."""
        clock: Clock = self.rt.clock
        return clock

    def named(self, name: str) -> list[Any]:
        return [event for event in self.events if event.name == name]

    async def user(self, username: str | None = None) -> RegisteredUser:
        return await register(self.client, username)

    async def users(self, count: int) -> list[RegisteredUser]:
        """`count` new users, registered one after another."""
        return [await self.user() for _ in range(count)]

    async def send(self, user: RegisteredUser, channel_id: str, message: str = "hello", **body: Any) -> Any:
        return await self.client.post(
            f"/api/integrations/oauth/chat/channels/{channel_id}/messages",
            json={"message": message, **body},
            headers=user.headers,
        )

    async def moderate(self, user: RegisteredUser, channel_id: str, **body: Any) -> Any:
        return await self.client.post(
            f"/api/integrations/oauth/chat/channels/{channel_id}/moderate", json=body, headers=user.headers
        )

    async def patch_settings(self, user: RegisteredUser, **body: Any) -> Any:
        return await self.client.patch("/api/integrations/oauth/chat/settings", json=body, headers=user.headers)

    async def follow(self, user: RegisteredUser, channel_id: str) -> None:
        response = await self.client.post(f"/api/users/follow/{channel_id}", headers=user.headers)
        assert response.status_code == 200, await response.get_data(as_text=True)

    def now_ms(self) -> int:
        return int(self.clock.now() * 1000)

    async def grant(self, channel_id: str, user_id: str, role: str, expires_at: int | None = None) -> None:
        from volthub.persistence import chat as chat_repo

        now = self.now_ms()
        await self.rt.db.write(lambda tx: chat_repo.grant_role(tx, channel_id, user_id, role, now, expires_at))

    async def subscribe(self, channel_id: str, user_id: str, months: int = 1, days: int = 30) -> None:
        now = self.now_ms()
        await self.rt.db.write(
            lambda tx: insert_subscription(
                tx, channel_id, user_id, started_at=now, expires_at=now + days * 86_400_000, months=months
            )
        )
