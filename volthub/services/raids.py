"""Raids (the `channel.raid` event): a live broadcaster sends their viewers to another
channel.

One write: `channel.raid` on the target channel (`direction: incoming`) and on the raider's
channel (`direction: outgoing`), both from the catalogue's `channel_raid` builder (the one the
sandbox uses), and a `raid.incoming` notification for the target's owner, in one transaction.
The viewer count is the raider's presence (signed-in viewers plus anonymous ones) when the
raid starts. Moving viewers' players to the target is the clients' part (they receive the
outgoing event).

Abuse budget: after a raid, the raider may not raid again for `[raids]
raider_cooldown_seconds` and the target may not be raided again for
`target_cooldown_seconds` (RaidCooldown with the seconds left); the cooldowns are claimed in
the raid's transaction (a refused raid starts none) and shared by every process.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from volthub.hub.clock import iso8601
from volthub.hub.publisher import Emitter, EventPublisher
from volthub.persistence import Tx
from volthub.persistence import chat as chat_repo
from volthub.persistence import streams as streams_repo
from volthub.persistence import users as users_repo
from volthub.protocol import catalogue
from volthub.services.chat import Presence, presence_snapshot
from volthub.services.notifications import notify

__all__ = ["Cooldowns", "Raid", "RaidBanned", "RaidCooldown", "RaidNotLive", "RaidTargetNotFound", "SelfRaid", "raid"]


class RaidNotLive(Exception):
    """Only a live channel can raid."""


class RaidTargetNotFound(LookupError):
    """No channel has that username; `str(error)` is the username."""


class SelfRaid(ValueError):
    """A channel cannot raid itself."""


class RaidBanned(Exception):
    """The target channel has banned (or timed out) the raider: no raid into it."""


class RaidCooldown(Exception):
    """Too soon after the raider's last raid (`which == "raider"`) or the target's last
    incoming one (`"target"`)."""

    def __init__(self, which: str, retry_after_seconds: int) -> None:
        super().__init__(which)
        self.which = which
        self.retry_after_seconds = retry_after_seconds


@dataclass(frozen=True)
class Cooldowns:
    raider_seconds: float = 0.0
    target_seconds: float = 0.0


@dataclass(frozen=True)
class Raid:
    target_id: str
    target_username: str
    viewers: int
    raided_at: str


async def raid(
    publisher: EventPublisher,
    presence: Presence | None,
    raider_id: str,
    target_username: str,
    cooldowns: Cooldowns = Cooldowns(),
) -> Raid:
    """Raid `target_username` from the live channel `raider_id`; refusals write nothing."""
    user_ids, anonymous = await presence_snapshot(presence, raider_id)
    viewers = len(set(user_ids)) + anonymous

    def change(tx: Tx, emitter: Emitter) -> Raid:
        raider = users_repo.get_by_id(tx, raider_id)
        target = users_repo.get_by_username_insensitive(tx, target_username)
        if raider is None or target is None:
            raise RaidTargetNotFound(target_username)
        if target.id == raider.id:
            raise SelfRaid()
        if streams_repo.open_stream(tx, raider.id) is None:
            raise RaidNotLive()
        if chat_repo.active_ban(tx, target.id, raider.id, emitter.now_ms) is not None:
            raise RaidBanned()
        _cool_down(tx, "raider", raider.id, cooldowns.raider_seconds, emitter.now_ms)
        _cool_down(tx, "target", target.id, cooldowns.target_seconds, emitter.now_ms)
        at = iso8601(emitter.now_ms)
        who = catalogue.Person.of(raider)
        for channel_id, direction in ((target.id, "incoming"), (raider.id, "outgoing")):
            data = catalogue.channel_raid(
                raider=who,
                target_id=target.id,
                target_username=target.username,
                viewers=viewers,
                raided_at=at,
                direction=direction,
            )
            emitter.emit(channel_id, "channel.raid", data)
        notify(
            tx,
            target.id,
            "raid.incoming",
            "Incoming raid",
            f"{raider.display_name} is raiding you with {viewers} viewers",
            {**who.fields(), "viewers": viewers, "channelId": target.id},
            emitter.now_ms,
        )
        return Raid(target_id=target.id, target_username=target.username, viewers=viewers, raided_at=at)

    return await publisher.write(change)


def _cool_down(tx: Tx, which: str, channel_id: str, seconds: float, now_ms: int) -> None:
    if seconds <= 0:
        return
    running_until = streams_repo.claim_raid_cooldown(
        tx, f"{which}:{channel_id}", now_ms, now_ms + round(seconds * 1000)
    )
    if running_until is not None:
        raise RaidCooldown(which, max(1, math.ceil((running_until - now_ms) / 1000)))
