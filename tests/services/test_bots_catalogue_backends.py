"""Bots, emotes, badges, teams, journals and extvideo storage on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid

import pytest
import trio

from tests.conftest import create_test_app, stored_user
from tests.http.test_emotes_badges_teams import PNG
from volthub.hub.clock import TrioClock
from volthub.persistence import extvideo as extvideo_repo
from volthub.persistence import users as users_repo
from volthub.services.bots import BotNameTaken, Bots
from volthub.services.catalogue import BadgeCatalogue, Teams
from volthub.services.emotes import Emotes
from volthub.services.journals import Journals
from volthub.services.media import MediaStore, check_image

START = 1_800_000_000.0
DAY = 86_400


async def _bot_app(db, owner_id: str) -> str:  # type: ignore[no-untyped-def]
    client_id = str(uuid.uuid4())
    await db.write(lambda tx: create_test_app(tx, client_id, owner_id, "Bot app", bot_app=True, redirect_uris=()))
    return client_id


async def _username(db, user_id: str) -> str:  # type: ignore[no-untyped-def]
    user = await db.read(lambda tx: users_repo.get_by_id(tx, user_id))
    return user.username


async def test_bot_names_and_the_hold(db, mock_clock: trio.testing.MockClock):
    clock = TrioClock(start=START)
    bots = Bots(db, clock)
    dev, streamer = await stored_user(db), await stored_user(db)
    client_id = await _bot_app(db, dev)
    name = f"Bot{uuid.uuid4().hex[:8]}"
    bot = await bots.configure(dev, client_id, name, None, None)
    assert bot.username == name and bot.default_permission == "everyone"
    with pytest.raises(users_repo.UsernameTaken):
        await stored_user(db, name.lower())
    await bots.select(streamer, client_id)
    custom = f"Cu{uuid.uuid4().hex[:8]}"
    identity = await bots.customize(streamer, None, custom)
    assert identity.name == custom and identity.via == "selected"
    renamed = f"Re{uuid.uuid4().hex[:8]}"
    await bots.configure(dev, client_id, renamed, "?", "vips")
    _, custom_names, held = await bots.instances(dev, client_id)
    assert [c.name for c in custom_names] == [custom] and [h.name_lower for h in held] == [name.lower()]
    _, released, until = await bots.revert(streamer, None)
    assert released == custom and until is not None
    other = await _bot_app(db, dev)
    with pytest.raises(BotNameTaken):
        await bots.configure(dev, other, custom, None, None)
    mock_clock.jump(45 * DAY + 1)
    now = round(clock.now() * 1000)
    await db.write(
        lambda tx: users_repo.create_user(
            tx, user_id=str(uuid.uuid4()), username=custom.upper(), display_name="x", password_hash="h", now_ms=now
        )
    )
    await bots.configure(dev, other, name, None, None)  # the old default is free again too


async def test_media_emotes_badges_teams_and_journals(db, tmp_path, mock_clock: trio.testing.MockClock):
    clock = TrioClock(start=START)
    media = MediaStore(db, clock, storage="database", directory=str(tmp_path))
    emotes = Emotes(db, clock, media, max_bytes=10_000, max_side=512)
    owner = await stored_user(db)
    name = await _username(db, owner)
    image = check_image(PNG, "image/png", 10_000, 512)
    await emotes.add(None, "global_one", image, None)
    await emotes.add(owner, "global_one", image, owner)  # shadows the global one in the channel
    found = await emotes.resolve(["global_one", "missing"], name)
    assert set(found) == {"global_one"} and found["global_one"].channel_id == owner
    stored = await media.read(found["global_one"].media_id)
    assert stored is not None and stored[1] == PNG
    await emotes.remove(owner, "global_one")
    assert (await emotes.resolve(["global_one"], name))["global_one"].channel_id is None

    badges = BadgeCatalogue(db, clock)
    assert await badges.award(name, "founder", None)
    assert not await badges.award(name, "founder", None)
    assert [b.badge.slug for b in (await badges.of_user(name, name)).badges] == ["broadcaster", "founder"]

    teams = Teams(db, clock)
    slug = f"t{uuid.uuid4().hex[:8]}"
    await teams.create(slug, "Team")
    for _ in range(3):
        await teams.add_member(slug, await _username(db, await stored_user(db)))
    page, cursor = (await teams.members(slug, 2, None))[1:]
    rest, end = (await teams.members(slug, 2, cursor))[1:]
    assert len(page) == 2 and len(rest) == 1 and end is None

    journals = Journals(db, clock, media, image_max_bytes=10_000, image_max_side=4096)
    first = await journals.create(owner, "Hello", "body", None)
    await journals.create(owner, "Hello", "again", None)
    await journals.publish(owner, first.slug)
    upload = await journals.add_image(owner, first.slug, image)
    assert upload.journal.id == first.id
    public, _ = await journals.public_page(name.upper(), 10, None)
    assert [j.slug for j in public] == ["hello"]
    mine, _ = await journals.page_of(owner, drafts=True, limit=10, cursor=None)
    assert {j.slug for j in mine} == {"hello", "hello-2"}
    await journals.delete(owner, first.slug)
    assert await media.read(upload.media.id) is None

    now = 1000
    await db.write(lambda tx: extvideo_repo.add_state(tx, "h", owner, now, now + 10, "b", "v"))
    taken = await db.write(lambda tx: extvideo_repo.take_state(tx, "h", now))
    assert taken is not None and (taken.user_id, taken.browser_hash, taken.code_verifier) == (owner, "b", "v")
    assert await db.write(lambda tx: extvideo_repo.take_state(tx, "h", now)) is None
