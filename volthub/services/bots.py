"""Bots.

A bot-type app configures one bot (`configure`): a bot account whose username is the
default bot name, claimed in the one namespace of names (persistence.names) so no person
may register it, in any case. A channel gets a bot either by authorising a bot-type app
(its tokens may post as that app's bot) or by choosing one in the bot-select flow
(`select`; then any app the channel authorised posts as that bot with `sendAsBot`). A
channel may give its bot a custom name (`customize`); reverting keeps that name reserved
for `[bots] name_hold_days` (45) days, measured on the app's clock. There is no bot
token: a bot acts through the channel's own OAuth tokens.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

from volthub.hub.clock import Clock, to_ms
from volthub.persistence import Database, Tx, names
from volthub.persistence import bots as repo
from volthub.persistence import chat as chat_repo
from volthub.persistence import users as users_repo
from volthub.persistence.bots import Bot
from volthub.protocol import commands
from volthub.services.apps import owned_app

__all__ = [
    "Bot",
    "BotIdentity",
    "BotNameTaken",
    "BotNotConfigured",
    "Bots",
    "NoBotConnected",
    "NotABotApp",
    "NameCheck",
]

BOT_NAME = re.compile(r"^[A-Za-z0-9_]{3,25}$")
DAY_MS = 86_400_000
# The account of a bot never signs in: no argon2 hash matches this.
NO_PASSWORD = "!bot"


@dataclass(eq=False)  # an exception: equal only to itself, and hashable
class NotABotApp(Exception):
    client_id: str


@dataclass(eq=False)  # an exception: equal only to itself, and hashable
class BotNotConfigured(Exception):
    client_id: str


class NoBotConnected(Exception):
    """The channel has no bot: its app is not a bot app and it selected none."""


class BotNameTaken(Exception):
    def __init__(self, name: str, reserved_until: int | None) -> None:
        super().__init__(name)
        self.name = name
        self.reserved_until = reserved_until


@dataclass(frozen=True)
class BotIdentity:
    """Who posts when a channel's message is sent as its bot."""

    bot: Bot
    channel_id: str
    name: str  # the custom name in this channel, else the default
    custom: bool
    via: str  # "app" (a bot-type app's own token) or "selected" (bot-select flow)


@dataclass(frozen=True)
class NameCheck:
    name: str
    available: bool
    reason: str | None  # invalid | taken | reserved
    reserved_until: int | None


def _holder(client_id: str, channel_id: str | None = None) -> str:
    return f"bot:{client_id}" if channel_id is None else f"bot:{client_id}:{channel_id}"


# Words a bot's name must not pose as: chat would show it beside a role's authority.
ROLE_WORDS = frozenset(
    {"mod", "mods", "moderator", "moderators", "broadcaster", "staff", "admin", "administrator", "system",
     "official", "support", "owner", "volthub"}
)  # fmt: skip


def impersonates_role(name: str) -> bool:
    """True for names that pose as a role: a role word as a whole underscore-separated part
    (digits aside: `admin_2`, `the_mod`); the name without underscores and digits being a
    role word with `bot`, `team`, `the` or `real` around it (`modbot`, `TheStaff`); or, for
    words of six letters or more, at either end of it with at most three letters beside
    (`ModeratorBot`, `xsystem`, `OfficialHQ`; not `systematic_x`, a word of its own)."""
    lowered = name.lower()
    parts = [part.rstrip("0123456789") for part in lowered.split("_")]
    if any(part in ROLE_WORDS for part in parts):
        return True
    compact = re.sub(r"[_0-9]+", "", lowered)
    for word in ROLE_WORDS:
        if compact in (word, f"{word}bot", f"{word}team", f"the{word}", f"real{word}"):
            return True
        beside = len(compact) - len(word)
        if len(word) >= 6 and beside <= 3 and (compact.startswith(word) or compact.endswith(word)):
            return True
    return False


def check_bot_name(name: str) -> str:
    if not BOT_NAME.fullmatch(name):
        raise ValueError("bot names are 3–25 letters, digits or underscores")
    if impersonates_role(name):
        raise ValueError("a bot name may not pose as a role (moderator, broadcaster, staff, admin, system, …)")
    return name


