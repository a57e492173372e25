"""A role change reaches the member's open Socket.IO connection at once: the
official socket.io-client, connected as the member and watching the channel,
gets `channel:badges` after each grant and removal without reconnecting, and the member's
next chat message carries the new flags. On PostgreSQL the socket is on one process and
the grants go through another, so the push crosses processes through the relay."""

from __future__ import annotations

import subprocess
from typing import Any

import httpx
import orjson
import pytest
import trio

from tests.conftest import make_settings, register_live, serve_app
from tests.http.oauth.tokens import issue_oauth_token
from tests.js_client import JS_DIR, node_with_official_client
from tests.redis_support import Broker, broker
from volthub.http.events.registry import ConnectionRegistry

__all__ = ["broker"]  # fixture

ROLES = "/api/integrations/oauth/channel-roles"


async def _read_until(process: Any, lines: bytearray, marker: bytes) -> None:
    with trio.fail_after(30):
        while marker not in lines:
            chunk = await process.stdout.receive_some()
            if not chunk:
                raise AssertionError(f"the client ended early: {lines.decode()[-2000:]}")
            lines += chunk


async def test_grants_and_removals_push_badges_to_the_members_open_socket(
    database_url: str, nursery: trio.Nursery, broker: Broker
) -> None:
    if not database_url.startswith("postgresql") and broker.name != "postgres":
        pytest.skip("SQLite keeps the in-process bus: no broker")
    node = node_with_official_client()
    cluster = broker.section if database_url.startswith("postgresql") else {}
    settings = make_settings(database_url, ratelimit={"enabled": False}, cluster=cluster)
    stop = trio.Event()
    sockets_server = await serve_app(nursery, settings, stop)
    # On PostgreSQL a second process of the same deployment takes the writes.
    writes_server = sockets_server
    if database_url.startswith("postgresql"):
        writes_server = await serve_app(nursery, settings, stop)
    owner, member = await register_live(writes_server.url), await register_live(writes_server.url)
    roles_token = await issue_oauth_token(writes_server.app, owner.id, "channel:roles:write")
    lines = bytearray()
    try:
        async with httpx.AsyncClient(base_url=writes_server.url, timeout=10) as http:
            process = await nursery.start(
                lambda task_status: trio.run_process(
                    [node, "badges_client.mjs", sockets_server.events_url, member.token, owner.id, "3"],
                    cwd=JS_DIR,
                    stdout=subprocess.PIPE,
                    check=False,
                    task_status=task_status,
                )
            )
            await _read_until(process, lines, b"ready")
            headers = {"Authorization": f"Bearer {roles_token}"}

            async def step(method: str, path: str, expected: int, **body: Any) -> None:
                response = await http.request(method, path, headers=headers, json=body or None)
                assert response.status_code == expected, response.text

            async def chat(text: str) -> None:
                path = f"/api/integrations/oauth/chat/channels/{owner.id}/messages"
                response = await http.post(path, headers=member.headers, json={"message": text})
                assert response.status_code in (200, 201), response.text

            await step("POST", ROLES, 201, roleType="moderator", username=member.username)
            await chat("as moderator")
            await step("POST", ROLES, 201, roleType="vip", memberId=member.id)
            await chat("as moderator and vip")
            await step("DELETE", f"{ROLES}/{member.id}/moderator", 204)
            await chat("as vip")
            await _read_until(process, lines, b"}\n")
            with trio.fail_after(30):
                await process.wait()
    finally:
        stop.set()
    assert process.returncode == 0, lines.decode()[-2000:]
    seen = orjson.loads(lines.decode().strip().splitlines()[-1])
    assert seen["connects"] == 1 and len(set(seen["socketIds"])) == 1  # never reconnected
    assert [(b["badges"], b["isMod"], b["isVip"]) for b in seen["badges"]] == [
        (["moderator"], True, False),
        (["moderator", "vip"], True, True),
        (["vip"], False, True),
    ]
    first = seen["badges"][0]
    assert (first["channelId"], first["channelUsername"], first["userId"]) == (owner.id, owner.username, member.id)
    assert first["isSubscriber"] is False and "subscriberMonths" not in first
    by_text = {m["message"]: m for m in seen["messages"]}
    assert (by_text["as moderator"]["isMod"], by_text["as moderator"]["badges"]) == (True, ["moderator"])
    assert by_text["as moderator and vip"]["badges"] == ["moderator", "vip"]
    assert (by_text["as vip"]["isMod"], by_text["as vip"]["isVip"]) == (False, True)


class _Connection:
    def __init__(self) -> None:
        self.pushed: list[tuple[str, dict[str, Any]]] = []

    def end(self, code: str, reason: str) -> None:
        raise AssertionError("not ended")

    def push(self, name: str, data: dict[str, Any]) -> None:
        self.pushed.append((name, data))


class _Stream:
    """An SSE stream: closable, told nothing else."""

    def end(self, code: str, reason: str) -> None:
        raise AssertionError("not ended")


def test_badges_go_to_every_connection_of_that_member_and_no_one_else() -> None:
    registry = ConnectionRegistry()
    first_party, via_app, other_user, anonymous = _Connection(), _Connection(), _Connection(), _Connection()
    registry.add(first_party, "member", None)
    key = registry.add(via_app, "member", "app")
    registry.add(_Stream(), "member", "app")
    registry.add(other_user, "someone", None)
    registry.add(anonymous, None, None)
    data = {"userId": "member", "badges": ["vip"]}
    assert registry.push_badges(data) == 2
    assert first_party.pushed == via_app.pushed == [("channel:badges", data)]
    assert other_user.pushed == anonymous.pushed == []
    registry.discard(via_app, key)
    assert registry.push_badges(data) == 1
    assert len(registry.of_user("member")) == 2  # the socket and the stream
    assert registry.push_badges({"badges": []}) == 0


def test_the_registry_tells_when_a_member_first_connects_and_last_leaves() -> None:
    told: list[tuple[str, bool]] = []
    registry = ConnectionRegistry(interest=lambda user_id, wanted: told.append((user_id, wanted)))
    first, second = _Connection(), _Stream()
    first_key = registry.add(first, "member", None)
    second_key = registry.add(second, "member", "app")
    registry.add(_Connection(), None, None)  # anonymous: nobody to follow
    assert told == [("member", True)]
    registry.discard(first, first_key)
    assert told == [("member", True)]
    registry.discard(second, second_key)
    assert told == [("member", True), ("member", False)]
