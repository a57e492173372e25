"""Repository tests: each runs on SQLite and on PostgreSQL (`database_url` is parametrised)."""

import pytest

from volthub.persistence import IntegrityError, migrate
from volthub.persistence import users as repo
from volthub.persistence.pagination import InvalidCursor, decode_cursor, encode_cursor
from volthub.persistence.users import UsernameTaken


async def _user(db, name, now=1_000):
    import uuid

    return await db.write(
        lambda tx: repo.create_user(
            tx, user_id=str(uuid.uuid4()), username=name, display_name=name.title(), password_hash="h", now_ms=now
        )
    )


async def test_migrations_are_idempotent(db):
    assert await migrate(db) == []


async def test_usernames_unique_case_insensitively_and_kept_as_typed(db):
    created = await _user(db, "MixedCase")
    with pytest.raises(UsernameTaken):
        await _user(db, "mixedcase")
    found = await db.read(lambda tx: repo.get_by_username_insensitive(tx, "MIXEDCASE"))
    assert found.username == "MixedCase" and found.id == created.id
    assert await db.read(lambda tx: repo.get_by_username(tx, "mixedcase")) is None


async def test_failed_transaction_leaves_nothing(db):
    def change(tx):
        repo.create_user(tx, user_id="a", username="first", display_name="x", password_hash="h", now_ms=1)
        tx.execute("INSERT INTO users (id) VALUES (NULL)")  # violates NOT NULL

    with pytest.raises(IntegrityError):
        await db.write(change)
    assert await db.read(lambda tx: repo.get_by_id(tx, "a")) is None


async def test_follow_is_idempotent_and_pages_newest_first(db):
    star = await _user(db, "star")
    fans = [await _user(db, f"fan{i}") for i in range(5)]
    for i, fan in enumerate(fans):
        created, at = await db.write(lambda tx: repo.follow(tx, fan.id, star.id, 10_000 + i))
        assert created and at == 10_000 + i
    again = await db.write(lambda tx: repo.follow(tx, fans[0].id, star.id, 99_999))
    assert again == (False, 10_000)

    seen, cursor = [], None
    while True:
        page = await db.read(lambda tx: repo.followers(tx, star.id, 2, cursor))
        seen += [user.username for user, _ in page.items]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == ["fan4", "fan3", "fan2", "fan1", "fan0"]
    following = await db.read(lambda tx: repo.following(tx, fans[0].id, 10, None))
    assert [user.id for user, _ in following.items] == [star.id]
    assert await db.write(lambda tx: repo.unfollow(tx, fans[0].id, star.id)) is True
    assert await db.write(lambda tx: repo.unfollow(tx, fans[0].id, star.id)) is False
    assert await db.read(lambda tx: repo.count_followers(tx, star.id)) == 4


async def test_search_prefix_first_and_escapes_wildcards(db):
    for name in ("bob_builder", "bobby", "xbob", "b_o_b"):
        await _user(db, name)
    names = [u.username for u in await db.read(lambda tx: repo.search(tx, "bob", 10))]
    assert names[:2] == ["bob_builder", "bobby"] and "xbob" in names
    literal = [u.username for u in await db.read(lambda tx: repo.search(tx, "b_o", 10))]
    assert literal == ["b_o_b"]  # "_" is not a wildcard
    assert await db.read(lambda tx: repo.search(tx, "%", 10)) == []


def test_cursor_round_trip_and_garbage():
    assert decode_cursor(encode_cursor(5, "abc"), 2) == [5, "abc"]
    for garbage in ["", "!!!", encode_cursor(1), encode_cursor([1], {}), "bnVsbA"]:
        with pytest.raises(InvalidCursor):
            decode_cursor(garbage, 2)