class Bots:
    def __init__(self, database: Database, clock: Clock, *, hold_days: int = 45) -> None:
        self._db = database
        self._clock = clock
        self.hold_ms = hold_days * DAY_MS

    def _now(self) -> int:
        return to_ms(self._clock.now())

    # -- the developer side (first-party, the app's owner) --

    async def configure(
        self, owner_id: str, client_id: str, name: str | None, prefix: str | None, permission: str | None
    ) -> Bot:
        """Create or change the app's bot. A new default name is claimed platform-wide; a
        replaced one stays reserved for the hold period."""
        now = self._now()
        if permission is not None and not commands.is_level(permission):
            raise ValueError(f"defaultPermission must be one of {', '.join(commands.LEVELS)}")

        def change(tx: Tx) -> Bot:
            app = owned_app(tx, owner_id, client_id)
            if not app.bot_app:
                raise NotABotApp(client_id)
            bot = repo.get(tx, client_id)
            if bot is None:
                if name is None:
                    raise ValueError("name is required the first time a bot is configured")
                user_id = str(uuid.uuid4())
                try:
                    users_repo.create_user(
                        tx,
                        user_id=user_id,
                        username=name,
                        display_name=name,
                        password_hash=NO_PASSWORD,
                        now_ms=now,
                        kind="bot",
                        holder=_holder(client_id),
                    )
                except users_repo.UsernameTaken:
                    raise self._taken(tx, name, now) from None
                repo.insert(tx, client_id, user_id, prefix or "!", permission or "everyone", now)
            else:
                if name is not None and name != bot.username:
                    if name.lower() != bot.username.lower():
                        self._claim(tx, name, "bot", _holder(client_id), now)
                        names.release(tx, bot.username, _holder(client_id), now, self.hold_ms)
                    repo.rename_account(tx, bot.user_id, name, now)
                repo.update_settings(
                    tx, client_id, prefix or bot.command_prefix, permission or bot.default_permission, now
                )
            found = repo.get(tx, client_id)
            assert found is not None
            return found

        return await self._db.write(change)

    async def instances(self, owner_id: str, client_id: str) -> tuple[Bot, list[repo.CustomName], list[names.Claim]]:
        """The default bot, its per-channel custom names, and names it holds in reserve."""
        now = self._now()

        def read(tx: Tx) -> tuple[Bot, list[repo.CustomName], list[names.Claim]]:
            owned_app(tx, owner_id, client_id)
            bot = repo.get(tx, client_id)
            if bot is None:
                raise BotNotConfigured(client_id)
            return bot, repo.custom_names(tx, client_id), names.holds_of(tx, _holder(client_id), now)

        return await self._db.read(read)

    async def check_name(self, owner_id: str, client_id: str, name: str) -> NameCheck:
        now = self._now()

        def read(tx: Tx) -> NameCheck:
            owned_app(tx, owner_id, client_id)
            if not BOT_NAME.fullmatch(name) or impersonates_role(name):
                return NameCheck(name, False, "invalid", None)
            claim = names.current(tx, name, now)
            if claim is None or claim.holder == _holder(client_id) or claim.holder.startswith(_holder(client_id) + ":"):
                return NameCheck(name, True, None, None)
            if claim.reserved_until is not None:
                return NameCheck(name, False, "reserved", claim.reserved_until)
            return NameCheck(name, False, "taken", None)

        return await self._db.read(read)

    # -- the channel side (the channel owner's tokens) --

    async def directory(self, limit: int = 100) -> list[Bot]:
        """Bots a channel can choose in the bot-select flow."""
        return await self._db.read(lambda tx: repo.all_bots(tx, limit))

    async def bot(self, client_id: str) -> Bot:
        found = await self._db.read(lambda tx: repo.get(tx, client_id))
        if found is None:
            raise BotNotConfigured(client_id)
        return found

    async def select(self, channel_id: str, client_id: str) -> BotIdentity:
        now = self._now()

        def change(tx: Tx) -> BotIdentity:
            if repo.get(tx, client_id) is None:
                raise BotNotConfigured(client_id)
            repo.select(tx, channel_id, client_id, now)
            found = self._identity(tx, channel_id, None)
            assert found is not None
            return found

        return await self._db.write(change)

    async def unselect(self, channel_id: str) -> bool:
        return await self._db.write(lambda tx: repo.unselect(tx, channel_id))

    async def current(self, channel_id: str, client_id: str | None) -> BotIdentity | None:
        """The bot that posts for this channel when `client_id`'s token says sendAsBot."""
        return await self._db.read(lambda tx: self._identity(tx, channel_id, client_id))

    async def customize(self, channel_id: str, client_id: str | None, name: str) -> BotIdentity:
        now = self._now()

        def change(tx: Tx) -> BotIdentity:
            identity = self._require(tx, channel_id, client_id)
            bot, holder = identity.bot, _holder(identity.bot.client_id, channel_id)
            previous = repo.custom_name(tx, bot.client_id, channel_id)
            if previous is not None and previous == name:
                return identity
            if name.lower() == bot.username.lower():
                raise ValueError("that is the bot's default name: revert to use it")
            if previous is None or previous.lower() != name.lower():
                self._claim(tx, name, "custom_bot", holder, now)
                if previous is not None:
                    names.release(tx, previous, holder, now, self.hold_ms)
            repo.set_custom_name(tx, bot.client_id, channel_id, name, now)
            found = self._identity(tx, channel_id, client_id)
            assert found is not None
            return found

        return await self._db.write(change)

    async def revert(self, channel_id: str, client_id: str | None) -> tuple[BotIdentity, str | None, int | None]:
        """Back to the default name. Returns (the bot now, the released name, held until)."""
        now = self._now()

        def change(tx: Tx) -> tuple[BotIdentity, str | None, int | None]:
            identity = self._require(tx, channel_id, client_id)
            bot = identity.bot
            previous = repo.custom_name(tx, bot.client_id, channel_id)
            until = None
            if previous is not None:
                until = names.release(tx, previous, _holder(bot.client_id, channel_id), now, self.hold_ms)
                repo.remove_custom_name(tx, bot.client_id, channel_id)
            found = self._identity(tx, channel_id, client_id)
            assert found is not None
            return found, previous, until

        return await self._db.write(change)

    async def viewer(self, channel_id: str, user_id: str) -> commands.Viewer | None:
        """A user's rung facts in a channel for the permission ladder (None: no such user)."""
        now = self._now()

        def read(tx: Tx) -> commands.Viewer | None:
            row = chat_repo.standing(tx, channel_id, user_id, now)
            if row is None:
                return None
            followed = users_repo.follow_time(tx, user_id, channel_id)
            tier = tx.scalar(
                "SELECT tier FROM subscriptions WHERE channel_id = ? AND user_id = ? AND ended_at IS NULL"
                " AND started_at <= ? AND expires_at > ? ORDER BY tier DESC LIMIT 1",
                (channel_id, user_id, now, now),
            )
            return commands.Viewer(
                is_broadcaster=bool(row["is_broadcaster"]),
                is_moderator=bool(row["is_moderator"]),
                is_vip=bool(row["is_vip"]),
                followed_at_ms=followed,
                subscription_tier=commands.tier_number(tier),
            )

        return await self._db.read(read)

    def now_ms(self) -> int:
        return self._now()

    # -- helpers --

    def _identity(self, tx: Tx, channel_id: str, client_id: str | None) -> BotIdentity | None:
        bot, via = (repo.get(tx, client_id), "app") if client_id else (None, "app")
        if bot is None:
            selected = repo.selected(tx, channel_id)
            bot, via = (repo.get(tx, selected), "selected") if selected else (None, "selected")
        if bot is None:
            return None
        custom = repo.custom_name(tx, bot.client_id, channel_id)
        return BotIdentity(bot, channel_id, custom or bot.username, custom is not None, via)

    def _require(self, tx: Tx, channel_id: str, client_id: str | None) -> BotIdentity:
        found = self._identity(tx, channel_id, client_id)
        if found is None:
            raise NoBotConnected(channel_id)
        return found

    def _claim(self, tx: Tx, name: str, kind: str, holder: str, now: int) -> None:
        try:
            names.claim(tx, name, kind, holder, now)
        except names.NameTaken as exc:
            raise BotNameTaken(name, exc.reserved_until) from None

    @staticmethod
    def _taken(tx: Tx, name: str, now: int) -> BotNameTaken:
        held = names.current(tx, name, now)
        return BotNameTaken(name, held.reserved_until if held else None)
