"""Channel actors (DESIGN §2): one task per active channel, one command at a time.

    registry = ActorRegistry(database, publisher, clock)
    nursery.start_soon(registry.run)               # the registry's nursery owns every actor
    message_id = await registry.send_message(channel_id, sender_id, OutgoingMessage("hi"))

A command is an async function of the actor, queued on the actor's bounded inbox together
with the Event its caller waits on. A full inbox refuses at once (`ChannelBusy`) instead of
queueing without bound. Each command that changes state commits it (with its events,
through `EventPublisher.write`) before the caller is answered. An actor with nothing to do
for `idle_seconds` stops; the next command starts a new one, which reloads from the store.

The store stays the truth: every chat write first takes the channel's row lock
(`lock_channel`), and the actor's copy of the settings is refreshed when the row's version
shows another process changed them. So serialising here (one actor) and there (the row
lock, when several processes share PostgreSQL) keeps slow mode and bans exact.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import trio

from volthub.hub.clock import Clock, iso8601
from volthub.hub.components import chat as rules
from volthub.hub.components.chat import Refusal
from volthub.hub.publisher import Emitter, EventPublisher
from volthub.persistence import Database, Tx
from volthub.persistence import chat as repo
from volthub.persistence import users as users_repo
from volthub.persistence.chat import ChatSettings, Standing

T = TypeVar("T")
log = logging.getLogger(__name__)


# --- outcomes callers see --------------------------------------------------------------------


class ChannelBusy(Exception):
    """The channel's inbox is full: the caller should retry shortly (HTTP 503)."""


class UnknownChannel(LookupError):
    pass


class ChannelUnavailable(Exception):
    """The actor stopped (shutdown) before it handled the command."""


class ChatRefused(Exception):
    """A rule said no; carries the status, error code and details for the caller."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal


def _refuse(refusal: Refusal | None) -> None:
    if refusal is not None:
        raise ChatRefused(refusal)


# --- requests --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReplyRef:
    message_id: str
    username: str
    snippet: str


@dataclass(frozen=True)
class OutgoingMessage:
    text: str
    effect: str | None = None
    effect_color: str | None = None
    reply_to: ReplyRef | None = None
    as_bot: bool = False


@dataclass(frozen=True)
class ModerationRequest:
    action: str  # timeout | ban | unban | delete
    user_id: str | None = None
    username: str | None = None
    duration_seconds: int | None = None
    message_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class ModerationResult:
    action: str
    changed: bool  # false: nothing to undo (unban of someone not banned, message already gone)
    user: dict[str, str] | None = None
    ends_at: int | None = None
    message_id: str | None = None


# --- commands --------------------------------------------------------------------------------

Op = Callable[["ChannelActor"], Awaitable[Any]]


class _Command:
    __slots__ = ("op", "done", "_value", "_error")

    def __init__(self, op: Op) -> None:
        self.op = op
        self.done = trio.Event()
        self._value: Any = None
        self._error: BaseException | None = None

    def succeed(self, value: Any) -> None:
        self._value = value
        self.done.set()

    def fail(self, error: BaseException) -> None:
        self._error = error
        self.done.set()

    def result(self) -> Any:
        if self._error is not None:
            raise self._error
        return self._value


@dataclass
class ChannelState:
    """What the actor keeps between commands; `version` is the store's settings version."""

    settings: ChatSettings
    version: int


# --- the actor -------------------------------------------------------------------------------


