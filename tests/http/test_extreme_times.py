"""Extreme times: a time input past its documented maximum is refused (400 naming the
field) before anything is written, and stored times far off never break a read."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests.http.chat_env import ChatEnv
from volthub.hub import clock
from volthub.hub.components import roles

ROLES = "/api/integrations/oauth/channel-roles"


async def test_an_expiry_past_the_maximum_is_refused_and_nothing_is_granted(backend_chat_env: ChatEnv) -> None:
    env = backend_chat_env
    owner, member = await env.user(), await env.user()
    now = datetime.fromtimestamp(env.clock.now(), tz=UTC)
    too_far = (now + timedelta(days=roles.EXPIRY_MAX_DAYS + 1)).isoformat()
    for expires_at in ("9999-12-31T23:59:59-12:00", "9999-12-31T23:59:59Z", too_far):
        response = await env.client.post(
            ROLES, json={"roleType": "moderator", "memberId": member.id, "expiresAt": expires_at}, headers=owner.headers
        )
        body = await response.get_json()
        assert response.status_code == 400, body
        assert body["error"] == "validation_error" and body["details"]["field"] == "expiresAt"
    listed = await env.client.get(ROLES, headers=owner.headers)
    assert listed.status_code == 200 and (await listed.get_json())["roles"] == []
    assert env.named("channel.moderator.add") == []

    within = (now + timedelta(days=roles.EXPIRY_MAX_DAYS - 1)).isoformat()
    granted = await env.client.post(
        ROLES, json={"roleType": "vip", "memberId": member.id, "expiresAt": within}, headers=owner.headers
    )
    assert granted.status_code == 201, await granted.get_data(as_text=True)


async def test_a_stored_expiry_beyond_the_calendar_still_lists(backend_chat_env: ChatEnv) -> None:
    env = backend_chat_env
    owner, member = await env.user(), await env.user()
    await env.grant(owner.id, member.id, "vip", expires_at=253_402_300_799_000 + 43_200_000)  # year 10000
    listed = await env.client.get(ROLES, headers=owner.headers)
    assert listed.status_code == 200, await listed.get_data(as_text=True)
    [role] = (await listed.get_json())["roles"]
    assert role["expiresAt"] == "9999-12-31T23:59:59.999Z"


def test_iso8601_saturates_at_the_ends_of_the_calendar() -> None:
    assert clock.iso8601(10**18) == "9999-12-31T23:59:59.999Z"
    assert clock.iso8601(-(10**18)) == "0001-01-01T00:00:00.000Z"
    assert clock.iso8601(1_800_000_000_123) == "2027-01-15T08:00:00.123Z"
