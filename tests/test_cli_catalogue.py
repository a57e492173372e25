"""`volthub emotes | badges | teams` against a real database file."""

from __future__ import annotations

import uuid

import trio

from tests.http.test_emotes_badges_teams import PNG
from volthub.cli import main
from volthub.persistence import migrate, open_database
from volthub.persistence import users as users_repo


def _read(url: str, sql: str) -> list:  # type: ignore[type-arg]
    async def go() -> list:  # type: ignore[type-arg]
        database = open_database(url)
        await database.open()
        try:
            await migrate(database)
            return await database.read(lambda tx: [dict(row) for row in tx.execute(sql)])
        finally:
            await database.close()

    return trio.run(go)


def _user(url: str, name: str) -> None:
    async def go() -> None:
        database = open_database(url)
        await database.open()
        try:
            await migrate(database)
            await database.write(
                lambda tx: users_repo.create_user(
                    tx, user_id=str(uuid.uuid4()), username=name, display_name=name, password_hash="h", now_ms=1
                )
            )
        finally:
            await database.close()

    trio.run(go)


def test_catalogue_commands(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    _user(url, "cli_streamer")
    image, junk = tmp_path / "hype.png", tmp_path / "junk.png"
    image.write_bytes(PNG)
    junk.write_bytes(b"not an image")
    env = ["--database", url]
    assert main(["emotes", "add", "hype", str(image), *env]) == 0
    assert main(["emotes", "add", "mine", str(image), "--channel", "CLI_STREAMER", *env]) == 0
    assert main(["emotes", "add", "junk", str(junk), *env]) == 1
    assert main(["emotes", "add", "hype", str(image), *env]) == 1
    rows = _read(url, "SELECT code, channel_id FROM emotes ORDER BY code")
    assert [r["code"] for r in rows] == ["hype", "mine"] and rows[0]["channel_id"] is None
    assert len(_read(url, "SELECT id FROM media")) == 2
    assert main(["emotes", "remove", "hype", *env]) == 0
    assert len(_read(url, "SELECT id FROM media")) == 1
    assert main(["teams", "create", "owls", "Night Owls", "--description", "late", *env]) == 0
    assert main(["teams", "add-member", "owls", "cli_streamer", "--owner", *env]) == 0
    assert main(["teams", "add-member", "owls", "nobody", *env]) == 1
    assert main(["teams", "create", "Bad Slug", "x", *env]) == 1
    assert main(["badges", "award", "cli_streamer", "founder", *env]) == 0
    assert main(["badges", "award", "cli_streamer", "no-such-badge", *env]) == 1
    capsys.readouterr()
    assert main(["teams", "list", *env]) == 0
    assert "owls\tNight Owls\t1" in capsys.readouterr().out
    assert _read(url, "SELECT slug FROM user_badges") == [{"slug": "founder"}]