class ChannelActor:
    def __init__(self, registry: ActorRegistry, channel_id: str, inbox_size: int) -> None:
        self.channel_id = channel_id
        self.state: ChannelState | None = None
        self.stopped = trio.Event()
        self._registry = registry
        self._inbox, self._commands = trio.open_memory_channel[_Command](inbox_size)
        self._current: _Command | None = None

    def submit(self, command: _Command) -> None:
        """Queue without waiting; raises trio.WouldBlock when the inbox is full."""
        self._inbox.send_nowait(command)

    @property
    def queued(self) -> int:
        return self._inbox.statistics().current_buffer_used

    async def run(self) -> None:
        try:
            try:
                await self._load()
            except Exception as exc:  # unknown channel or store trouble: tell whoever waits
                self._stop_accepting()
                self._fail_queued(exc)
                return
            await self._serve()
        finally:
            self._stop_accepting()
            self._fail_queued(ChannelUnavailable(self.channel_id))
            self.stopped.set()

    async def _serve(self) -> None:
        while True:
            command: _Command | None = None
            with trio.move_on_after(self._registry.idle_seconds):
                command = await self._commands.receive()
            if command is not None:
                await self._handle(command)
            elif self.queued == 0:
                # Idle. No checkpoint between this check and leaving the registry (done in
                # `run`'s finally), so no command can slip into an inbox nobody reads.
                return

    async def _handle(self, command: _Command) -> None:
        # Kept while the op runs: if the actor is cancelled mid-command (shutdown), `run`
        # answers this caller too, so nobody waits on a command that will never finish.
        self._current = command
        try:
            value = await command.op(self)
        except ChatRefused as exc:
            command.fail(exc)
        except Exception as exc:  # a failure answers this caller only; the actor goes on
            log.exception("channel %s: command failed", self.channel_id)
            command.fail(exc)
        else:
            command.succeed(value)
        self._current = None

    def _stop_accepting(self) -> None:
        self._registry._forget(self)

    def _fail_queued(self, error: BaseException) -> None:
        if self._current is not None:
            self._current.fail(error)
            self._current = None
        while True:
            try:
                self._commands.receive_nowait().fail(error)
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                return

    async def _load(self) -> None:
        def load(tx: Tx) -> tuple[ChatSettings, int] | None:
            if users_repo.get_by_id(tx, self.channel_id) is None:
                return None
            return repo.get_settings(tx, self.channel_id)

        # A read: asking about a channel that does not exist takes no write lock.
        loaded = await self._registry.database.read(load)
        if loaded is None:
            raise UnknownChannel(self.channel_id)
        self.state = ChannelState(*loaded)

    # -- helpers run inside a store transaction (worker thread; the actor awaits it) --

    def _fresh_settings(self, tx: Tx, version: int) -> ChannelState:
        assert self.state is not None
        if version == self.state.version:
            return self.state
        settings, version = repo.get_settings(tx, self.channel_id)
        return ChannelState(settings, version)

    def _member(self, tx: Tx, user_id: str, now_ms: int) -> Standing:
        found = repo.standing(tx, self.channel_id, user_id, now_ms)
        if found is None:
            raise ChatRefused(Refusal(404, "not_found", "user not found", {"userId": user_id}))
        return found

    # -- commands --

    async def send_message(self, sender_id: str, message: OutgoingMessage) -> str:
        if message.as_bot:
            # Bots are connected per channel by a later feature; until then, say so plainly.
            raise ChatRefused(
                Refusal(403, "bot_not_connected", "no bot is connected to this channel, so sendAsBot is not available")
            )

        def change(tx: Tx, emitter: Emitter) -> tuple[str, ChannelState]:
            now_ms = emitter.now_ms
            version, seq = repo.lock_channel(tx, self.channel_id, emitter.now_ms, next_message=True)
            state = self._fresh_settings(tx, version)
            sender = self._member(tx, sender_id, now_ms)
            _refuse(rules.check_standing(sender, now_ms))
            last = None
            if rules.needs_last_message(state.settings, sender):  # the slow-mode clock is the store's
                last = repo.last_message_at(tx, self.channel_id, sender_id)
            _refuse(rules.check_modes(state.settings, sender, message.text, now_ms, last))
            message_id = str(uuid.uuid4())
            payload = rules.message_payload(
                message_id=message_id,
                channel_id=self.channel_id,
                standing=sender,
                text=message.text,
                timestamp=iso8601(now_ms),
                mentions=_mentions(tx, message.text),
                reply_to=self._reply(tx, message.reply_to),
                effect=message.effect,
                effect_color=message.effect_color,
            )
            self._store(tx, emitter, message_id, seq, sender_id, False, payload)
            return message_id, state

        message_id, self.state = await self._registry.publisher.write(change)
        return message_id

    async def post_system(self, text: str, card: dict[str, Any] | None, sender_id: str | None) -> str:
        """A card or system message: no chat-mode or ban checks; stored and emitted."""

        def change(tx: Tx, emitter: Emitter) -> str:
            _, seq = repo.lock_channel(tx, self.channel_id, emitter.now_ms, next_message=True)
            sender = self._member(tx, sender_id or self.channel_id, emitter.now_ms)
            message_id = str(uuid.uuid4())
            payload = rules.message_payload(
                message_id=message_id,
                channel_id=self.channel_id,
                standing=sender,
                text=text,
                timestamp=iso8601(emitter.now_ms),
                mentions=_mentions(tx, text),
                card=card,
                is_system=True,
            )
            self._store(tx, emitter, message_id, seq, sender.user_id, True, payload)
            return message_id

        return await self._registry.publisher.write(change)

    def _store(
        self, tx: Tx, emitter: Emitter, message_id: str, seq: int, user_id: str, system: bool, payload: dict[str, Any]
    ) -> None:
        repo.insert_message(
            tx,
            message_id=message_id,
            channel_id=self.channel_id,
            seq=seq,
            user_id=user_id,
            is_system=system,
            payload=payload,
            now_ms=emitter.now_ms,
        )
        emitter.emit(self.channel_id, "chat.message", payload)

    def _reply(self, tx: Tx, reply: ReplyRef | None) -> dict[str, Any] | None:
        """The message replied to must be in this channel and not deleted. The author's
        id and stored username are taken from it (the client's copy may be stale)."""
        if reply is None:
            return None
        original = repo.get_message(tx, self.channel_id, reply.message_id)
        if original is None or original.deleted_at is not None:
            raise ChatRefused(
                Refusal(
                    400,
                    "invalid_reply_to",
                    "replyTo.messageId is not a message in this channel's chat",
                    {"field": "replyTo.messageId"},
                )
            )
        return {
            "messageId": original.id,
            "userId": original.user_id,
            "username": original.payload.get("username", reply.username),
            "snippet": reply.snippet,
        }

    async def update_settings(self, patch: dict[str, Any]) -> ChatSettings:
        def change(tx: Tx, emitter: Emitter) -> ChannelState:
            version, _ = repo.lock_channel(tx, self.channel_id, emitter.now_ms)
            current = self._fresh_settings(tx, version)
            try:
                wanted = rules.apply_settings_patch(current.settings, patch)
            except rules.SettingsError as exc:
                raise ChatRefused(Refusal(400, "invalid_settings", str(exc), {"field": exc.field})) from None
            if wanted == current.settings:
                return current
            return ChannelState(wanted, repo.save_settings(tx, self.channel_id, wanted, emitter.now_ms))

        self.state = await self._registry.publisher.write(change)
        return self.state.settings

    async def moderate(self, moderator_id: str, request: ModerationRequest) -> ModerationResult:
        def change(tx: Tx, emitter: Emitter) -> ModerationResult:
            repo.lock_channel(tx, self.channel_id, emitter.now_ms)
            moderator = self._member(tx, moderator_id, emitter.now_ms)
            _refuse(rules.check_moderator(moderator))
            if request.action == "delete":
                return self._delete(tx, emitter, moderator, request)
            target = self._target(tx, request, emitter.now_ms)
            _refuse(rules.check_moderation_target(moderator, target, request.action))
            if request.action == "unban":
                return self._unban(tx, emitter, moderator, target)
            return self._ban(tx, emitter, moderator, target, request)

        return await self._registry.publisher.write(change)

    def _target(self, tx: Tx, request: ModerationRequest, now_ms: int) -> Standing:
        user_id = request.user_id
        if user_id is None and request.username is not None:
            user = users_repo.get_by_username_insensitive(tx, request.username)
            user_id = user.id if user else None
        found = repo.standing(tx, self.channel_id, user_id, now_ms) if user_id else None
        if found is None:
            details = {"userId": request.user_id} if request.user_id else {"username": request.username}
            raise ChatRefused(Refusal(404, "not_found", "the user to moderate does not exist", details))
        return found

    def _ban(
        self, tx: Tx, emitter: Emitter, moderator: Standing, target: Standing, request: ModerationRequest
    ) -> ModerationResult:
        now_ms = emitter.now_ms
        timeout = request.action == "timeout"
        ends_at = rules.timeout_ends_at(now_ms, request.duration_seconds or 0) if timeout else None
        repo.set_ban(
            tx,
            channel_id=self.channel_id,
            user_id=target.user_id,
            moderator_id=moderator.user_id,
            reason=request.reason,
            now_ms=now_ms,
            expires_at=ends_at,
        )
        data = {
            **_who(target),
            "moderator": _who(moderator),
            "reason": request.reason,
            "isPermanent": not timeout,
            "bannedAt": iso8601(now_ms),
            "endsAt": iso8601(ends_at) if ends_at is not None else None,
        }
        if timeout:
            data["durationSeconds"] = request.duration_seconds
        emitter.emit(self.channel_id, "channel.ban", data)
        return ModerationResult(request.action, True, _who(target), ends_at)

    def _unban(self, tx: Tx, emitter: Emitter, moderator: Standing, target: Standing) -> ModerationResult:
        lifted = repo.remove_ban(tx, self.channel_id, target.user_id, emitter.now_ms)
        if lifted is not None:
            data = {
                **_who(target),
                "moderator": _who(moderator),
                "wasPermanent": lifted.is_permanent,
                "unbannedAt": iso8601(emitter.now_ms),
            }
            emitter.emit(self.channel_id, "channel.unban", data)
        return ModerationResult("unban", lifted is not None, _who(target))

    def _delete(self, tx: Tx, emitter: Emitter, moderator: Standing, request: ModerationRequest) -> ModerationResult:
        message = repo.get_message(tx, self.channel_id, request.message_id or "")
        if message is None:
            raise ChatRefused(
                Refusal(404, "not_found", "message not found in this channel", {"messageId": request.message_id})
            )
        author = self._member(tx, message.user_id, emitter.now_ms)
        _refuse(rules.check_moderation_target(moderator, author, "delete"))
        # Not in the event catalogue (spec §6.1), so nothing is emitted: it just leaves history.
        removed = repo.delete_message(tx, self.channel_id, message.id, moderator.user_id, emitter.now_ms)
        return ModerationResult("delete", removed, _who(author), message_id=message.id)


