"""Streams: info and tags, stream keys, live state from the media server, browse
lists, VODs and clips.

Live state comes only from the media server's hooks: `publish` opens a stream record and
emits `stream.online`; `unpublish` (or silence: no hook for `[ingest]
silence_timeout_seconds`) closes it, leaves a VOD record and emits `stream.offline`. A
change of title, category or tags emits `stream.update` (Events API and webhooks) and
`channel.update` (webhooks), live or not. Every change and its events are one transaction
(`EventPublisher.write`).

Stream keys are secrets: a key is derived from a server secret and a per-channel nonce
(HMAC-SHA256), so it is never stored; the database holds its SHA-256, which is what a
publish is looked up by, and the lookup ends in a constant-time comparison. Regenerating
draws a new nonce: the old key stops working at once. Keys are never logged.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import secrets
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import trio

from volthub.hub.clock import Clock, iso8601, to_ms
from volthub.hub.publisher import Emitter, EventPublisher
from volthub.persistence import Database, IntegrityError, Tx
from volthub.persistence import streams as repo
from volthub.persistence import users as users_repo
from volthub.persistence.pagination import InvalidCursor, decode_cursor, encode_cursor
from volthub.persistence.streams import Clip, LiveFilter, LiveStream, Stream, StreamSettings, Vod
from volthub.persistence.users import Page, User
from volthub.protocol import catalogue, streamtags
from volthub.protocol.streamtags import TagProblem
from volthub.services.categories import Categories
from volthub.services.channels import ChannelNotFound, channel_by_id, channel_by_username

__all__ = [
    "ClipNotFound",
    "ClipOutOfRange",
    "ClipView",
    "Info",
    "LiveFilter",
    "LiveStream",
    "NoStreamToClip",
    "NotLive",
    "PathRefused",
    "Published",
    "Setup",
    "Stream",
    "StreamKeyRefused",
    "Streams",
    "TagsRefused",
    "UnknownCategory",
    "Vod",
    "VodNotFound",
]

log = logging.getLogger(__name__)

# Where a publish came from (streams.source): the generic hook, nginx-rtmp, MediaMTX.
SOURCES = ("hook", "nginx-rtmp", "mediamtx")


class TagsRefused(Exception):
    def __init__(self, problem: TagProblem) -> None:
        super().__init__(problem.message)
        self.problem = problem


class UnknownCategory(Exception):
    def __init__(self, slug: str) -> None:
        super().__init__(f"no category {slug!r}: GET /api/categories lists them")
        self.slug = slug


class StreamKeyRefused(Exception):
    """No channel has this stream key (or the key was regenerated)."""


class NotLive(Exception):
    """The hook names no live stream."""


class PathRefused(Exception):
    """A media-server path that is not the channel of the key presented with it."""


class NoStreamToClip(Exception):
    """The channel is not live and has no recorded stream."""


class ClipOutOfRange(Exception):
    def __init__(self, available_ms: int) -> None:
        super().__init__("startOffsetMs + durationMs must lie within the stream")
        self.available_ms = available_ms


class ClipNotFound(LookupError):
    pass


class VodNotFound(LookupError):
    pass


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class Info:
    """A channel's stream info as `stream/info` shows it."""

    channel: User
    settings: StreamSettings
    live: Stream | None

    @property
    def content_warnings(self) -> list[str]:
        return streamtags.content_warnings(self.settings.tags, self.settings.channel_tags)


@dataclass(frozen=True)
class Setup:
    channel: User
    stream_key: str
    ingest: tuple[tuple[str, str], ...]  # (protocol, URL) the media server serves, WHIP first


@dataclass(frozen=True)
class Published:
    stream: Stream
    channel: User
    started: bool  # False: the channel was live already with this key (a repeated hook)


@dataclass(frozen=True)
class ClipView:
    clip: Clip
    channel: User
    creator: User | None
    vod_id: str | None


