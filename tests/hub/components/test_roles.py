"""The roles component without a database: grants, removals, expiry, refusals, and the
events each causes (the platform event for moderators, the badge push for every role)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from tests.hub.components.fakes import CHANNEL, NOW, person
from volthub.hub.clock import iso8601
from volthub.hub.components import roles
from volthub.hub.components.base import Refused
from volthub.hub.components.chat_rules import Standing
from volthub.protocol import catalogue


class FakeRoleStore:
    """Grants in a dict; the guarded deletes answer as the database would (once)."""

    def __init__(self) -> None:
        self.people: dict[str, Standing] = {CHANNEL: person(CHANNEL, is_broadcaster=True)}
        self.grants: dict[tuple[str, str], tuple[int, int | None]] = {}  # (member, role) -> (at, expires)

    def add(self, user_id: str, **flags: Any) -> Standing:
        self.people[user_id] = person(user_id, **flags)
        return self.people[user_id]

    def standing(self, user_id: str) -> Standing | None:
        found = self.people.get(user_id)
        if found is None:
            return None
        held = {role for (member, role), (_, expires) in self.grants.items() if member == user_id}
        return replace(found, is_moderator="moderator" in held, is_vip="vip" in held)

    def user_id_of(self, username: str) -> str | None:
        return next((p.user_id for p in self.people.values() if p.username.lower() == username.lower()), None)

    def remove(self, member_id: str, role: str) -> bool:
        return self.grants.pop((member_id, role), None) is not None

    def expire_due(self, now_ms: int) -> list[roles.EndedRole]:
        due = [(key, expires) for key, (_, expires) in self.grants.items() if expires is not None and expires <= now_ms]
        for key, _ in due:
            del self.grants[key]
        return [roles.EndedRole(member, role, expires) for (member, role), expires in due]

    def apply(self, write: Any) -> None:
        assert isinstance(write, roles.SaveRole)
        self.grants[(write.member_id, write.role)] = (write.granted_at, write.expires_at)

    def run(self, outcome: Any) -> Any:
        for write in outcome.writes:
            self.apply(write)
        return outcome


def refusal(excinfo: pytest.ExceptionInfo[Refused]) -> tuple[int, str]:
    return excinfo.value.refusal.status, excinfo.value.refusal.code


def names(outcome: Any) -> list[str]:
    return [event.name for event in outcome.events]


def test_a_moderator_grant_emits_the_event_then_the_members_new_badges() -> None:
    store, component = FakeRoleStore(), roles.RolesComponent(CHANNEL)
    store.add("m", subscriber_months=3)
    outcome = store.run(component.handle(roles.GrantRole("moderator", username="USER_M"), NOW, store))
    assert names(outcome) == ["channel.moderator.add", roles.BADGES_CHANGED]
    added, badges = (event.data for event in outcome.events)
    assert added["userId"] == "m" and added["moderator"]["userId"] == CHANNEL
    assert badges == {
        "channelId": CHANNEL,
        "channelUsername": f"user_{CHANNEL}",
        "userId": "m",
        "badges": ["moderator", "subscriber"],
        "isMod": True,
        "isVip": False,
        "isSubscriber": True,
        "subscriberMonths": 3,
    }
    assert outcome.reply.as_api()["roleType"] == "moderator" and outcome.reply.as_api()["expiresAt"] is None
    assert store.standing("m").is_moderator and not outcome.shared_state_changed


def test_a_vip_grant_pushes_badges_but_emits_no_platform_event() -> None:
    store, component = FakeRoleStore(), roles.RolesComponent(CHANNEL)
    store.add("m")
    store.run(component.handle(roles.GrantRole("moderator", member_id="m"), NOW, store))
    outcome = store.run(component.handle(roles.GrantRole("vip", member_id="m", expires_at=NOW + 1), NOW, store))
    assert names(outcome) == [roles.BADGES_CHANGED]
    assert outcome.events[0].data["badges"] == ["moderator", "vip"]
    assert outcome.writes == [roles.SaveRole("m", "vip", NOW, NOW + 1)]


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (roles.GrantRole("broadcaster", member_id="m"), (400, "validation_error")),
        (roles.GrantRole("vip", member_id=CHANNEL), (400, "invalid_member")),
        (roles.GrantRole("vip", username=f"user_{CHANNEL}"), (400, "invalid_member")),
        (roles.GrantRole("vip", member_id="m", expires_at=NOW), (400, "validation_error")),
        (roles.GrantRole("vip", member_id="nobody"), (404, "not_found")),
        (roles.GrantRole("vip", username="nobody"), (404, "not_found")),
        (roles.RemoveRole("m", "vip"), (404, "not_found")),
        (roles.RemoveRole("m", "admin"), (400, "validation_error")),
    ],
)
def test_refusals_write_nothing(command: Any, expected: tuple[int, str]) -> None:
    store, component = FakeRoleStore(), roles.RolesComponent(CHANNEL)
    store.add("m")
    with pytest.raises(Refused) as excinfo:
        component.handle(command, NOW, store)
    assert refusal(excinfo) == expected and store.grants == {}


def test_an_unknown_member_is_named_in_the_details() -> None:
    store, component = FakeRoleStore(), roles.RolesComponent(CHANNEL)
    with pytest.raises(Refused) as excinfo:
        component.handle(roles.GrantRole("vip", username="ghost"), NOW, store)
    assert excinfo.value.refusal.details == {"member": "ghost"}


def test_removal_emits_remove_for_moderators_and_the_badges_left() -> None:
    store, component = FakeRoleStore(), roles.RolesComponent(CHANNEL)
    store.add("m")
    for role in ("moderator", "vip"):
        store.run(component.handle(roles.GrantRole(role, member_id="m"), NOW, store))
    outcome = component.handle(roles.RemoveRole("m", "moderator"), NOW + 5, store)
    assert names(outcome) == ["channel.moderator.remove", roles.BADGES_CHANGED]
    assert outcome.events[0].data["removedAt"] == iso8601(NOW + 5)
    assert outcome.events[1].data["badges"] == ["vip"] and outcome.events[1].data["isMod"] is False
    vip_gone = component.handle(roles.RemoveRole("m", "vip"), NOW + 6, store)
    assert names(vip_gone) == [roles.BADGES_CHANGED] and vip_gone.events[0].data["badges"] == []


def test_expiry_ends_each_due_grant_once_at_its_expiry() -> None:
    store, component = FakeRoleStore(), roles.RolesComponent(CHANNEL)
    store.add("a")
    store.add("b")
    store.run(component.handle(roles.GrantRole("moderator", member_id="a", expires_at=NOW + 10), NOW, store))
    store.run(component.handle(roles.GrantRole("vip", member_id="a", expires_at=NOW + 20), NOW, store))
    store.run(component.handle(roles.GrantRole("vip", member_id="b", expires_at=NOW + 99), NOW, store))
    assert component.is_idle() and component.next_deadline() is None  # expiry is the service's

    outcome = component.handle(roles.ExpireRoles(), NOW + 30, store)
    assert outcome.reply == 2
    assert names(outcome) == ["channel.moderator.remove", roles.BADGES_CHANGED]
    assert outcome.events[0].data["removedAt"] == iso8601(NOW + 10)  # at expiresAt, not when seen
    assert outcome.events[1].data["userId"] == "a" and outcome.events[1].data["badges"] == []
    again = component.handle(roles.ExpireRoles(), NOW + 30, store)  # another process got there first
    assert (again.reply, again.events) == (0, [])
    assert set(store.grants) == {("b", "vip")}


def test_the_badge_push_is_no_platform_event() -> None:
    """The fan-out, its resume buffers and the webhook outbox pass it by."""
    assert not catalogue.delivered_over_events_api(roles.BADGES_CHANGED)
    assert catalogue.subscribed_names(roles.BADGES_CHANGED) == ()
    assert roles.BADGES_CHANGED not in catalogue.BY_NAME
