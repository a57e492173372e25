"""Role expiry under MockClock: at a grant's expiresAt the role-expiry service
has the channel's actor end it, emitting `channel.moderator.remove` (for moderators) and
the badge push, once; grants that expired while no process ran end at start, once even
with two processes racing for them. Both backends."""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any

import trio
from trio.testing import MockClock

from tests.conftest import stored_user
from tests.http.chat_env import ChatEnv, chat_app
from tests.services.webhooks.test_delivery import _started, io_clock
from volthub.hub.clock import TrioClock, iso8601
from volthub.hub.components.roles import BADGES_CHANGED
from volthub.persistence import chat as chat_repo

__all__ = ["io_clock"]
ROLES = "/api/integrations/oauth/channel-roles"
HOUR = 3600
# Background services that poll wait a day, so MockClock's autojump reaches the expiries
# in few steps (each jump waits for the app to be idle for the autojump threshold).
QUIET = {
    "webhooks": {"poll_seconds": 86_400.0},
    "channel_roles": {"poll_seconds": 86_400.0},
    "channel_points": {"watch_interval_seconds": 86_400.0},
}


async def _until(envs: list[ChatEnv], found: Any, seconds: float) -> None:
    """Wait (in MockClock time) until `found()`, checked as each event reaches a bus: no
    polling loop, so the clock jumps straight to the next timer of the app."""
    changed = trio.Event()
    removers = [env.rt.bus.subscribe(lambda _: changed.set()) for env in envs]
    try:
        with trio.fail_after(seconds):
            while not found():
                await changed.wait()
                changed = trio.Event()
    finally:
        for remove in removers:
            remove()


async def test_grants_end_at_their_expiry_once(io_clock: MockClock, database_url: str) -> None:
    # The role-expiry service sleeps until the expiry itself, not every poll.
    app = chat_app(database_url, **QUIET)
    async with _started(app):
        env = ChatEnv(app)
        owner, member = await env.user(), await env.user()
        now = env.now_ms()
        for role, hours in (("moderator", 1), ("vip", 2)):
            expires = iso8601(now + hours * HOUR * 1000)
            body = {"roleType": role, "memberId": member.id, "expiresAt": expires}
            response = await env.client.post(ROLES, json=body, headers=owner.headers)
            assert response.status_code == 201, await response.get_data(as_text=True)

        await _until([env], lambda: len(env.named(BADGES_CHANGED)) == 3, 2 * HOUR)  # after the remove
        [removed] = env.named("channel.moderator.remove")
        assert removed.data["userId"] == member.id and removed.data["removedAt"] == iso8601(now + HOUR * 1000)
        assert env.now_ms() >= now + HOUR * 1000  # not before its time
        pushes = [e.data for e in env.named(BADGES_CHANGED) if e.data["userId"] == member.id]
        assert [p["badges"] for p in pushes] == [["moderator"], ["moderator", "vip"], ["vip"]]
        sent = await env.send(member, owner.id, "after the moderator expiry")
        assert sent.status_code in (200, 201)
        assert env.named("chat.message")[-1].data["isMod"] is False

        await _until([env], lambda: len(env.named(BADGES_CHANGED)) == 4, 2 * HOUR)
        assert env.named(BADGES_CHANGED)[-1].data["badges"] == []
        await trio.sleep(HOUR)  # nothing more fires
        assert len(env.named("channel.moderator.remove")) == 1 and len(env.named(BADGES_CHANGED)) == 4
        listed = await (await env.client.get(ROLES, headers=owner.headers)).get_json()
        assert listed["roles"] == []


async def test_grants_that_expired_while_down_end_at_start_once(io_clock: MockClock, database_url: str) -> None:
    clock = TrioClock()
    apps = [chat_app(database_url, clock=clock, **QUIET) for _ in range(2)]
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(_started(apps[0]))
        db = apps[0].extensions["volthub"].db
        owner, member = await stored_user(db), await stored_user(db)
        past = int(clock.now() * 1000) - 1000

        def expired(tx: Any) -> None:
            chat_repo.grant_role(tx, owner, member, "moderator", past - 1000, past)

        # Written behind the first process's back (its service sleeps for a day), as if
        # no process had been up at the expiry: the second one ends it as it starts.
        await db.write(expired)
        envs = [ChatEnv(apps[0])]
        await stack.enter_async_context(_started(apps[1]))
        envs.append(ChatEnv(apps[1]))
        await _until(envs, lambda: any(e.named("channel.moderator.remove") for e in envs), 60)
        # The first process looking too finds nothing left to end.
        assert await apps[0].extensions["volthub"].services.channel_roles.expire_due() == 0
        await trio.sleep(30)
        removed = {event.id for env in envs for event in env.named("channel.moderator.remove")}
        assert len(removed) == 1
        assert await db.read(lambda tx: chat_repo.roles_of(tx, owner, member, past - 2000)) == set()