class Streams:
    def __init__(
        self,
        database: Database,
        publisher: EventPublisher,
        clock: Clock,
        categories: Categories,
        key_secret: str,
        silence_timeout_seconds: float,
        ingest_urls: Sequence[tuple[str, str]],
    ) -> None:
        self._db = database
        self._publisher = publisher
        self._clock = clock
        self.categories = categories
        self._key_secret = key_secret.encode()
        self.silence_timeout_seconds = silence_timeout_seconds
        # (protocol, URL template with {username}) of what the media server serves, WHIP first.
        self._ingest_urls = tuple(ingest_urls)
        # Set when a stream opens in this process: wakes the silence watcher.
        self._went_live = trio.Event()

    # --- keys -------------------------------------------------------------------------------

    def _derive_key(self, channel_id: str, nonce: str) -> str:
        digest = hmac.new(self._key_secret, f"{channel_id}:{nonce}".encode(), hashlib.sha256).digest()
        return "live_" + base64.urlsafe_b64encode(digest).decode().rstrip("=")

    def _setup(self, channel: User, nonce: str) -> Setup:
        offered = tuple((protocol, url.replace("{username}", channel.username)) for protocol, url in self._ingest_urls)
        return Setup(channel, self._derive_key(channel.id, nonce), offered)

    def _new_key(self, channel_id: str) -> tuple[str, str]:
        nonce = secrets.token_urlsafe(16)
        return nonce, hash_key(self._derive_key(channel_id, nonce))

    def _settings(self, tx: Tx, channel_id: str, now_ms: int) -> StreamSettings:
        found = repo.get_settings(tx, channel_id)
        if found is not None:
            return found
        nonce, key_hash = self._new_key(channel_id)
        return repo.ensure_settings(tx, channel_id, nonce, key_hash, now_ms)

    async def setup(self, channel_id: str) -> Setup:
        now = self._now()

        def read(tx: Tx) -> Setup:
            channel = channel_by_id(tx, channel_id)
            settings = self._settings(tx, channel_id, now)
            return self._setup(channel, settings.key_nonce)

        return await self._db.write(read)

    async def regenerate_key(self, channel_id: str) -> Setup:
        """A new key; the old one is refused from the moment this commits."""
        now = self._now()

        def change(tx: Tx) -> Setup:
            channel = channel_by_id(tx, channel_id)
            self._settings(tx, channel_id, now)
            nonce, key_hash = self._new_key(channel_id)
            repo.set_key(tx, channel_id, nonce, key_hash, now)
            return self._setup(channel, nonce)

        return await self._db.write(change)

    def _settings_for_key(self, tx: Tx, key: str) -> StreamSettings:
        presented = hash_key(key)
        found = repo.settings_by_key_hash(tx, presented)
        # The index finds the row by hash; the comparison that admits is constant-time.
        if found is None or not hmac.compare_digest(found.key_hash, presented):
            raise StreamKeyRefused()
        return found

    # --- info and tags ----------------------------------------------------------------------

    async def info(self, channel_id: str) -> Info:
        now = self._now()

        def read(tx: Tx) -> Info:
            channel = channel_by_id(tx, channel_id)
            return Info(channel, self._settings(tx, channel_id, now), repo.open_stream(tx, channel_id))

        return await self._db.write(read)

    def check_info(self, fields: dict[str, Any]) -> dict[str, Any]:
        """Validate a `PUT stream/info` whole, before anything is written: the stored changes.

        Raises TagsRefused or UnknownCategory; nothing of the request is saved then.
        """
        changes: dict[str, Any] = {}
        if "title" in fields:
            changes["title"] = fields["title"]
        if "category" in fields:
            changes["category"] = self._category(fields["category"])
        if "language" in fields:
            changes["language"] = fields["language"]
        for field, column, limit in (
            ("tags", "tags", streamtags.STREAM_TAG_LIMIT),
            ("channelTags", "channel_tags", streamtags.CHANNEL_TAG_LIMIT),
        ):
            if field in fields:
                checked = streamtags.check_tags(fields[field], field=field, limit=limit)
                if checked.problem is not None:
                    raise TagsRefused(checked.problem)
                changes[column] = checked.slugs
        return changes

    def _category(self, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        slug = streamtags.slugify(value)
        if self.categories.get(slug) is None:
            raise UnknownCategory(value)
        return slug

    async def update_info(self, channel_id: str, fields: dict[str, Any]) -> Info:
        changes = self.check_info(fields)

        def change(tx: Tx, emitter: Emitter) -> Info:
            channel = channel_by_id(tx, channel_id)
            before = self._settings(tx, channel_id, emitter.now_ms)
            if changes:
                repo.update_info(tx, channel_id, changes, emitter.now_ms)
            after = repo.get_settings(tx, channel_id)
            assert after is not None
            if _described(before) != _described(after):
                person = catalogue.Person.of(channel)
                emitter.emit(
                    channel_id,
                    "stream.update",
                    catalogue.stream_update(
                        channel=person,
                        title=after.title,
                        category=after.category,
                        tags=after.tags,
                        channel_tags=after.channel_tags,
                        content_warnings=streamtags.content_warnings(after.tags, after.channel_tags),
                    ),
                )
                emitter.emit(
                    channel_id,
                    "channel.update",
                    catalogue.channel_update(channel=person, updated_at=iso8601(emitter.now_ms)),
                )
            return Info(channel, after, repo.open_stream(tx, channel_id))

        return await self._publisher.write(change)

    # --- live state from the media server ---------------------------------------------------

    async def publish(self, key: str, *, source: str, media_path: str | None = None) -> Published:
        """The media server admits a publisher with `key`: the channel goes live.

        A repeated publish with the live stream's own key (a reconnecting encoder, a retried
        hook) keeps that stream; StreamKeyRefused for an unknown key. With a `media_path`
        (MediaMTX), it must be the key's channel, its username in any case: PathRefused
        otherwise, so one key never opens another channel's path.
        """

        def change(tx: Tx, emitter: Emitter) -> Published:
            settings = self._settings_for_key(tx, key)
            channel = channel_by_id(tx, settings.channel_id)
            if media_path is not None and media_path.lower() != channel.username.lower():
                raise PathRefused(media_path)
            current = repo.open_stream(tx, channel.id)
            if current is not None:
                repo.touch_stream(tx, current.id, emitter.now_ms)
                return Published(current, channel, started=False)
            stream = Stream(
                id=str(uuid.uuid4()),
                channel_id=channel.id,
                key_hash=settings.key_hash,
                source=source,
                media_path=media_path,
                started_at=emitter.now_ms,
                last_seen_at=emitter.now_ms,
            )
            try:
                with tx.savepoint():
                    repo.insert_stream(tx, stream)
            except IntegrityError:  # a concurrent publish opened it first
                opened = repo.open_stream(tx, channel.id)
                assert opened is not None
                return Published(opened, channel, started=False)
            emitter.emit(
                channel.id,
                "stream.online",
                catalogue.stream_online(
                    stream_id=stream.id,
                    channel=catalogue.Person.of(channel),
                    title=settings.title,
                    category=settings.category,
                    started_at=iso8601(emitter.now_ms),
                ),
            )
            return Published(stream, channel, started=True)

        published = await self._publisher.write(change)
        if published.started:
            self._went_live.set()
            self._went_live = trio.Event()
        return published

    async def unpublish(self, key: str) -> Vod:
        """The publisher with `key` stopped; NotLive when no stream is open for that key."""
        return await self._close(lambda tx: repo.open_stream_by_key(tx, hash_key(key)), "unpublished")

    async def unpublish_path(self, source: str, media_path: str) -> Vod:
        """MediaMTX reports paths, not keys, when a stream stops (runOnUnavailable): the
        path's channel, and only its stream from that source, stops."""
        return await self._close(lambda tx: _open_stream_of_path(tx, source, media_path), "unpublished")

    async def heartbeat(self, key: str) -> Stream:
        return await self._touch(lambda tx: repo.open_stream_by_key(tx, hash_key(key)))

    async def heartbeat_path(self, source: str, media_path: str) -> Stream:
        return await self._touch(lambda tx: _open_stream_of_path(tx, source, media_path))

    async def _touch(self, find: Callable[[Tx], Stream | None]) -> Stream:
        now = self._now()

        def change(tx: Tx) -> Stream:
            stream = find(tx)
            if stream is None:
                raise NotLive()
            repo.touch_stream(tx, stream.id, now)
            return stream

        return await self._db.write(change)

    async def _close(self, find: Callable[[Tx], Stream | None], reason: str) -> Vod:
        def change(tx: Tx, emitter: Emitter) -> Vod:
            stream = find(tx)
            if stream is None:
                raise NotLive()
            vod = self._close_stream(tx, emitter, stream, reason)
            if vod is None:
                raise NotLive()
            return vod

        return await self._publisher.write(change)

    def _close_stream(self, tx: Tx, emitter: Emitter, stream: Stream, reason: str) -> Vod | None:
        if not repo.close_stream(tx, stream.id, emitter.now_ms, reason):
            return None
        channel = channel_by_id(tx, stream.channel_id)
        settings = self._settings(tx, stream.channel_id, emitter.now_ms)
        vod = Vod(
            id=str(uuid.uuid4()),
            channel_id=stream.channel_id,
            stream_id=stream.id,
            title=settings.title,
            category=settings.category,
            tags=settings.tags,
            started_at=stream.started_at,
            ended_at=emitter.now_ms,
            duration_ms=max(0, emitter.now_ms - stream.started_at),
            created_at=emitter.now_ms,
        )
        repo.insert_vod(tx, vod)
        emitter.emit(
            stream.channel_id,
            "stream.offline",
            catalogue.stream_offline(
                stream_id=stream.id,
                channel=catalogue.Person.of(channel),
                ended_at=iso8601(emitter.now_ms),
                vod_id=vod.id,
            ),
        )
        return vod

    async def close_silent(self) -> int:
        """Close the live streams no hook has touched within the silence timeout."""
        if self.silence_timeout_seconds <= 0:
            return 0
        cutoff = self._now() - to_ms(self.silence_timeout_seconds)

        def change(tx: Tx, emitter: Emitter) -> int:
            silent = repo.silent_streams(tx, cutoff)
            return sum(1 for stream in silent if self._close_stream(tx, emitter, stream, "silence") is not None)

        closed = await self._publisher.write(change)
        if closed:
            log.info("closed %d live stream(s) whose media server went silent", closed)
        return closed

    async def watch_silence(self) -> None:
        """Run forever (a supervised service): close each live stream once it has been silent
        for the timeout. It sleeps until the oldest heartbeat's deadline, so nothing runs while
        every stream is fresh; with no live stream it waits for one to open here, and looks
        again every ten timeouts for streams that other processes opened (and may have left
        behind when they died)."""
        if self.silence_timeout_seconds <= 0:
            await trio.sleep_forever()
        timeout_ms = to_ms(self.silence_timeout_seconds)
        while True:
            oldest = await self._db.read(repo.oldest_open_heartbeat)
            if oldest is None:
                wait = self.silence_timeout_seconds * 10
            else:
                # A little past the deadline (the sweep closes strictly older streams), and never
                # a busy loop if a heartbeat raced the sweep.
                wait = max(0.05, (oldest + timeout_ms - self._now() + 1) / 1000)
            went_live = self._went_live
            with trio.move_on_after(wait):
                await went_live.wait()
                continue  # a stream opened here: its deadline may be the next one
            if oldest is not None:
                await self.close_silent()

    # --- browse -----------------------------------------------------------------------------

    async def live_page(self, filters: LiveFilter, limit: int, cursor: str | None) -> Page:
        return await self._db.read(lambda tx: repo.live_page(tx, filters, limit, cursor))

    async def ranked(
        self, score: Callable[[LiveStream], Awaitable[float]], limit: int, cursor: str | None
    ) -> tuple[list[tuple[LiveStream, float]], str | None]:
        """Live streams by `score` (viewers come from presence, which may be a database read
        across processes), highest first; the cursor is a position in this ranking."""
        start = decode_cursor(cursor, 1)[0] if cursor is not None else 0
        if not isinstance(start, int) or start < 0:
            raise InvalidCursor("cursor is not one this server issued")
        found = await self._db.read(repo.live_all)
        scores = [(live, await score(live)) for live in found]
        scored = sorted(scores, key=lambda item: (-item[1], item[0].stream.id))
        page = scored[start : start + limit]
        more = start + limit < len(scored)
        return page, encode_cursor(start + limit) if more else None

    async def featured(self, usernames: list[str]) -> list[LiveStream]:
        """The live ones among the operator's featured channels, in the configured order."""

        def read(tx: Tx) -> list[LiveStream]:
            found = users_repo.get_many_by_username_insensitive(tx, usernames)
            ids = [user.id for user in found.values()]
            live = {item.channel.id: item for item in repo.live_of_channels(tx, ids)}
            ordered = [found.get(name.lower()) for name in usernames]
            return [live[user.id] for user in ordered if user is not None and user.id in live]

        return await self._db.read(read)

    async def channel(self, username: str) -> Info:
        now = self._now()

        def read(tx: Tx) -> Info:
            channel = channel_by_username(tx, username)
            return Info(channel, self._settings(tx, channel.id, now), repo.open_stream(tx, channel.id))

        return await self._db.write(read)

    async def vods(self, username: str, limit: int, cursor: str | None) -> tuple[User, Page]:
        def read(tx: Tx) -> tuple[User, Page]:
            channel = channel_by_username(tx, username)
            return channel, repo.vods_page(tx, channel.id, limit, cursor)

        return await self._db.read(read)

    # --- clips ------------------------------------------------------------------------------

    async def create_clip(self, username: str, creator_id: str, fields: dict[str, Any]) -> ClipView:
        """A clip of the live stream, or else of the channel's latest recorded stream; the
        span [startOffsetMs, startOffsetMs + durationMs] must lie within that stream."""
        now = self._now()

        def change(tx: Tx) -> ClipView:
            channel = channel_by_username(tx, username)
            creator = channel_by_id(tx, creator_id)
            live = repo.open_stream(tx, channel.id)
            vod: Vod | None = None
            if fields.get("vodId") is not None:
                vod = repo.get_vod(tx, fields["vodId"])
                if vod is None or vod.channel_id != channel.id:
                    raise VodNotFound(fields["vodId"])
                stream_id, available = vod.stream_id, vod.duration_ms
            elif live is not None:
                stream_id, available = live.id, max(0, now - live.started_at)
            else:
                vod = repo.latest_vod(tx, channel.id)
                if vod is None:
                    raise NoStreamToClip()
                stream_id, available = vod.stream_id, vod.duration_ms
            if fields["startOffsetMs"] + fields["durationMs"] > available:
                raise ClipOutOfRange(available)
            clip = Clip(
                id=str(uuid.uuid4()),
                channel_id=channel.id,
                stream_id=stream_id,
                creator_id=creator.id,
                title=fields["title"],
                description=fields.get("description") or "",
                duration_ms=fields["durationMs"],
                start_offset_ms=fields["startOffsetMs"],
                highlight=bool(fields.get("highlight", False)),
                created_at=now,
            )
            repo.insert_clip(tx, clip)
            return ClipView(clip, channel, creator, vod.id if vod else None)

        return await self._db.write(change)

    async def clip(self, clip_id: str) -> ClipView:
        def read(tx: Tx) -> ClipView:
            clip = repo.get_clip(tx, clip_id)
            if clip is None:
                raise ClipNotFound(clip_id)
            return self._clip_view(tx, clip)

        return await self._db.read(read)

    async def clips(self, username: str, limit: int, cursor: str | None) -> Page:
        def read(tx: Tx) -> Page:
            channel = channel_by_username(tx, username)
            page = repo.clips_page(tx, channel.id, limit, cursor)
            return Page([self._clip_view(tx, clip) for clip in page.items], page.next_cursor)

        return await self._db.read(read)

    def _clip_view(self, tx: Tx, clip: Clip) -> ClipView:
        channel = channel_by_id(tx, clip.channel_id)
        creator = users_repo.get_by_id(tx, clip.creator_id) if clip.creator_id else None
        vod = tx.scalar("SELECT id FROM vods WHERE stream_id = ?", (clip.stream_id,))
        return ClipView(clip, channel, creator, vod)

    def _now(self) -> int:
        return to_ms(self._clock.now())


def _described(settings: StreamSettings) -> tuple[Any, ...]:
    """What `stream.update` reports: a change of any of it fires the event."""
    return (settings.title, settings.category, settings.tags, settings.channel_tags)


def _open_stream_of_path(tx: Tx, source: str, media_path: str) -> Stream | None:
    """The open stream of the channel a media-server path names (its username), when that
    stream came from `source` on that path."""
    try:
        channel = channel_by_username(tx, media_path)
    except ChannelNotFound:
        return None
    stream = repo.open_stream(tx, channel.id)
    if stream is None or stream.source != source or (stream.media_path or "").lower() != media_path.lower():
        return None
    return stream