def _who(standing: Standing) -> dict[str, str]:
    return rules.person(standing.user_id, standing.username, standing.display_name)


def _mentions(tx: Tx, text: str) -> list[dict[str, str]]:
    """Valid `@username`s only: looked up case-insensitively, shown as stored."""
    names = rules.extract_mentions(text)
    if not names:
        return []
    found = users_repo.get_many_by_username_insensitive(tx, names)
    users = [found[name.lower()] for name in names if name.lower() in found]
    return [rules.person(user.id, user.username, user.display_name) for user in users]


# --- the registry ----------------------------------------------------------------------------


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
    ) -> None:
        self.database = database
        self.publisher = publisher
        self.clock = clock
        self.inbox_size = inbox_size
        self.idle_seconds = idle_seconds
        self._actors: dict[str, ChannelActor] = {}
        self._nursery: trio.Nursery | None = None
        self._ready = trio.Event()
        self._closed = False

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Until cancelled. Actors are cancelled with it; their waiting callers are told."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                self._ready.set()
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._closed = True
            self._nursery = None

    def actor(self, channel_id: str) -> ChannelActor | None:
        return self._actors.get(channel_id)

    def active_channels(self) -> list[str]:
        return list(self._actors)

    async def call(self, channel_id: str, op: Callable[[ChannelActor], Awaitable[T]]) -> T:
        """Run `op` on the channel's actor and wait for its answer."""
        if not self._ready.is_set():
            await self._ready.wait()
        command = _Command(op)
        # No checkpoint from here to submit(): the actor found cannot retire in between.
        actor = self._actors.get(channel_id) or self._spawn(channel_id)
        try:
            actor.submit(command)
        except trio.WouldBlock:
            raise ChannelBusy(channel_id) from None
        await command.done.wait()
        return command.result()

    def _spawn(self, channel_id: str) -> ChannelActor:
        if self._closed or self._nursery is None:
            raise ChannelUnavailable(channel_id)
        actor = ChannelActor(self, channel_id, self.inbox_size)
        self._actors[channel_id] = actor
        self._nursery.start_soon(actor.run, name=f"channel-actor:{channel_id}")
        return actor

    def _forget(self, actor: ChannelActor) -> None:
        if self._actors.get(actor.channel_id) is actor:
            del self._actors[actor.channel_id]

    # -- the chat operations other code calls --

    async def send_message(self, channel_id: str, sender_id: str, message: OutgoingMessage) -> str:
        return await self.call(channel_id, lambda actor: actor.send_message(sender_id, message))

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
        return await self.call(channel_id, lambda actor: actor.post_system(message, card, sender_id))

    async def post_system_message(self, channel_id: str, message: str, *, sender_id: str | None = None) -> str:
        """A plain system line (isSystem true, no card)."""
        return await self.call(channel_id, lambda actor: actor.post_system(message, None, sender_id))

    async def update_settings(self, channel_id: str, patch: dict[str, Any]) -> ChatSettings:
        return await self.call(channel_id, lambda actor: actor.update_settings(patch))

    async def moderate(self, channel_id: str, moderator_id: str, request: ModerationRequest) -> ModerationResult:
        return await self.call(channel_id, lambda actor: actor.moderate(moderator_id, request))
