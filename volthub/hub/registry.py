"""The actor registry: finds or starts a channel's actor, in a nursery it owns.

    registry = ActorRegistry(database, publisher, clock)
    nursery.start_soon(registry.run)               # the registry's nursery owns every actor
    message_id = await registry.send_message(channel_id, sender_id, OutgoingMessage("hi"))
    result = await registry.call(channel_id, chat.Moderate(moderator_id, request))

`call` queues a typed command on the channel's bounded inbox (a full one refuses at once
with `ChannelBusy`) and waits for the answer, given after the commit. At start the registry
asks each component kind which channels have an open deadline and starts their actors, so
a restart resumes every deadline from the database.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import trio

from volthub import metrics
from volthub.hub.actor import (
    ActorRuntime,
    Call,
    ChannelActor,
    ChannelBusy,
    ChannelUnavailable,
    ChatRefused,
    UnknownChannel,
)
from volthub.hub.clock import Clock
from volthub.hub.components import chat
from volthub.hub.components.chat import ModerationRequest, ModerationResult, OutgoingMessage
from volthub.hub.components.chat_rules import ChatSettings
from volthub.hub.kinds import ComponentKind, default_kinds, dispatch_table
from volthub.hub.publisher import EventPublisher
from volthub.persistence import Database, Tx

__all__ = ["ActorRegistry", "ChannelBusy", "ChannelUnavailable", "ChatRefused", "UnknownChannel"]


class ActorRegistry:
    """Finds or starts a channel's actor; runs them all in one nursery it owns."""

    def __init__(
        self,
        database: Database,
        publisher: EventPublisher,
        clock: Clock,
        *,
        inbox_size: int = 256,
        idle_seconds: float = 300.0,
        history_limit: int = chat.HISTORY_LIMIT_DEFAULT,
        kinds: Sequence[ComponentKind] | None = None,
    ) -> None:
        """`kinds` defaults to every kind of the app (chat with `history_limit`, polls, ...)."""
        chosen = tuple(kinds) if kinds is not None else default_kinds(history_limit)
        self.database = database
        self.publisher = publisher
        self.clock = clock
        self.runtime = ActorRuntime(
            database=database,
            publisher=publisher,
            clock=clock,
            kinds=chosen,
            dispatch=dispatch_table(chosen),
            inbox_size=inbox_size,
            idle_seconds=idle_seconds,
        )
        self._actors: dict[str, ChannelActor] = {}
        self._nursery: trio.Nursery | None = None
        self._ready = trio.Event()
        self._closed = False

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Until cancelled. Actors are cancelled with it; their waiting callers are told."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                await self._resume_deadlines()
                self._ready.set()
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._closed = True
            self._nursery = None

    async def _resume_deadlines(self) -> None:
        """Start the actor of every channel with an open deadline of any kind."""
        finders = [kind.open_deadlines for kind in self.runtime.kinds if kind.open_deadlines is not None]
        if not finders:
            return

        def find(tx: Tx) -> list[str]:
            return sorted(set(itertools.chain.from_iterable(finder(tx) for finder in finders)))

        for channel_id in await self.database.read(find):
            if channel_id not in self._actors:
                self._spawn(channel_id)

    def actor(self, channel_id: str) -> ChannelActor | None:
        return self._actors.get(channel_id)

    def active_channels(self) -> list[str]:
        return list(self._actors)

    async def call(self, channel_id: str, command: Any) -> Any:
        """Hand `command` to the channel's actor and wait for its answer."""
        if type(command) not in self.runtime.dispatch:
            raise TypeError(f"no component handles {type(command).__name__}")
        if not self._ready.is_set():
            await self._ready.wait()
        call = Call(command)
        # No checkpoint from here to submit(): the actor found cannot retire in between.
        actor = self._actors.get(channel_id) or self._spawn(channel_id)
        try:
            actor.submit(call)
        except trio.WouldBlock:
            raise ChannelBusy(channel_id) from None
        await call.done.wait()
        return call.result()

    def _spawn(self, channel_id: str) -> ChannelActor:
        if self._closed or self._nursery is None:
            raise ChannelUnavailable(channel_id)
        actor = ChannelActor(self.runtime, channel_id, self._forget)
        self._actors[channel_id] = actor
        metrics.ACTORS_ACTIVE.inc()
        self._nursery.start_soon(actor.run, name=f"channel-actor:{channel_id}")
        return actor

    def _forget(self, actor: ChannelActor) -> None:
        if self._actors.get(actor.channel_id) is actor:
            del self._actors[actor.channel_id]
            metrics.ACTORS_ACTIVE.dec()

    # -- the chat operations other code calls --

    async def send_message(
        self, channel_id: str, sender_id: str, message: OutgoingMessage, bot: chat.BotSender | None = None
    ) -> str:
        result: str = await self.call(channel_id, chat.SendMessage(sender_id, message, bot))
        return result

    async def post_card(
        self,
        channel_id: str,
        card_type: str,
        payload: dict[str, Any],
        *,
        message: str = "",
        sender_id: str | None = None,
    ) -> str:
        """Post a card message (sticker, sound, celebration...): chat.message with
        `card: {type, payload}` and `isSystem: true`. The sender defaults to the broadcaster."""
        if not card_type or len(card_type) > 64:
            raise ValueError("card_type must be 1–64 characters")
        card = {"type": card_type, "payload": payload}
        result: str = await self.call(channel_id, chat.PostSystem(message, card, sender_id))
        return result

    async def post_system_message(self, channel_id: str, message: str, *, sender_id: str | None = None) -> str:
        """A plain system line (isSystem true, no card)."""
        result: str = await self.call(channel_id, chat.PostSystem(message, None, sender_id))
        return result

    async def update_settings(self, channel_id: str, patch: dict[str, Any]) -> ChatSettings:
        result: ChatSettings = await self.call(channel_id, chat.UpdateSettings(patch))
        return result

    async def moderate(self, channel_id: str, moderator_id: str, request: ModerationRequest) -> ModerationResult:
        result: ModerationResult = await self.call(channel_id, chat.Moderate(moderator_id, request))
        return result
