"""Goals and subathon timers move by themselves: platform events become actor commands.

`InteractiveFeed` listens on the broker (hub/broker.py) for follows, subscriptions, gifts, Volts
and a stream going live, and hands the channel's actor the matching goal and timer
commands. The listener only queues (`send_nowait`); one task turns the queue
into commands. Each command carries the event's id and the actor counts an event once
(`interactive_counted_events`), so an event relayed to several processes sharing one
database, or seen twice, moves nothing twice. Sandbox test events move nothing.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import trio

from volthub.hub.components import goals, timers
from volthub.hub.publisher import Bus

if TYPE_CHECKING:
    from volthub.hub.publisher import Event
    from volthub.hub.registry import ActorRegistry

log = logging.getLogger(__name__)

WATCHED = ("channel.follow", "channel.subscribe", "channel.subscription.gift", "channel.volts", "stream.online")


def _amount(data: dict[str, Any], key: str) -> int:
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def commands_for(event: Event) -> list[Any]:
    """The goal and timer commands one platform event causes (pure)."""
    if event.is_test or event.data.get("isTest") or event.name not in WATCHED:
        return []
    data = event.data
    if event.name == "stream.online":
        return [goals.StreamStarted(event.id)]
    if event.name == "channel.follow":
        return [goals.CountForGoals(event.id, "followers", 1)]
    if event.name == "channel.subscribe":
        if data.get("isGift"):  # counted through its channel.subscription.gift
            return []
        return [goals.CountForGoals(event.id, "subscriptions", 1), timers.CountForTimers(event.id, "subscription", 1)]
    if event.name == "channel.subscription.gift":
        quantity = _amount(data, "quantity")
        return [
            goals.CountForGoals(event.id, "subscriptions", quantity),
            timers.CountForTimers(event.id, "gift", quantity),
        ]
    amount = _amount(data, "amount")  # channel.volts
    return [goals.CountForGoals(event.id, "volts", amount), timers.CountForTimers(event.id, "volts", amount)]


class InteractiveFeed:
    def __init__(self, bus: Bus, registry: ActorRegistry, queue_size: int = 10_000) -> None:
        self._bus = bus
        self._registry = registry
        self._queue_size = queue_size

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        send, receive = trio.open_memory_channel[tuple[str, Any]](self._queue_size)

        def listen(event: Event) -> None:
            for command in commands_for(event):
                try:
                    send.send_nowait((event.channel_id, command))
                except trio.WouldBlock:
                    log.error("interactive feed full: %s of channel %s not counted", event.name, event.channel_id)

        unsubscribe = self._bus.subscribe(listen)
        try:
            task_status.started()
            async for channel_id, command in receive:
                try:
                    await self._registry.call(channel_id, command)
                except Exception:  # one channel's trouble must not stop the others' goals
                    log.exception("channel %s: %s failed", channel_id, type(command).__name__)
        finally:
            unsubscribe()
