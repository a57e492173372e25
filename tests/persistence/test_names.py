"""One namespace of names, kept by a primary key (both backends)."""

from __future__ import annotations

import uuid

import trio

from volthub.persistence import names
from volthub.persistence import users as users_repo


async def test_racing_claims_of_one_name_in_any_case_let_exactly_one_win(db):
    base = f"race{uuid.uuid4().hex[:8]}"
    spellings = [base, base.upper(), base.title(), base.swapcase(), base + ""] * 2
    outcomes: list[str] = []

    async def claim(index: int, spelling: str) -> None:
        def write(tx):  # type: ignore[no-untyped-def]
            if index % 2:
                names.claim(tx, spelling, "bot", f"bot:{uuid.uuid4()}", 10)
            else:
                users_repo.create_user(
                    tx, user_id=str(uuid.uuid4()), username=spelling, display_name="x", password_hash="h", now_ms=10
                )

        try:
            await db.write(write)
            outcomes.append("won")
        except (names.NameTaken, users_repo.UsernameTaken):
            outcomes.append("taken")

    async with trio.open_nursery() as nursery:
        for index, spelling in enumerate(spellings):
            nursery.start_soon(claim, index, spelling)
    assert outcomes.count("won") == 1 and outcomes.count("taken") == len(spellings) - 1


async def test_a_released_name_is_held_until_its_time_then_free(db):
    name = f"held{uuid.uuid4().hex[:8]}"
    await db.write(lambda tx: names.claim(tx, name, "custom_bot", "bot:a:b", 0))
    until = await db.write(lambda tx: names.release(tx, name, "bot:a:b", 1000, 500))
    assert until == 1500
    assert (await db.read(lambda tx: names.current(tx, name.upper(), 1499))) is not None
    assert (await db.read(lambda tx: names.current(tx, name, 1500))) is None

    def someone_else(now: int):  # type: ignore[no-untyped-def]
        return lambda tx: users_repo.create_user(
            tx, user_id=str(uuid.uuid4()), username=name, display_name="x", password_hash="h", now_ms=now
        )

    try:
        await db.write(someone_else(1499))
        raise AssertionError("a held name was taken")
    except users_repo.UsernameTaken:
        pass
    # The holder may take it back while held; after the hold anyone may.
    await db.write(lambda tx: names.claim(tx, name, "custom_bot", "bot:a:b", 1200))
    await db.write(lambda tx: names.release(tx, name, "bot:a:b", 1300, 100))
    await db.write(someone_else(1400))
